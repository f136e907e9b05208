"""A bulk write that grows a session past the digest threshold brings its digest up to date
before it answers (issue 27, item 2), over HTTP on both databases: right after the appends or
the import a digest exists, the first compile reads the tail with it, and its answer is the one
a compile reading the whole history gives."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx
import pytest
from sqlalchemy import event
from sqlalchemy.engine import Engine

from app.services.compiling.tails import KEEP_WINDOWS, MOVE_AT
from tests.api.test_tail_compile import (
    WINDOW,
    _sql,
    append,
    compiled,
    counts,
    digest_upto,
    reads,
    tail_reads,
    turn,
    whole,
)
from tests.conftest import Api, new_session, serve_api


@pytest.fixture(scope="module")
def api(database_url: str) -> Iterator[Api]:
    """The server without remembered session compiles (what a compile reads is under test)."""
    yield from serve_api(database_url, view_cache_bytes=0)


def test_appends_in_batches_leave_a_digest_the_first_compile_reads(
    api: Api, client: httpx.Client
) -> None:
    sid = new_session(client, provider="gpt-4o", context_window=WINDOW)
    append(client, sid, [{"role": "system", "content": "You are a careful code reviewer."}])
    for start in range(0, 300, 25):  # 1,200 messages in batches of 100
        append(client, sid, [m for n in range(start, start + 25) for m in turn(n)])
    upto = digest_upto(api, sid)
    assert upto is not None and upto > 600
    before = tail_reads(client)
    first = compiled(client, sid)
    assert tail_reads(client) == before + 1
    assert first["left_out"][0]["reason"] == "token_limit"
    assert first == compiled(client, sid) == whole(api, client, sid)


def stored_lookups(client: httpx.Client) -> dict[str, float]:
    """Lookups of parsed stored messages so far, by result."""
    return counts(client, 'ctxc_cache_lookups_total{cache="stored"', "result")


def test_the_first_compile_after_appends_finds_its_tail_parsed(
    api: Api, client: httpx.Client
) -> None:
    """The append that moved the digest parsed the tail it read and kept it as a compile's read
    does: the first compile after the writes parses next to nothing of the tail it reads."""
    sid = new_session(client, provider="gpt-4o", context_window=WINDOW)
    for start in range(0, 300, 25):
        append(client, sid, [m for n in range(start, start + 25) for m in turn(n)])
    before = stored_lookups(client)
    before_tails = tail_reads(client)
    compiled(client, sid)
    after = stored_lookups(client)
    assert tail_reads(client) == before_tails + 1
    hits = after.get("hit", 0) - before.get("hit", 0)
    misses = after.get("miss", 0) - before.get("miss", 0)
    assert hits >= 20 and misses <= hits // 10, (hits, misses)


def test_an_import_leaves_a_digest_the_first_compile_reads(api: Api, client: httpx.Client) -> None:
    sid = new_session(client, provider="anthropic", context_window=WINDOW)
    # Reused call ids: the repairs rename the newer ones, whichever part they are in.
    append(client, sid, [m for n in range(100) for m in turn(n, call_id=f"c{n % 7}")])
    exported = client.get(f"/v1/sessions/{sid}/export").json()
    copy = f"copy-{uuid.uuid4().hex}"
    exported["session"]["id"] = copy
    imported = client.post("/v1/sessions/import", json=exported)
    assert imported.status_code == 201, imported.text
    upto = digest_upto(api, copy)
    assert upto is not None and upto > 200
    before = tail_reads(client)
    first = compiled(client, copy)
    assert tail_reads(client) == before + 1
    assert any("renamed tool call id" in w for w in first["warnings"])
    assert first == whole(api, client, copy)


@pytest.fixture(scope="module")
def deployed(database_url: str) -> Iterator[Api]:
    """A second server on the same database, with session compiles remembered (as deployed)."""
    yield from serve_api(database_url)


@pytest.fixture
def remembering(deployed: Api, client: httpx.Client) -> Iterator[httpx.Client]:
    """A client of ``deployed`` as the same tenant as ``client``."""
    with httpx.Client(base_url=deployed.url, headers=client.headers, timeout=60) as other:
        yield other


def test_a_write_that_moves_the_digest_warms_the_compile_after_it(
    api: Api, client: httpx.Client, remembering: httpx.Client
) -> None:
    """The append that moved the digest compiled the session as a compile with no options does,
    recording nothing: that compile is answered from what it kept, the same answer as one
    reading it all; a compile of the same view with other options grows the tail it kept. An
    import does the same."""
    sid = new_session(remembering, provider="gpt-4o", context_window=WINDOW)
    warmed = counts(remembering, "ctxc_warmed_compiles_total{", "outcome")
    entries = counts(remembering, "ctxc_cache_entries{", "cache")
    for start in range(0, 100, 25):  # 400 messages: under the largest body an import takes
        upto = digest_upto(api, sid)
        append(remembering, sid, [m for n in range(start, start + 25) for m in turn(n)])
    assert digest_upto(api, sid) not in (None, upto)  # the last append moved it
    now = counts(remembering, "ctxc_warmed_compiles_total{", "outcome")
    assert now.get("warmed", 0) >= warmed.get("warmed", 0) + 2
    assert now.get("failed", 0) == warmed.get("failed", 0)
    # One warmed output kept per session: each write's replaced the one before.
    assert counts(remembering, "ctxc_cache_entries{", "cache")["views"] == entries["views"] + 1
    exported = remembering.get(f"/v1/sessions/{sid}/export").json()
    assert exported["compiles"] == [] and exported["session"]["cursor_seq"] is None
    before = reads(remembering)
    first = compiled(remembering, sid)
    assert _added(before, reads(remembering)) == {"remembered": 1}
    tools = [{"type": "function", "function": {"name": "grep", "parameters": {}}}]
    compiled(remembering, sid, tools=tools)
    assert _added(before, reads(remembering)) == {"remembered": 1, "kept": 1}
    exported["session"]["id"] = copy = f"copy-{uuid.uuid4().hex}"
    imported = remembering.post("/v1/sessions/import", json=exported)
    assert imported.status_code == 201, imported.text
    before = reads(remembering)
    again = compiled(remembering, copy)
    assert _added(before, reads(remembering)) == {"remembered": 1}
    assert first == whole(api, client, sid)
    assert again == whole(api, client, copy)


def test_a_write_warms_no_compile_that_reads_no_tail(
    api: Api, client: httpx.Client, remembering: httpx.Client
) -> None:
    """A session resumed at its provider compiles a delta (after the cursor): the appends still
    move the digest of its own view, but warm nothing, and the compile after them is a delta."""
    sid = new_session(remembering, provider="codex-cli", context_window=WINDOW)
    append(remembering, sid, turn(0))
    answer = remembering.post(f"/v1/sessions/{sid}/compile", json={}).json()
    body = {"compile_id": answer["compile_id"], "provider_session_id": "thread-1"}
    assert remembering.post(f"/v1/sessions/{sid}/cursor", json=body).status_code == 200
    warmed = counts(remembering, "ctxc_warmed_compiles_total{", "outcome")
    for start in range(1, 100, 25):
        append(remembering, sid, [m for n in range(start, start + 25) for m in turn(n)])
    assert digest_upto(api, sid) is not None
    now = counts(remembering, "ctxc_warmed_compiles_total{", "outcome")
    assert now.get("none", 0) > warmed.get("none", 0)
    assert now.get("warmed", 0) == warmed.get("warmed", 0)
    before = reads(remembering)
    assert compiled(remembering, sid)["mode"] == "delta"
    assert _added(before, reads(remembering)) == {"delta": 1}


def _added(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    """The session compiles ``after`` counts beyond ``before``, by what they read."""
    return {k: v - before.get(k, 0) for k, v in after.items() if v != before.get(k, 0)}


def test_a_short_session_needs_no_digest(api: Api, client: httpx.Client) -> None:
    sid = new_session(client, provider="gpt-4o", context_window=WINDOW)
    append(client, sid, [m for n in range(10) for m in turn(n)])
    assert digest_upto(api, sid) is None
    before = reads(client).get("whole", 0)
    compiled(client, sid)
    assert reads(client)["whole"] == before + 1


def tail_tokens(api: Api, sid: str, upto: int) -> int:
    """The tokens stored from seq ``upto`` on, summed in the database."""
    found = _sql(
        api.database_url,
        "SELECT coalesce(sum(m.tokens_o200k), 0) FROM messages m"
        " JOIN sessions s ON s.pk = m.session_pk WHERE s.id = :sid AND m.seq >= :upto",
        sid=sid,
        upto=upto,
    )
    return int(found[0][0])


def test_every_small_append_leaves_a_tail_under_what_moves_the_digest(
    api: Api, client: httpx.Client
) -> None:
    """An append works out the tail's tokens from the last sum of them and what the session's
    total grew since: after each of many one-turn appends the tail past the digest is still under
    what moves it forward, the digest moved on the way, and the tail was summed in the database
    once per digest it had (the server runs in this process: its statements are counted)."""
    sid = new_session(client, provider="gpt-4o", context_window=WINDOW)
    append(client, sid, [m for n in range(60) for m in turn(n)])
    first = digest_upto(api, sid)
    assert first is not None
    mark, uptos = MOVE_AT * int(KEEP_WINDOWS * WINDOW), {first}
    with counted("sum(messages.tokens_o200k)") as sums:
        for n in range(60, 120):
            append(client, sid, turn(n))
            upto = digest_upto(api, sid)
            assert upto is not None and tail_tokens(api, sid, upto) < mark
            uptos.add(upto)
    assert len(uptos) > 1
    assert 1 <= len(sums) <= len(uptos)


@contextmanager
def counted(fragment: str) -> Iterator[list[str]]:
    """The statements this process runs meanwhile that hold ``fragment``."""
    found: list[str] = []

    def seen(conn: Any, cursor: Any, statement: str, *_: Any) -> None:
        if fragment in statement:
            found.append(statement)

    event.listen(Engine, "before_cursor_execute", seen)
    try:
        yield found
    finally:
        event.remove(Engine, "before_cursor_execute", seen)
