"""Shared benchmark plumbing: throwaway databases and a real `ctxc serve` process."""

from __future__ import annotations

import asyncio
import json
import math
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import asyncpg
import httpx
from sqlalchemy.engine import make_url

METRICS_TOKEN = "bench-scraper"
POSTGRES_ADMIN_URL = os.environ.get(
    "CTXC_TEST_POSTGRES_URL", "postgresql+asyncpg://postgres@127.0.0.1:5432/postgres"
)


def _dsn(url: str) -> str:
    return make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


async def _admin(sql: str) -> None:
    conn = await asyncpg.connect(_dsn(POSTGRES_ADMIN_URL), timeout=5)
    try:
        await conn.execute(sql)
    finally:
        await conn.close()


@contextmanager
def database(kind: str) -> Iterator[str]:
    """An empty database URL of ``kind``, removed afterwards."""
    if kind == "sqlite":
        with tempfile.TemporaryDirectory() as tmp:
            yield f"sqlite+aiosqlite:///{Path(tmp) / 'bench.db'}"
        return
    name = f"ctxc_bench_{uuid.uuid4().hex[:8]}"
    asyncio.run(_admin(f'CREATE DATABASE "{name}"'))
    try:
        yield make_url(POSTGRES_ADMIN_URL).set(database=name).render_as_string(hide_password=False)
    finally:
        asyncio.run(_admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


def _ctxc(url: str, *args: str) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CTXC_")}
    env["CTXC_DATABASE_URL"] = url
    done = subprocess.run(
        [sys.executable, "-m", "app.cli", *args],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.strip()


def _port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@contextmanager
def server(url: str) -> Iterator[httpx.Client]:
    """Migrate ``url``, serve it from a separate process, and yield a keyed client."""
    with served(url) as (client, _):
        yield client


@contextmanager
def served(
    url: str, max_body_bytes: int = 256 * 1024 * 1024, timeout: float = 120
) -> Iterator[tuple[httpx.Client, int]]:
    """Migrate ``url``, serve it from a separate process (bodies up to ``max_body_bytes``: the
    10,000-message histories), and yield a keyed client and the server's pid."""
    _ctxc(url, "migrate")
    env = {"CTXC_MAX_BODY_BYTES": str(max_body_bytes)}
    with serving(url, env, "bench") as (base, key, pid):
        headers = {"Authorization": f"Bearer {key}"}
        with httpx.Client(base_url=base, headers=headers, timeout=timeout) as client:
            yield client, pid


@contextmanager
def serving(url: str, env: dict[str, str], tenant: str) -> Iterator[tuple[str, str, int]]:
    """``ctxc serve`` on the migrated ``url`` in keys mode (``env`` over the defaults), with a
    key of a new ``tenant``: its base URL, the key and the pid."""
    key = _ctxc(url, "keys", "create", "--tenant", tenant)
    port = _port()
    served_env = {k: v for k, v in os.environ.items() if not k.startswith("CTXC_")}
    served_env |= {
        "CTXC_DATABASE_URL": url,
        "CTXC_AUTH": "keys",
        "CTXC_LOG_LEVEL": "warning",
        "CTXC_METRICS_TOKEN": METRICS_TOKEN,
        # One process, whose metrics are the server's (a benchmark of several sets its own).
        "CTXC_WORKERS": "1",
    } | env
    proc = subprocess.Popen(
        [sys.executable, "-m", "app.cli", "serve", "--port", str(port)],
        env=served_env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        for _ in range(600):
            try:
                if httpx.get(f"{base}/readyz").status_code == 200:
                    break
            except httpx.TransportError:
                time.sleep(0.1)
        yield base, key, proc.pid
    finally:
        proc.terminate()
        proc.wait(timeout=60)


def metric(client: httpx.Client, name: str) -> float:
    """The sum of a counter's samples in the server's ``/metrics`` (0 when absent)."""
    page = client.get("/metrics", headers={"Authorization": f"Bearer {METRICS_TOKEN}"})
    page.raise_for_status()
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in page.text.splitlines()
        if line.startswith(name) and not line.startswith("#")
    )


def percentile(values: list[float], pct: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(pct / 100 * (len(ordered) - 1)))]


def describe(values_s: list[float]) -> str:
    ms = [v * 1000 for v in values_s]
    return f"median {statistics.median(ms):7.2f} ms   p99 {percentile(ms, 99):7.2f} ms"


def verdict(met: bool) -> str:
    """How a figure stands against its target."""
    return "met" if met else "MISSED"


def quick_run(quick: bool | None) -> bool:
    """Whether a benchmark takes its shorter form: as asked, else ``CTXC_BENCH_QUICK``."""
    if quick is None:
        return os.environ.get("CTXC_BENCH_QUICK", "") not in ("", "0")
    return quick


def to_json(value: Any) -> str:
    """``value`` as indented JSON, a NaN (a share of nothing) as null."""

    def finite(item: Any) -> Any:
        if isinstance(item, float) and math.isnan(item):
            return None
        if isinstance(item, dict):
            return {k: finite(v) for k, v in item.items()}
        if isinstance(item, list | tuple):
            return [finite(v) for v in item]
        return item

    return json.dumps(finite(value), indent=2)
