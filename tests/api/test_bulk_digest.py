"""A bulk write that grows a session past the digest threshold brings its digest up to date
before it answers (issue 27, item 2), over HTTP on both databases: right after the appends or
the import a digest exists, the first compile reads the tail with it, and its answer is the one
a compile reading the whole history gives."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import httpx
import pytest

from tests.api.test_tail_compile import (
    WINDOW,
    append,
    compiled,
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


def test_a_short_session_needs_no_digest(api: Api, client: httpx.Client) -> None:
    sid = new_session(client, provider="gpt-4o", context_window=WINDOW)
    append(client, sid, [m for n in range(10) for m in turn(n)])
    assert digest_upto(api, sid) is None
    before = reads(client).get("whole", 0)
    compiled(client, sid)
    assert reads(client)["whole"] == before + 1
