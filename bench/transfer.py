"""Export and import of a 100,000-message session, streamed (NDJSON): time and peak RSS.

`python -m bench.transfer`. On each database: a `ctxc serve` process, its RSS when idle (the
baseline), then its peak RSS while it streams the session out (`GET .../export` with `Accept:
application/x-ndjson`) and while it imports it back (`POST /v1/sessions/import`, the session
deleted first); for contrast, the one-document JSON export. Then the same moves through the
command line (`ctxc export` / `ctxc import`), each a process of its own, against the same
commands on a 1-message session. Peaks are the kernel's high-water mark (VmHWM; reset between
the server's steps).
"""

from __future__ import annotations

import asyncio
import os
import random
import subprocess
import sys
import tempfile
import time
from contextlib import AbstractContextManager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
from sqlalchemy import inspect

from app.adapters.tokenizers import load_counter
from app.domain.models import BUILTIN_CATALOG
from app.domain.sessions import SessionPk, TenantId
from app.services import sessions
from app.services.sessions import messages
from app.services.tenancy import keys
from app.storage import queries
from app.storage import transfer as store
from app.storage.db import create_engine, create_sessionmaker
from app.storage.models import MessageRow, ToolPartRow
from bench import common
from bench.append import agent_batch
from bench.common import database

MESSAGES = 100_000
BATCH = 5_000
NDJSON = "application/x-ndjson"
_COLUMNS = {
    kind: [(p.key, p.columns[0].key) for p in inspect(kind).column_attrs]
    for kind in (MessageRow, ToolPartRow)
}


async def long_session(url: str, tenant_name: str, count: int, batch: list[Any]) -> str:
    """A session of ``count`` messages: ``batch`` (OpenAI shape) parsed and counted once, then
    stored again and again with batched inserts, seqs taken as appends take them."""
    engine = create_engine(url)
    now = datetime.now(UTC)
    parsed, counts = messages.prepare(load_counter(), messages.Batch("openai", "history", batch))
    try:
        async with create_sessionmaker(engine)() as db:
            tenant = TenantId(await keys.ensure_tenant(db, tenant_name, now))
            fields = {"provider": "gpt-4o", "metadata": {}, "system_prompt": []}
            view = await sessions.create_session(db, tenant, None, fields, now, BUILTIN_CATALOG)
            pk = SessionPk(view.row.pk)
            for _ in range(count // len(parsed)):
                last = await queries.reserve_seqs(db, pk, counts)
                assert last is not None
                first = last - len(parsed) + 1
                new = [
                    messages.NewMessage(first + i, "history", m, c, now)
                    for i, (m, c) in enumerate(zip(parsed, counts, strict=True))
                ]
                rows = messages.message_rows(pk, new)
                for kind in (MessageRow, ToolPartRow):
                    values = [
                        {column: getattr(r, attr) for attr, column in _COLUMNS[kind]}
                        for r in rows
                        if isinstance(r, kind)
                    ]
                    await store.insert_rows(db, kind, values)
                await db.commit()
            return view.row.id
    finally:
        await engine.dispose()


def _status(pid: int, field: str) -> int:
    """A /proc/PID/status figure, in KiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise LookupError(field)


def _reset_peak(pid: int) -> None:
    Path(f"/proc/{pid}/clear_refs").write_text("5")  # VmHWM back to the current RSS


def served(url: str) -> AbstractContextManager[tuple[httpx.Client, int]]:
    """``ctxc serve`` on ``url`` (migrated), a keyed client and the server's pid."""
    return common.served(url, max_body_bytes=1 << 30, timeout=600)


# A command's own peak: VmHWM of its process image (ru_maxrss would count the parent's memory at
# fork time, which a child inherits until it execs).
_REPORTING = (
    "import pathlib, sys\n"
    "from app.cli import main\n"
    "code = main(sys.argv[1:])\n"
    "status = pathlib.Path('/proc/self/status').read_text().splitlines()\n"
    "sys.stderr.write([s for s in status if s.startswith('VmHWM:')][0] + '\\n')\n"
    "sys.exit(code)\n"
)


def _command(url: str, *args: str) -> tuple[float, int]:
    """Seconds and peak RSS (KiB) of one `ctxc` command in a process of its own."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("CTXC_")}
    env["CTXC_DATABASE_URL"] = url
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", _REPORTING, *args],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    if done.returncode != 0:
        raise RuntimeError(f"ctxc {' '.join(args)} failed: {done.stderr}")
    peak = [line for line in done.stderr.splitlines() if line.startswith("VmHWM:")][-1]
    return time.perf_counter() - start, int(peak.split()[1])


def _mib(kib: int) -> str:
    return f"{kib / 1024:7.1f} MiB"


def _server_moves(client: httpx.Client, pid: int, sid: str, file: Path) -> None:
    client.get(f"/v1/sessions/{sid}")  # warm: one request served
    idle = _status(pid, "VmRSS")
    print(f"  server idle (baseline)      RSS {_mib(idle)}")
    _reset_peak(pid)
    start = time.perf_counter()
    headers = {"Accept": NDJSON}
    with (
        client.stream("GET", f"/v1/sessions/{sid}/export", headers=headers) as got,
        file.open("wb") as out,
    ):
        for chunk in got.iter_bytes():
            out.write(chunk)
    took, peak = time.perf_counter() - start, _status(pid, "VmHWM")
    size = file.stat().st_size / 1e6
    print(
        f"  export NDJSON  {took:6.1f} s  peak {_mib(peak)}  (+{_mib(peak - idle)})  {size:.0f} MB"
    )
    client.delete(f"/v1/sessions/{sid}").raise_for_status()
    _reset_peak(pid)
    start = time.perf_counter()
    with file.open("rb") as body:
        done = client.post(
            "/v1/sessions/import",
            content=iter(lambda: body.read(1 << 16), b""),
            headers={"Content-Type": NDJSON},
        )
    done.raise_for_status()
    took, peak = time.perf_counter() - start, _status(pid, "VmHWM")
    print(f"  import NDJSON  {took:6.1f} s  peak {_mib(peak)}  (+{_mib(peak - idle)})")
    _reset_peak(pid)
    start = time.perf_counter()
    client.get(f"/v1/sessions/{sid}/export").raise_for_status()
    took, peak = time.perf_counter() - start, _status(pid, "VmHWM")
    print(
        f"  export JSON    {took:6.1f} s  peak {_mib(peak)}  (+{_mib(peak - idle)})  "
        "(one document, for contrast)"
    )


def run() -> None:
    print(f"transfer: a {MESSAGES:,}-message session out and back in, streamed")
    rng = random.Random(7)
    batch = [m for i in range(0, BATCH, 10) for m in agent_batch(rng, i)]
    for kind in ("sqlite", "postgres"):
        with (
            database(kind) as url,
            served(url) as (client, pid),
            tempfile.TemporaryDirectory() as tmp,
        ):
            print(kind)
            sid = asyncio.run(long_session(url, "bench", MESSAGES, batch))
            small = client.post("/v1/sessions", json={}).json()["id"]
            _server_moves(client, pid, sid, Path(tmp) / "http.ndjson")
            for name, session in (("1-message", small), (f"{MESSAGES:,}-message", sid)):
                file = str(Path(tmp) / f"{session}.ndjson")
                took, peak = _command(url, "export", session, "--tenant", "bench", "-o", file)
                print(f"  ctxc export {name:>14}  {took:6.1f} s  peak {_mib(peak)}")
                took, peak = _command(url, "import", file, "--tenant", "copy")
                print(f"  ctxc import {name:>14}  {took:6.1f} s  peak {_mib(peak)}")


if __name__ == "__main__":
    run()
