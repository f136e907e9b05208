"""A long session's compile keeps the tail it read, and the next compile of the same history and
digest reads only the rows stored since (issue 27, item 1). Over HTTP on both databases, two
servers on one database: one keeps tails, the other reads every tail anew. Through appends on
either server (turns that reuse call ids, so the repairs rename them across the parts), digests
moved forward in the background, compactions and executions, each compile of the one is the
compile of the other, and the kept tails were used."""

from __future__ import annotations

import asyncio
import random
import sqlite3
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import text

from app.domain.sessions import SessionPk
from app.settings import Settings
from app.storage import compiles
from app.storage.db import create_engine, create_sessionmaker
from app.storage.migrate import upgrade
from tests.api.test_tail_compile import (
    WINDOW,
    _sql,
    append,
    compiled,
    reads,
    turn,
    wait_for_digest,
)
from tests.conftest import METRICS_TOKEN, Api, LiveServer, make_key, new_session, serve_api

STEPS = 30
PROVIDERS = ("anthropic", "gpt-4o", "openai-responses")


@pytest.fixture(scope="module")
def api(database_url: str) -> Iterator[Api]:
    """The server that keeps tails (and no whole compiles: each compile here reads)."""
    yield from serve_api(database_url, view_cache_bytes=0)


@pytest.fixture(scope="module")
def fresh(api: Api) -> Iterator[httpx.Client]:
    """A second server on the same database that keeps no tail, with tenant A's key."""
    settings = Settings(
        database_url=api.database_url,
        auth="keys",
        metrics_token=METRICS_TOKEN,
        view_cache_bytes=0,
        tail_cache_bytes=0,
    )
    with LiveServer(settings) as server:
        headers = {"Authorization": f"Bearer {api.key_a}"}
        with httpx.Client(base_url=server.url, headers=headers, timeout=60) as client:
            yield client


def digest_of(api: Api, sid: str) -> tuple[str, int] | None:
    """The session's digest (of the default view) as its generation and upto."""
    found = _sql(
        api.database_url,
        "SELECT d.generation, d.upto FROM digests d JOIN sessions s ON s.pk = d.session_pk"
        " WHERE s.id = :sid",
        sid=sid,
    )
    return (str(found[0][0]), int(found[0][1])) if found else None


def kept_reads(client: httpx.Client) -> float:
    """Compiles so far that read a kept tail and the rows since."""
    return reads(client).get("kept", 0)


def grow(rng: random.Random, clients: tuple[httpx.Client, ...], sid: str, n: int, most: int) -> int:
    """Append 1 to ``most`` turns after the ``n`` stored, through either client: half the time
    reusing call ids (renamed across the parts), a fifth of the time traces of execution ``e1``
    (its compiles read the whole history and make the digest theirs, a new generation, which a
    tail kept of the one before must not outlive). The turns stored now."""
    turns = rng.randint(1, most)
    reused = rng.random() < 0.5
    trace = "e1" if rng.random() < 0.2 else None
    batch = [
        m
        for i in range(n, n + turns)
        for m in turn(i, f"c{i % 7}" if reused else None, trace=trace)
    ]
    append(rng.choice(clients), sid, batch)
    return n + turns


def compact(client: httpx.Client, sid: str) -> None:
    """A tool-payload compaction: the history's next version."""
    done = client.post(f"/v1/sessions/{sid}/compact", json={"kind": "tool_payloads"})
    assert done.status_code == 201, done.text


@pytest.mark.parametrize("seed", range(len(PROVIDERS)))
def test_a_kept_tail_compiles_as_a_tail_read_anew(
    api: Api, client: httpx.Client, fresh: httpx.Client, seed: int
) -> None:
    rng = random.Random(seed)
    sid = new_session(client, provider=PROVIDERS[seed], context_window=WINDOW)
    n = 200
    append(client, sid, [m for i in range(n) for m in turn(i, call_id=f"c{i % 7}")])
    compiled(client, sid)  # reads it all; a digest is made in the background
    wait_for_digest(api, sid)
    first, kept = digest_of(api, sid), kept_reads(client)
    for _ in range(STEPS):
        n = grow(rng, (client, fresh), sid, n, 4)
        if rng.random() < 0.1:
            compact(client, sid)
        body = {"execution_id": rng.choice(("e1", "e2"))} if rng.random() < 0.3 else {}
        assert compiled(client, sid, **body) == compiled(fresh, sid, **body)
    assert kept_reads(client) > kept
    assert digest_of(api, sid) != first  # moved forward or made anew meanwhile


def kept_whole_reads(client: httpx.Client) -> float:
    """Compiles so far that read a short history kept whole and the rows since."""
    return reads(client).get("kept_whole", 0)


@pytest.mark.parametrize("seed", range(len(PROVIDERS)))
def test_a_short_history_kept_whole_compiles_as_one_read_anew(
    client: httpx.Client, fresh: httpx.Client, seed: int
) -> None:
    """A history too short for a digest is read whole; the next compile of the same version
    reads the rows stored since. Through appends on either server, compactions (a new version)
    and compiles that trim, each compile of the one is the compile of the other."""
    rng = random.Random(seed)
    sid = new_session(client, provider=PROVIDERS[seed], context_window=128_000)
    n = 20
    append(client, sid, [m for i in range(n) for m in turn(i, call_id=f"c{i % 7}")])
    before = kept_whole_reads(client)
    for _ in range(STEPS):
        n = grow(rng, (client, fresh), sid, n, 3)
        if rng.random() < 0.15:
            compact(client, sid)
        body: dict[str, Any] = {"execution_id": "e1"} if rng.random() < 0.2 else {}
        if rng.random() < 0.3:
            body["context_window"] = 3_000  # trimmed, and still too short for a digest
        assert compiled(client, sid, **body) == compiled(fresh, sid, **body)
    assert kept_whole_reads(client) > before
    assert kept_whole_reads(fresh) == 0


def restore(path: Path, older: Path) -> None:
    """Every table of the database at ``path`` as it is in the copy ``older``, in one
    transaction (what a server sees of a restore from a backup while it runs)."""
    db = sqlite3.connect(path, isolation_level=None)
    try:
        db.execute("ATTACH DATABASE ? AS older", (str(older),))
        tables = db.execute(
            "SELECT name FROM older.sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
        ).fetchall()
        db.execute("PRAGMA foreign_keys = OFF")
        db.execute("BEGIN IMMEDIATE")
        for (table,) in tables:
            db.execute(f'DELETE FROM main."{table}"')
            db.execute(f'INSERT INTO main."{table}" SELECT * FROM older."{table}"')
        db.execute("COMMIT")
    finally:
        db.close()


def test_a_sqlite_file_restored_from_an_older_copy_is_read_anew(tmp_path: Path) -> None:
    """After the database is put back as an older copy was, new appends reuse the seqs of messages
    the kept read holds: the next compile sees the row it kept is not there, reads all of the rows,
    and answers as a server that kept nothing."""
    path = tmp_path / "ctxc.db"
    url = f"sqlite+aiosqlite:///{path}"
    upgrade(url)
    key = make_key(url, f"t-{uuid.uuid4().hex[:6]}")
    keeping = LiveServer(Settings(database_url=url, auth="keys", view_cache_bytes=0))
    headers = {"Authorization": f"Bearer {key}"}
    with keeping as server, httpx.Client(base_url=server.url, headers=headers) as client:
        sid = new_session(client, provider="gpt-4o", context_window=128_000)
        append(client, sid, [m for i in range(10) for m in turn(i)])
        compiled(client, sid)
        with sqlite3.connect(path) as source, sqlite3.connect(tmp_path / "older.db") as copy:
            source.backup(copy)
        append(client, sid, turn(10, call_id="lost"))
        assert "lost" in str(compiled(client, sid))
        restore(path, tmp_path / "older.db")
        append(client, sid, turn(11, call_id="kept"))
        answer = compiled(client, sid)
    nothing_kept = Settings(database_url=url, auth="keys", view_cache_bytes=0, tail_cache_bytes=0)
    with (
        LiveServer(nothing_kept) as server,
        httpx.Client(base_url=server.url, headers=headers) as c,
    ):
        assert answer == compiled(c, sid)
    assert "lost" not in str(answer) and "kept" in str(answer)


def versioned(url: str, sid: str, after: int) -> tuple[int | None, list[Any], list[Any]]:
    """``compiles.versioned_rows_after`` of the session ``sid`` after ``after``, beside
    ``rows_after`` read in the same transaction."""

    async def run() -> tuple[int | None, list[Any], list[Any]]:
        engine = create_engine(url)
        try:
            async with create_sessionmaker(engine)() as db:
                found = await db.scalar(text("SELECT pk FROM sessions WHERE id = :id"), {"id": sid})
                pk = SessionPk(found or "gone")
                version, rows = await compiles.versioned_rows_after(db, pk, after, "o200k_base")
                plain = await compiles.rows_after(db, pk, after, "o200k_base")
                return version, [tuple(r)[1:] for r in rows], [tuple(r) for r in plain]
        finally:
            await engine.dispose()

    return asyncio.run(run())


def test_the_rows_since_come_with_the_version_they_are_of(api: Api, client: httpx.Client) -> None:
    """The rows a short history kept whole reads since its last, and the history's version, in
    one statement: the rows are ``rows_after``'s from any seq (none past the last), the version
    moves with a compaction, and a deleted session has neither."""
    sid = new_session(client, provider="gpt-4o")
    append(client, sid, [m for i in range(6) for m in turn(i, call_id=f"c{i}")])
    last = client.get(f"/v1/sessions/{sid}").json()["last_seq"]
    for after in (0, 1, last // 2, last - 1, last, last + 5):
        version, rows, plain = versioned(api.database_url, sid, after)
        assert version == 0
        assert rows == plain and len(rows) == max(0, last - after)
    compact(client, sid)
    version, rows, plain = versioned(api.database_url, sid, 0)
    assert version == 1 and rows == plain
    assert client.delete(f"/v1/sessions/{sid}").status_code == 204
    assert versioned(api.database_url, sid, 0) == (None, [], [])
