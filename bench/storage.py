"""Bytes stored per message, before and after the retention sweep, on each database.

An agent's session through HTTP: every turn appends the last reply and a prompt (one request
with an Idempotency-Key), compiles and acknowledges the compile with its usage. Then a day
passes for the sweep (app/services/sessions/retention.py, run with its clock a day ahead).
Figures are the bytes tables and their indexes grew by since the schema was made (SQLite: the
pages' used bytes, from dbstat; Postgres: pg_total_relation_size after VACUUM FULL, so deleted
rows' space is not counted), per stored message, beside the floor: the messages table and its
index alone. Also the rows
the query of the last reported compile (``queries.unacted_report``, which every compile of a
session with a compaction policy runs) reads, with the index of migration 0013 and without it
(the schema before).
"""

from __future__ import annotations

import asyncio
import json
import random
import sqlite3
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
from sqlalchemy import text
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncConnection

from app.services.sessions.retention import Retention, prune
from app.storage.db import create_engine, create_sessionmaker
from bench.append import agent_batch
from bench.common import _ctxc, database, quick_run, serving

TURNS = 1_000
KEYS = ("idempotency_keys",)
COMPILES = ("compiles",)


def run(quick: bool | None = None) -> None:
    turns = 150 if quick_run(quick) else TURNS
    print(f"storage: {turns} agent turns (2 messages, 1 keyed append, 1 compile acknowledged)")
    for kind in ("sqlite", "postgres"):
        with database(kind) as url:
            _ctxc(url, "migrate")
            empty = asyncio.run(_sizes(url))
            env = {"CTXC_RETENTION_SWEEP_SECONDS": "86400"}  # the sweep below is the only one
            with serving(url, env, "bench") as (base, key, _):
                headers = {"Authorization": f"Bearer {key}"}
                with httpx.Client(base_url=base, headers=headers, timeout=120) as client:
                    sid = _session(client, turns)
            before = asyncio.run(_sizes(url))
            asyncio.run(_sweep(url))
            after = asyncio.run(_sizes(url))
            reads = asyncio.run(_reported_reads(url, sid))
            _print(kind, _grown(before, empty), _grown(after, empty), reads)


def _session(client: httpx.Client, turns: int) -> str:
    """A codex-cli session after ``turns`` turns."""
    rng = random.Random(11)
    sid: str = client.post("/v1/sessions", json={"provider": "codex-cli"}).json()["id"]
    for turn in range(turns):
        batch = agent_batch(rng, turn * 10)[2:4]  # a tool result and a reply: 2 messages
        headers = {"Idempotency-Key": f"turn-{turn}"}
        client.post(
            f"/v1/sessions/{sid}/messages", json={"messages": batch}, headers=headers
        ).raise_for_status()
        compiled = client.post(f"/v1/sessions/{sid}/compile", json={})
        compiled.raise_for_status()
        body = {"compile_id": compiled.json()["compile_id"], "usage": {"prompt_tokens": 900}}
        client.post(f"/v1/sessions/{sid}/cursor", json=body).raise_for_status()
    return sid


async def _sweep(url: str) -> None:
    engine = create_engine(url)
    try:
        day = timedelta(days=1)
        later = datetime.now(UTC) + 2 * day
        await prune(create_sessionmaker(engine), Retention(day, day), later)
    finally:
        await engine.dispose()


def _grown(sizes: dict[str, int], empty: dict[str, int]) -> dict[str, int]:
    """What each table grew by since the schema was made (a table's first pages are the same
    for one message as for none), row counts as they are."""
    return {t: size - empty.get(t, 0) if " " not in t else size for t, size in sizes.items()}


async def _with(url: str, work: Callable[[AsyncConnection], Any], autocommit: bool) -> Any:
    engine = create_engine(url)
    try:
        options = {"isolation_level": "AUTOCOMMIT"} if autocommit else {}
        async with engine.connect() as conn:
            return await work(await conn.execution_options(**options))
    finally:
        await engine.dispose()


_SQLITE_SIZES = """
    SELECT m.tbl_name, SUM(d.pgsize - d.unused) FROM dbstat d
    JOIN sqlite_master m ON m.name = d.name GROUP BY m.tbl_name
"""
_PG_SIZES = """
    SELECT relname, pg_total_relation_size(oid) FROM pg_class
    WHERE relkind = 'r' AND relnamespace = 'public'::regnamespace
"""


async def _sizes(url: str) -> dict[str, int]:
    """Bytes of each table with its indexes, and ``count``: the stored messages."""

    async def work(conn: AsyncConnection) -> dict[str, int]:
        if conn.dialect.name == "postgresql":
            await conn.execute(text("VACUUM FULL"))
            rows = await conn.execute(text(_PG_SIZES))
        else:
            rows = await conn.execute(text(_SQLITE_SIZES))
        sizes = {name: int(size) for name, size in rows}
        sizes["count"] = int((await conn.execute(text("SELECT COUNT(*) FROM messages"))).scalar())
        for table in ("idempotency_keys", "compiles"):
            found = await conn.execute(text(f"SELECT COUNT(*) FROM {table}"))
            sizes[f"{table} rows"] = int(found.scalar())
        return sizes

    sizes: dict[str, int] = await _with(url, work, autocommit=True)
    return sizes


# ``queries.unacted_report``'s statement as the app runs it.
_LAST_REPORTED = """
    SELECT usage, error_kind, EXISTS (
        SELECT later.id FROM compiles AS later
        WHERE later.session_pk = :pk AND later.created_at > compiles.reported_at
    )
    FROM compiles WHERE session_pk = :pk
    AND reported_at IS NOT NULL ORDER BY reported_at DESC LIMIT 1
"""


async def _reported_reads(url: str, sid: str) -> dict[str, str]:
    """What the last report's query reads with the index and without it (dropped, then put back),
    on a session with as many reported compiles as turns (the sweep's remains would flatter
    the figure)."""
    pk = await _refill(url, sid)

    async def work(conn: AsyncConnection) -> dict[str, str]:
        found = {"with the index": await _plan(conn, pk)}
        await conn.execute(text("DROP INDEX ix_compiles_reported"))
        found["without it (main)"] = await _plan(conn, pk)
        await conn.execute(text(_RECREATE))
        return found

    if url.startswith("sqlite"):
        return _sqlite_reads(make_url(url).database or "", pk)
    reads: dict[str, str] = await _with(url, work, autocommit=True)
    return reads


_RECREATE = "CREATE INDEX ix_compiles_reported ON compiles (session_pk, reported_at)"


async def _refill(url: str, sid: str) -> str:
    """As many reported compiles of the session as turns; the session's pk."""

    async def work(conn: AsyncConnection) -> str:
        count = int((await conn.execute(text("SELECT COUNT(*) FROM messages"))).scalar()) // 2
        found = await conn.execute(text("SELECT pk FROM sessions WHERE id = :sid"), {"sid": sid})
        pk = str(found.scalar())
        for i in range(count):
            at = datetime(2026, 1, 1, tzinfo=UTC) + timedelta(seconds=i)
            await conn.execute(
                text(
                    "INSERT INTO compiles (id, session_pk, mode, token_total, created_at,"
                    " reported_at) VALUES (:id, :pk, 'delta', 1, :at, :at)"
                ),
                {"id": f"bench-{i}", "pk": pk, "at": at},
            )
        await conn.execute(text("ANALYZE"))
        return pk

    pk: str = await _with(url, work, autocommit=True)
    return pk


async def _plan(conn: AsyncConnection, pk: str) -> str:
    """The rows the query's scans read (Postgres)."""
    explain = text(f"EXPLAIN (ANALYZE, FORMAT JSON) {_LAST_REPORTED}")
    plan = (await conn.execute(explain, {"pk": pk})).scalar()
    plan = json.loads(plan) if isinstance(plan, str) else plan
    return f"{_rows_read(plan[0]['Plan'])} rows read"


def _sqlite_reads(path: str, pk: str) -> dict[str, str]:
    """The query's plan and virtual machine steps (SQLite counts no rows read)."""
    found: dict[str, str] = {}
    conn = sqlite3.connect(path, isolation_level=None, cached_statements=0)
    try:
        for label in ("with the index", "without it (main)"):
            plan = conn.execute(f"EXPLAIN QUERY PLAN {_LAST_REPORTED}", {"pk": pk}).fetchall()
            found[label] = (
                f"{_steps(conn, pk)} VM steps ({'; '.join(str(row[-1]) for row in plan)})"
            )
            if label == "with the index":
                conn.execute("DROP INDEX ix_compiles_reported")
        conn.execute(_RECREATE)
    finally:
        conn.close()
    return found


def _steps(conn: sqlite3.Connection, pk: str) -> int:
    """The virtual machine steps of one run of the query."""
    steps = 0

    def step() -> int:
        nonlocal steps
        steps += 1
        return 0  # go on

    conn.set_progress_handler(step, 1)
    conn.execute(_LAST_REPORTED, {"pk": pk}).fetchall()
    conn.set_progress_handler(None, 0)
    return steps


def _rows_read(node: dict[str, Any]) -> int:
    """Rows the plan's scans produced or filtered out."""
    own = 0
    if "Scan" in node["Node Type"]:
        own = int(node.get("Actual Rows", 0)) + int(node.get("Rows Removed by Filter", 0))
    return own + sum(_rows_read(child) for child in node.get("Plans", []))


def _print(kind: str, before: dict[str, int], after: dict[str, int], reads: dict[str, str]) -> None:
    for label, sizes in (("before the sweep", before), ("after the sweep", after)):
        count = sizes["count"]
        tables = [t for t in sizes if " " not in t and t != "count"]
        total = sum(sizes[t] for t in tables if not t.startswith("sqlite_")) / count
        keys = sizes.get("idempotency_keys", 0) / count
        compiles = sizes.get("compiles", 0) / count
        floor = sizes.get("messages", 0) / count
        print(
            f"  {kind:8s} {label:17s} {total:6.0f} B/message (floor: messages alone {floor:5.0f}; "
            f"keys {keys:4.0f}, compiles {compiles:4.0f}; rows: "
            f"{sizes['idempotency_keys rows']} keys, {sizes['compiles rows']} compiles, "
            f"{count} messages)"
        )
    for label, found in reads.items():
        print(f"  {kind:8s} the last report's query {label}: {found}")


if __name__ == "__main__":
    run()
