"""`ctxc serve` as a real process that the fault tests kill with SIGKILL and start again.

It is started as `make serve` starts it (`ctxc migrate`, then `ctxc serve`, configured by
environment), in keys mode, always on the same port, so clients reconnect to the same address.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import asyncpg
import httpx

from tests.conftest import _asyncpg_dsn, free_port
from tests.processes import ctxc_command, ctxc_env, stop, wait_ready

BIN = Path(sys.executable).parent


class Server:
    """One database, one port, one process at a time: ``start``, ``kill`` (SIGKILL), ``start``."""

    def __init__(self, database_url: str, log_dir: Path, **env: str) -> None:
        self.database_url = database_url
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        defaults = {
            "CTXC_DATABASE_URL": database_url,
            "CTXC_PORT": str(self.port),
            "CTXC_AUTH": "keys",
            "CTXC_LOG_LEVEL": "warning",
        }
        self.env = ctxc_env(**(defaults | env))
        self.log_dir = log_dir
        self.proc: subprocess.Popen[bytes] | None = None
        self.starts = 0
        self.kills = 0
        self._run("migrate")
        self.key = self._run("keys", "create", "--tenant", "faults").strip()
        self.headers = {"Authorization": f"Bearer {self.key}"}

    def _run(self, *args: str) -> str:
        done = subprocess.run(
            ctxc_command(*args), env=self.env, capture_output=True, text=True, timeout=120
        )
        assert done.returncode == 0, done.stderr
        return done.stdout

    def start(self) -> None:
        assert self.proc is None or self.proc.poll() is not None
        self.starts += 1
        log = (self.log_dir / f"serve-{self.starts}.log").open("wb")
        self.proc = subprocess.Popen(ctxc_command("serve"), env=self.env, stdout=log, stderr=log)
        log.close()
        wait_ready(self.url, self.proc, log=self.log)

    def kill(self) -> None:
        """SIGKILL: no shutdown, no cleanup, as when the machine or the OOM killer stops it."""
        assert self.proc is not None and self.proc.poll() is None, "the server is not running"
        os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=30)
        self.kills += 1

    def cpu_seconds(self) -> float:
        """CPU time (user and system) the running process has used so far (Linux)."""
        assert self.proc is not None
        fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def stop(self) -> None:
        if self.proc is not None:
            stop(self.proc)

    def log(self) -> str:
        return (self.log_dir / f"serve-{self.starts}.log").read_text(errors="replace")

    def client(self, **kwargs: Any) -> httpx.Client:
        return httpx.Client(base_url=self.url, headers=self.headers, timeout=60, **kwargs)


@contextmanager
def running(database_url: str, log_dir: Path, **env: str) -> Iterator[Server]:
    server = Server(database_url, log_dir, **env)
    server.start()
    try:
        yield server
    finally:
        server.stop()


def write_in_flight(database_url: str, timeout: float) -> bool:
    """Wait until a transaction that has written something is open on the database (between
    the first write of a request and its commit); False if none is seen within ``timeout``."""

    async def run() -> bool:
        conn = await asyncpg.connect(_asyncpg_dsn(database_url), timeout=5)
        try:
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline:
                found = await conn.fetchval(
                    "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
                    " AND backend_xid IS NOT NULL AND pid <> pg_backend_pid()"
                )
                if found:
                    return True
            return False
        finally:
            await conn.close()

    return asyncio.run(run())


@contextmanager
def rows_locked(database_url: str, query: str, *args: Any) -> Iterator[None]:
    """Hold the row locks ``query`` (a ``SELECT ... FOR UPDATE``) takes, in a transaction of
    its own, until the ``with`` ends: a writer that needs those rows waits in its transaction,
    after the writes it made before, for as long as the test needs to see it there."""
    locked, release = threading.Event(), threading.Event()
    failed: list[BaseException] = []

    async def hold() -> None:
        conn = await asyncpg.connect(_asyncpg_dsn(database_url), timeout=5)
        try:
            async with conn.transaction():
                await conn.fetch(query, *args)
                locked.set()
                await asyncio.to_thread(release.wait, 120)
        finally:
            await conn.close()

    def run() -> None:
        try:
            asyncio.run(hold())
        except BaseException as exc:  # reported in the test's thread
            failed.append(exc)
            locked.set()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    locked.wait(30)
    if failed:
        raise failed[0]
    try:
        yield
    finally:
        release.set()
        thread.join(timeout=30)


def all_messages(client: httpx.Client, sid: str) -> list[dict[str, Any]]:
    """Every stored message of ``sid``, canonical, in seq order (page by page)."""
    out: list[dict[str, Any]] = []
    after = 0
    while True:
        page = client.get(
            f"/v1/sessions/{sid}/messages", params={"after_seq": after, "limit": 1000}
        )
        assert page.status_code == 200, page.text
        body = page.json()
        out += body["items"]
        if body["next_after_seq"] is None:
            return out
        after = body["next_after_seq"]
