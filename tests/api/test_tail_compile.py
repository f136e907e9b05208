"""A session compile that trims reads the newest part of a long history and a digest of the
rest (issue 12, item 1), over HTTP on both databases: its answer is the one a compile reading the
whole history gives, while appends move the digest forward, a compaction retires it, and the
execution whose traces the view shows changes."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import time
from collections.abc import Awaitable, Callable, Iterator
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest
from sqlalchemy import delete, select, text
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.adapters.tokenizers import load_counter
from app.domain.compilers.digests import Digest
from app.domain.compilers.registry import BUILTINS
from app.domain.sessions import SessionPk, TenantId
from app.domain.validity.repair import Ids
from app.services.compiling.catching_up import catch_up
from app.services.compiling.digesting import Digester
from app.services.sessions.cache import MessageCache
from app.settings import Settings
from app.storage import digests
from app.storage.db import create_engine, create_sessionmaker
from app.storage.models import DigestRow, SessionRow
from tests.api.test_compile import valid
from tests.conftest import Api, new_session, scrape, serve_api

WINDOW = 2_000  # a digest keeps 2,200 tokens of rounds; a tail of 3,300 moves it forward


@pytest.fixture(scope="module")
def api(database_url: str) -> Iterator[Api]:
    """The server without remembered session compiles: these tests are about what a compile
    reads, and a compile of a session as it was compiled before reads nothing."""
    yield from serve_api(database_url, view_cache_bytes=0)


def turn(n: int, call_id: str | None = None, trace: str | None = None) -> list[dict[str, Any]]:
    """A prompt and a tool round answering it (about 120 tokens)."""
    cid = call_id or f"call_{n}"
    meta = {"metadata": {"is_trace": True, "execution_id": trace}} if trace else {}
    return [
        {"role": "user", "content": f"step {n}: look at module_{n}.py and report what it does"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": cid,
                    "type": "function",
                    "function": {"name": "read_file", "arguments": f'{{"path": "module_{n}.py"}}'},
                }
            ],
            **meta,
        },
        {
            "role": "tool",
            "tool_call_id": cid,
            "content": f"def handler_{n}(): " + "x = 1; " * 30,
            **meta,
        },
        {"role": "assistant", "content": f"module_{n}.py defines handler_{n}, which sets x."},
    ]


def append(client: httpx.Client, sid: str, messages: list[dict[str, Any]]) -> None:
    for start in range(0, len(messages), 500):
        posted = client.post(
            f"/v1/sessions/{sid}/messages", json={"messages": messages[start : start + 500]}
        )
        assert posted.status_code == 201, posted.text


def compiled(client: httpx.Client, sid: str, **body: Any) -> dict[str, Any]:
    answer = client.post(f"/v1/sessions/{sid}/compile", json=body)
    assert answer.status_code == 200, answer.text
    out: dict[str, Any] = valid(answer.json())
    out.pop("compile_id")
    return out


def counts(client: httpx.Client, prefix: str, label: str) -> dict[str, float]:
    """The values so far of the metric lines that start with ``prefix``, by ``label``."""
    found = {}
    for line in scrape(client).text.splitlines():
        if line.startswith(prefix):
            found[line.split(f'{label}="')[1].split('"')[0]] = float(line.rsplit(" ", 1)[1])
    return found


def reads(client: httpx.Client) -> dict[str, float]:
    """Session compiles so far, by what they read."""
    return counts(client, "ctxc_session_compile_reads_total{", "read")


def tail_reads(client: httpx.Client) -> float:
    """Session compiles so far that read a tail: anew, or a kept one and the rows since."""
    found = reads(client)
    return found.get("tail", 0) + found.get("kept", 0)


def _sql(url: str, statement: str, **params: Any) -> list[Any]:
    async def run() -> list[Any]:
        engine = create_engine(url)
        try:
            async with engine.begin() as conn:
                result = await conn.execute(text(statement), params)
                return list(result.all()) if result.returns_rows else []
        finally:
            await engine.dispose()

    return asyncio.run(run())


def digest_upto(api: Api, sid: str, execution: str | None = None) -> int | None:
    """The upto of the digest a compile for ``execution`` finds: its execution's own, else the
    view's if it serves it (a session's digests of the default view)."""
    found = list(digests_of(api, sid).values())
    own = [d for d in found if execution is not None and d.execution_id == execution]
    serving = own or [d for d in found if d.serves(execution)]
    return serving[0].upto if serving else None


def digests_of(api: Api, sid: str) -> dict[str, Digest]:
    """Every digest the session keeps (of any view, for any execution), by its key."""
    rows = _sql(
        api.database_url,
        "SELECT d.view_key, d.digest FROM digests d JOIN sessions s ON s.pk = d.session_pk"
        " WHERE s.id = :sid",
        sid=sid,
    )
    return {k: Digest.from_json(json.loads(d) if isinstance(d, str) else d) for k, d in rows}


def idle(client: httpx.Client) -> None:
    """Once no digest job runs (those the compiles before started have ended)."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        lines = scrape(client).text.splitlines()
        if "ctxc_digest_jobs 0.0" in lines:
            return
        time.sleep(0.05)
    raise AssertionError("a digest job is still running")


def wait_for_digest(api: Api, sid: str, beyond: int = 0, execution: str | None = None) -> int:
    """The digest's upto once a digest past ``beyond`` is written (it is made in the
    background, after the compile that needed it answered)."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        upto = digest_upto(api, sid, execution)
        if upto is not None and upto > beyond:
            return upto
        time.sleep(0.05)
    raise AssertionError(f"no digest past {beyond}")


def whole(api: Api, client: httpx.Client, sid: str, **body: Any) -> dict[str, Any]:
    """The answer of a compile reading the whole history: the session's digests removed first,
    once no job runs that could write one, and the digest that compile makes waited for (made
    in steps: until its job ends)."""
    idle(client)
    _sql(
        api.database_url,
        "DELETE FROM digests WHERE session_pk = (SELECT pk FROM sessions WHERE id = :sid)",
        sid=sid,
    )
    before = reads(client).get("whole", 0)
    answer = compiled(client, sid, **body)
    assert reads(client)["whole"] == before + 1
    idle(client)
    return answer


def test_a_long_session_compiles_from_its_tail_as_from_all_of_it(
    api: Api, client: httpx.Client
) -> None:
    sid = new_session(client, provider="gpt-4o", context_window=WINDOW)
    append(client, sid, [{"role": "system", "content": "You are a careful code reviewer."}])
    append(client, sid, [m for n in range(150) for m in turn(n)])
    first = compiled(client, sid)  # reads it all, then a digest is made
    upto = wait_for_digest(api, sid)
    assert upto > 300
    before = tail_reads(client)
    again = compiled(client, sid)
    assert tail_reads(client) == before + 1
    assert again == first
    assert again["messages"][0]["role"] == "system"
    assert again["left_out"][0]["reason"] == "token_limit"
    # Appends grow the tail; past twice what it keeps, the digest moves forward.
    for start in range(150, 300, 30):
        append(client, sid, [m for n in range(start, start + 30) for m in turn(n)])
        tailed = compiled(client, sid)
        moved = wait_for_digest(api, sid, beyond=upto) if start >= 240 else upto
        assert tailed == whole(api, client, sid)
        upto = digest_upto(api, sid) or moved
    assert upto > 600


def test_the_window_decorator_and_a_posted_spec_read_the_tail_too(
    api: Api, client: httpx.Client
) -> None:
    sid = new_session(client, provider="anthropic", context_window=WINDOW)
    # Reused call ids across the history: Anthropic wants them unique, so the repairs rename
    # the newer ones, whichever part of the history the older one is in.
    append(client, sid, [m for n in range(200) for m in turn(n, call_id=f"c{n % 7}")])
    spec = {"decorators": [{"name": "window", "params": {"rounds": 12}}]}
    reference = compiled(client, sid, compiler=spec)
    wait_for_digest(api, sid)
    before = tail_reads(client)
    assert compiled(client, sid, compiler=spec) == reference
    assert tail_reads(client) == before + 1
    assert any("renamed tool call id" in w for w in reference["warnings"])
    append(client, sid, [m for n in range(200, 210) for m in turn(n, call_id=f"c{n % 7}")])
    assert compiled(client, sid, compiler=spec) == whole(api, client, sid, compiler=spec)


@pytest.mark.parametrize("provider", ["openai-responses", "gemini"])
def test_the_new_shapes_read_the_tail_with_reused_call_ids(
    api: Api, client: httpx.Client, provider: str
) -> None:
    """Responses pairs outputs with calls by id across the whole input, as Anthropic does
    (the newer reuses renamed, whichever part the older one is in); Gemini within a turn."""
    sid = new_session(client, provider=provider, context_window=WINDOW)
    append(client, sid, [m for n in range(200) for m in turn(n, call_id=f"c{n % 7}")])
    reference = compiled(client, sid)
    wait_for_digest(api, sid)
    before = tail_reads(client)
    assert compiled(client, sid) == reference
    assert tail_reads(client) == before + 1
    renamed = any("renamed tool call id" in w for w in reference["warnings"])
    assert renamed == (provider == "openai-responses")
    append(client, sid, [m for n in range(200, 210) for m in turn(n, call_id=f"c{n % 7}")])
    assert compiled(client, sid) == whole(api, client, sid)


@pytest.mark.parametrize("kind", ["full", "tool_payloads"])
def test_a_compaction_retires_the_digest(api: Api, client: httpx.Client, kind: str) -> None:
    sid = new_session(client, provider="gpt-4o", context_window=WINDOW)
    append(client, sid, [m for n in range(150) for m in turn(n)])
    compiled(client, sid)
    upto = wait_for_digest(api, sid)
    body = {"kind": kind} | ({"policy": {"summary_tokens": 300}} if kind == "full" else {})
    done = client.post(f"/v1/sessions/{sid}/compact", json=body)
    assert done.status_code == 201, done.text
    idle(client)
    assert digests_of(api, sid) == {}  # dropped with their ids, not left beside the new ones
    before, tails = reads(client), tail_reads(client)
    answer = compiled(client, sid)
    assert reads(client)["whole"] == before.get("whole", 0) + 1  # of another history
    if kind == "full":
        return  # what is left is short: read whole
    # Still long (its payloads were rewritten in place): a digest of the new history is made.
    deadline = time.monotonic() + 30
    while tail_reads(client) == tails:
        assert time.monotonic() < deadline, "no digest of the rewritten history"
        assert compiled(client, sid) == answer
        time.sleep(0.05)
    assert upto


def test_traces_of_the_older_part_decide_which_executions_a_digest_serves(
    api: Api, client: httpx.Client
) -> None:
    sid = new_session(client, provider="gpt-4o", context_window=WINDOW)
    messages = [m for n in range(150) for m in turn(n, trace="e1" if n % 10 == 3 else None)]
    append(client, sid, messages)
    for execution in ("e1", "e2", "e3", "e1"):
        answer = compiled(client, sid, execution_id=execution)
        wait_for_digest(api, sid, execution=execution)
        assert compiled(client, sid, execution_id=execution) == answer
        assert answer == whole(api, client, sid, execution_id=execution)
    hidden = {r["reason"]: r for r in compiled(client, sid, execution_id="e2")["left_out"]}
    assert hidden["trace"]["count"] == 2 * 15


def test_a_write_moves_no_digest_of_an_execution_whose_traces_it_holds(
    api: Api, client: httpx.Client
) -> None:
    """A digest made by a compile of execution e1 shows e1's traces. An append that brings the
    session's own view up to date (a compile with no execution, which hides them) must not move
    that digest forward as its own (the compile after it would take e1's traces as shown): it
    makes the view's own beside it."""
    sid, theirs = e1_digested(api, client)
    append(client, sid, [m for n in range(150, 200) for m in turn(n)])  # past what it keeps
    assert digest_upto(api, sid, "e1") == theirs.upto  # left for e1's compiles to move
    assert digest_upto(api, sid) not in (None, theirs.upto)
    assert compiled(client, sid) == whole(api, client, sid)
    assert compiled(client, sid, execution_id="e1") == whole(api, client, sid, execution_id="e1")


def test_compiles_of_an_execution_and_of_none_each_keep_their_digest(
    api: Api, client: httpx.Client
) -> None:
    """With traces of e1 in the older part, a compile for e1 and one with no execution see it
    differently. Each finds a digest of its own, so compiles of the two in turns, the session
    growing, read no history whole (each replaced the other's digest, and read it all, when
    there was one digest for the view), and answer as compiles reading it all do."""
    sid, _ = e1_digested(api, client)
    append(client, sid, [m for m in turn(150)])  # the view's own digest made beside e1's
    wait_for_digest(api, sid)
    before, answers = reads(client).get("whole", 0), []
    for n in range(151, 181):
        append(client, sid, [m for m in turn(n)])
        answers.append(compiled(client, sid, execution_id="e1"))
        idle(client)  # a compile beside a step being saved may read it all, as it always may
        answers.append(compiled(client, sid))
        idle(client)
    assert reads(client).get("whole", 0) == before
    kept = digests_of(api, sid).values()
    assert sorted(d.execution_id or "" for d in kept) == ["", "e1"]
    assert answers[-2:] == [
        whole(api, client, sid, execution_id="e1"),
        whole(api, client, sid),
    ]


class Racing(AsyncSession):
    """A database session after one of whose commits another replica's write lands: ``race``,
    once it finds something to do (it answers whether it did)."""

    race: Callable[[], Awaitable[bool]] | None = None

    async def commit(self) -> None:
        await super().commit()
        if Racing.race is not None and await Racing.race():
            Racing.race = None


async def _digest_row(url: str, sid: str) -> DigestRow | None:
    engine = create_engine(url)
    try:
        async with create_sessionmaker(engine)() as db:
            found = select(DigestRow).join(SessionRow, SessionRow.pk == DigestRow.session_pk)
            row = (await db.execute(found.where(SessionRow.id == sid))).scalar_one_or_none()
            if row is not None:
                db.expunge(row)
            return row
    finally:
        await engine.dispose()


DIGEST_COLUMNS = ("session_pk", "view_key", "generation", "upto", "digest", "updated_at")


async def _catch_up_racing(url: str, sid: str, theirs: DigestRow) -> str:
    """The session's own digest made from its whole history by the write's catch-up, while
    another replica puts ``theirs`` in its place right after the first step is saved."""
    engine = create_engine(url)
    plain = create_sessionmaker(engine)

    async def race() -> bool:
        async with plain() as db:
            mine = select(DigestRow.view_key).where(DigestRow.session_pk == theirs.session_pk)
            if (key := await db.scalar(mine)) is None:
                return False  # no step saved yet
            await db.execute(delete(DigestRow).where(DigestRow.session_pk == theirs.session_pk))
            # Under the view's key, as a replica that kept every digest there would.
            row = {c: getattr(theirs, c) for c in DIGEST_COLUMNS} | {"view_key": key}
            db.add(DigestRow(**row))
            await db.commit()
            return True

    Racing.race = race
    try:
        async with plain() as db:
            tenant = await db.scalar(select(SessionRow.tenant_id).where(SessionRow.id == sid))
        digester = Digester(async_sessionmaker(engine, class_=Racing, expire_on_commit=False))
        cache = MessageCache(load_counter(), 1 << 20)
        catalog = Settings(database_url=url).catalog
        return await catch_up(digester, TenantId(tenant), sid, BUILTINS, catalog, cache)
    finally:
        Racing.race = None
        await engine.dispose()


def settled_digest(api: Api, client: httpx.Client, sid: str) -> DigestRow:
    """The session's digest once no digest job runs."""
    idle(client)
    row = asyncio.run(_digest_row(api.database_url, sid))
    assert row is not None, "no digest"
    return row


def e1_digested(api: Api, client: httpx.Client) -> tuple[str, DigestRow]:
    """A long session with traces of execution e1 in its older part, and the digest a compile
    for e1 made of it (showing them), settled."""
    sid = new_session(client, provider="gpt-4o", context_window=WINDOW)
    traced = [m for n in range(150) for m in turn(n, trace="e1" if n % 10 == 3 else None)]
    append(client, sid, traced)
    whole(api, client, sid, execution_id="e1")  # e1's digest is made, none other
    theirs = settled_digest(api, client, sid)
    assert theirs.digest["execution_id"] == "e1"
    return sid, theirs


def test_traces_of_an_execution_in_the_tail_move_the_views_digest_into_its_own(
    api: Api, client: httpx.Client
) -> None:
    """A view no write keeps up to date (another provider's), its digest made with no execution.
    Traces of e1 then come, all of them newer than the digest: it serves e1's compiles, and the
    job that moves it for e1 keeps it under e1's own key (the ids of the older part copied)
    and leaves the view's where it was, for the compiles that hide e1's traces."""
    other = {"provider": "openai-responses"}
    sid = new_session(client, provider="gpt-4o", context_window=WINDOW)
    # Call ids used again and again: the tail's renames depend on the ids of the older part.
    append(client, sid, [m for n in range(150) for m in turn(n, call_id=f"c{n % 7}")])
    whole(api, client, sid, **other)  # the view's digest, for no execution (the only one)
    idle(client)
    [(key, view)] = digests_of(api, sid).items()
    traced = [
        m
        for n in range(150, 200)
        for m in turn(n, call_id=f"c{n % 7}", trace="e1" if n % 5 == 0 else None)
    ]
    append(client, sid, traced)
    before = reads(client).get("whole", 0)
    compiled(client, sid, execution_id="e1", **other)  # from the view's digest, then moved
    idle(client)
    assert reads(client).get("whole", 0) == before
    kept = digests_of(api, sid)
    assert kept[key] == view  # the view's, where it was
    [mine] = [d for d in kept.values() if d.execution_id == "e1"]
    assert mine.upto > view.upto
    answers = [compiled(client, sid, execution_id="e1", **other), compiled(client, sid, **other)]
    assert reads(client).get("whole", 0) == before
    assert answers == [
        whole(api, client, sid, execution_id="e1", **other),
        whole(api, client, sid, **other),
    ]


def test_a_digest_job_moves_no_digest_another_replica_put_in_its_place(
    api: Api, client: httpx.Client
) -> None:
    """Another replica (one that kept every digest under its view's key) may replace a
    session's digest between two steps of a job making it: by one made for execution e1,
    showing e1's traces. The job (here a write's catch-up, for the
    view that hides them) goes no further; moving e1's as its own, the compiles after it would
    take e1's traces as shown."""
    sid, theirs = e1_digested(api, client)
    append(client, sid, [m for n in range(150, 200) for m in turn(n)])
    # None: the catch-up makes the session's own from the start.
    _sql(api.database_url, "DELETE FROM digests WHERE session_pk = :pk", pk=theirs.session_pk)
    assert asyncio.run(_catch_up_racing(api.database_url, sid, theirs)) == "stale"
    now_at = asyncio.run(_digest_row(api.database_url, sid))
    assert now_at is not None and now_at.digest == theirs.digest


async def _move_twice(url: str, pk: str, view_key: str) -> tuple[bool, bool, int]:
    """The session's digest moved forward from where it is, then moved again from there (as two
    replicas' jobs from one read would): whether each was kept, and the upto it is at."""
    engine = create_engine(url)
    try:
        async with create_sessionmaker(engine)() as db:
            prior = await digests.load(db, SessionPk(pk), view_key, 0)
            assert prior is not None
            at, upto = digests.Place(SessionPk(pk), view_key, 0), prior.digest.upto
            nothing = Ids(frozenset(), frozenset())
            kept = []
            for further in (4, 8):
                moved = dataclasses.replace(prior.digest, upto=upto + further)
                kept.append(await digests.save(db, at, moved, nothing, datetime.now(UTC), prior))
                await db.commit()
            now_at = await digests.load(db, SessionPk(pk), view_key, 0)
            assert now_at is not None
            return kept[0], kept[1], now_at.digest.upto
    finally:
        await engine.dispose()


def test_a_move_from_where_the_digest_no_longer_is_keeps_nothing(
    api: Api, client: httpx.Client
) -> None:
    """Two jobs that read the digest at one place may both move it: the first is kept, the
    second (though it goes further) is not, as the ids of the first's part stay beside it."""
    sid = new_session(client, provider="gpt-4o", context_window=WINDOW)
    append(client, sid, [m for n in range(150) for m in turn(n)])
    row = settled_digest(api, client, sid)
    first, second, upto = asyncio.run(_move_twice(api.database_url, row.session_pk, row.view_key))
    assert (first, second, upto) == (True, False, row.upto + 4)


async def _reads_checked(
    url: str, row: DigestRow
) -> dict[str, tuple[Any, Any] | tuple[Any, Any, Any]]:
    """What the checked reads of a tail answer for the session's digest as it stands, for one
    read at another place (moved, replaced, a history rewritten since), past its end, and once
    the session is gone; beside the unchecked reads."""
    engine = create_engine(url)
    try:
        async with create_sessionmaker(engine)() as db:
            pk, key = SessionPk(row.session_pk), row.view_key
            stored = await digests.load(db, pk, key, 0)
            assert stored is not None
            at, digest = digests.Place(pk, key, 0), stored.digest
            asked = ["call_1", "call_160", "call_199", "none"]

            async def reads(at: digests.Place, stored: digests.Stored, upto: int) -> Any:
                needed = digest.needed if upto == digest.upto else ()  # past the end: no row
                rows = await digests.rows_still(db, at, stored, needed, upto, "o200k_base")
                ids = await digests.ids_still(db, at, stored, asked)
                return None if rows is None else [tuple(r)[:-3] for r in rows], ids

            plain = await digests.rows_from(db, pk, digest.needed, digest.upto, "o200k_base")
            found = {
                "now": (
                    *await reads(at, stored, digest.upto),
                    (
                        [tuple(r) for r in plain],
                        await digests.ids_among(db, pk, stored, asked),
                    ),
                ),
                "moved": await reads(at, _at(stored, upto=digest.upto + 4), digest.upto),
                "replaced": await reads(at, _at(stored, generation="another"), digest.upto),
                "rewritten": await reads(dataclasses.replace(at, version=1), stored, digest.upto),
                "past the end": await reads(at, stored, 10_000),
                "moved, past the end": await reads(at, _at(stored, upto=1), 10_000),
            }
            await db.execute(delete(SessionRow).where(SessionRow.pk == pk))
            found["gone"] = await reads(at, stored, digest.upto)
            await db.rollback()
            return found
    finally:
        await engine.dispose()


def _at(stored: digests.Stored, upto: int | None = None, generation: str | None = None) -> Any:
    """``stored`` as read at another place: moved to ``upto``, or another ``generation``."""
    digest = stored.digest if upto is None else dataclasses.replace(stored.digest, upto=upto)
    return dataclasses.replace(stored, digest=digest, generation=generation or stored.generation)


def test_the_reads_of_a_tail_check_the_digest_in_their_own_statements(
    api: Api, client: httpx.Client
) -> None:
    """A compile reading a tail checks that the history and its digest are those it reads for
    in the statements that read (the rows, the ids asked about), not in statements of their
    own: each answers as the unchecked read when they are, and None when the digest was moved
    or replaced, the history rewritten, or the session is gone, whether or not rows follow."""
    sid = new_session(client, provider="gpt-4o", context_window=WINDOW)
    append(client, sid, [m for n in range(200) for m in turn(n)])
    row = settled_digest(api, client, sid)
    found = asyncio.run(_reads_checked(api.database_url, row))
    rows, ids, (plain, unchecked) = found["now"]
    assert rows == plain and rows and ids == unchecked
    assert "call_1" in ids[0] and "none" not in ids[1]  # below the digest's upto, called there
    assert found["past the end"] == ([], unchecked)
    for changed in ("moved", "replaced", "rewritten", "moved, past the end", "gone"):
        assert found[changed] == (None, None), changed
