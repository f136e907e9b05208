"""A session's running totals (message count, tokens per encoding) stay equal to a recount of its
messages after every write that changes them, on both databases: appends, compactions (summary
and tool payloads, on demand and at compile), an import, and appends racing each other and a
compaction through real servers. The session answer and the listing show them."""

from __future__ import annotations

import asyncio
import threading
import uuid
from collections.abc import Iterator
from contextlib import ExitStack
from typing import Any

import httpx
from sqlalchemy import text

from app.storage.db import create_engine
from tests.api.test_compaction import POLICY, session_with, work_history
from tests.api.test_messages import openai_history
from tests.api.test_originals import SPEC, agent_history
from tests.conftest import Api, free_port, new_session
from tests.processes import replica

Totals = dict[str, int]
NDJSON = "application/x-ndjson"

STORED = "SELECT pk, message_count, tokens_o200k, tokens_cl100k FROM sessions WHERE id = :id"
RECOUNT = (
    "SELECT count(*), coalesce(sum(tokens_o200k), 0), coalesce(sum(tokens_cl100k), 0) "
    "FROM messages WHERE session_pk = :pk"
)


def recount(database_url: str, session_id: str) -> list[tuple[Totals, Totals]]:
    """For each session called ``session_id`` (one per tenant): its stored totals, and the same
    figures counted over its messages now."""

    async def run() -> list[tuple[Totals, Totals]]:
        engine = create_engine(database_url)
        try:
            async with engine.connect() as conn:
                out = []
                for pk, *stored in (await conn.execute(text(STORED), {"id": session_id})).all():
                    counted = (await conn.execute(text(RECOUNT), {"pk": pk})).one()
                    out.append((_totals(stored), _totals(counted)))
                return out
        finally:
            await engine.dispose()

    return asyncio.run(run())


def _totals(values: Any) -> Totals:
    count, o200k, cl100k = (int(v) for v in values)
    return {"messages": count, "o200k_base": o200k, "cl100k_base": cl100k}


def consistent(api: Api, client: httpx.Client, session_id: str) -> Totals:
    """Assert the session's stored totals equal a recount, and that its answer and the listing
    show them in its encoding; return them."""
    pairs = recount(api.database_url, session_id)
    assert pairs and all(stored == counted for stored, counted in pairs), pairs
    answer = client.get(f"/v1/sessions/{session_id}").json()
    shown = (answer["message_count"], answer["tokens"])
    [counted] = [c for _, c in pairs if (c["messages"], c[answer["encoding"]]) == shown][:1]
    listed = [s for s in _listing(client) if s["id"] == session_id]
    assert [(s["message_count"], s["tokens"]) for s in listed] == [
        (answer["message_count"], answer["tokens"])
    ]
    return counted


def _listing(client: httpx.Client) -> Iterator[dict[str, Any]]:
    after = None
    while True:
        params = {"limit": 500} | ({"after": after} if after else {})
        page = client.get("/v1/sessions", params=params).json()
        yield from page["items"]
        if (after := page["next_after"]) is None:
            return


def test_appends_keep_the_totals_of_every_encoding(api: Api, client: httpx.Client) -> None:
    sid = new_session(client, provider="gpt-4")  # cl100k_base
    assert consistent(api, client, sid) == {"messages": 0, "o200k_base": 0, "cl100k_base": 0}
    posted = client.post(f"/v1/sessions/{sid}/messages", json={"messages": openai_history(30)})
    assert posted.status_code == 201, posted.text
    body = {"messages": [{"role": "user", "content": "pinned"}], "section": "buffer"}
    client.post(f"/v1/sessions/{sid}/messages", json=body).raise_for_status()
    totals = consistent(api, client, sid)
    assert totals["messages"] == 31
    assert totals["cl100k_base"] == posted.json()["tokens"] + _tokens(client, sid, 31)
    assert totals["o200k_base"] != totals["cl100k_base"]  # both kept, not one copied


def _tokens(client: httpx.Client, sid: str, seq: int) -> int:
    page = client.get(f"/v1/sessions/{sid}/messages", params={"after_seq": seq - 1, "limit": 1})
    tokens: int = page.json()["items"][0]["tokens"]
    return tokens


def test_a_replayed_or_refused_append_changes_no_total(api: Api, client: httpx.Client) -> None:
    sid = new_session(client)
    headers = {"Idempotency-Key": f"k-{uuid.uuid4().hex}"}
    body = {"messages": openai_history(6)}
    for _ in range(2):  # the retry answers as the first time and writes nothing
        client.post(f"/v1/sessions/{sid}/messages", json=body, headers=headers).raise_for_status()
    before = consistent(api, client, sid)
    assert before["messages"] == 6
    bad = {"messages": [{"role": "user", "content": "fine"}, {"role": "nobody"}]}
    assert client.post(f"/v1/sessions/{sid}/messages", json=bad).status_code == 422
    assert consistent(api, client, sid) == before


def test_summary_compactions_move_the_totals(api: Api, client: httpx.Client) -> None:
    sid = session_with(client, rounds=20, compaction=POLICY)
    before = consistent(api, client, sid)
    for kind in ("micro", "full"):
        done = client.post(f"/v1/sessions/{sid}/compact", json={"kind": kind})
        assert done.status_code == 201, done.text
        record = done.json()
        after = consistent(api, client, sid)
        assert after["messages"] == before["messages"] - record["messages"] + 1
        assert after["o200k_base"] == record["tokens_after"]  # gpt-4o counts in o200k_base
        before = after


def test_a_compaction_at_compile_moves_the_totals(api: Api, client: httpx.Client) -> None:
    sid = session_with(client, rounds=20, compaction=POLICY)
    answer = client.post(f"/v1/sessions/{sid}/compile", json={})
    assert answer.status_code == 200, answer.text
    [done] = answer.json()["compactions"]
    assert consistent(api, client, sid)["o200k_base"] == done["tokens_after"]


def test_tool_payload_compaction_recounts_what_it_rewrote(api: Api, client: httpx.Client) -> None:
    sid = new_session(client, provider="gpt-4o")
    client.post(f"/v1/sessions/{sid}/messages", json={"messages": agent_history()})
    before = consistent(api, client, sid)
    steps = [SPEC["decorators"][0], "compact_tool_results"]
    done = client.post(
        f"/v1/sessions/{sid}/compact", json={"kind": "tool_payloads", "steps": steps}
    )
    assert done.status_code == 201, done.text
    after = consistent(api, client, sid)
    assert after["messages"] == before["messages"]
    assert after["o200k_base"] == done.json()["tokens_after"] < before["o200k_base"]
    assert after["cl100k_base"] < before["cl100k_base"]


def test_an_import_carries_its_totals(api: Api, client: httpx.Client) -> None:
    sid = session_with(client, id=f"moved-{uuid.uuid4().hex}", rounds=20, compaction=POLICY)
    assert client.post(f"/v1/sessions/{sid}/compact", json={"kind": "full"}).status_code == 201
    client.post(f"/v1/sessions/{sid}/messages", json={"messages": openai_history(7)})
    before = consistent(api, client, sid)
    exported = client.get(f"/v1/sessions/{sid}/export").json()
    assert client.delete(f"/v1/sessions/{sid}").status_code == 204
    imported = client.post("/v1/sessions/import", json=exported)
    assert imported.status_code == 201, imported.text
    assert imported.json()["message_count"] == before["messages"]
    assert imported.json()["tokens"] == before["o200k_base"]
    assert consistent(api, client, sid) == before
    # Into another tenant (the same id), streamed: a session of appends only.
    plain = new_session(client, id=f"plain-{uuid.uuid4().hex}", provider="gpt-4")
    client.post(f"/v1/sessions/{plain}/messages", json={"messages": openai_history(25)})
    mine = consistent(api, client, plain)
    document = client.get(f"/v1/sessions/{plain}/export", headers={"Accept": NDJSON}).content
    with api.client(api.key_b) as other:
        moved = other.post(
            "/v1/sessions/import", content=document, headers={"Content-Type": NDJSON}
        )
        assert moved.status_code == 201, moved.text
        assert consistent(api, other, plain) == mine
    assert [stored for stored, _ in recount(api.database_url, plain)] == [mine, mine]


WRITERS = 6
ROUNDS = 8


def test_concurrent_appends_and_compactions_keep_the_totals(api: Api, client: httpx.Client) -> None:
    """Appends from several clients at once, on a `ctxc serve` process of its own (and on
    Postgres also on the test's server: two processes), with compactions in between."""
    sid = session_with(client, rounds=6, compaction=POLICY)
    start = consistent(api, client, sid)
    urls = [api.url] if api.database_url.startswith("postgresql") else []
    appends: list[int] = []
    compactions: list[int] = []
    with ExitStack() as stack:
        urls.append(stack.enter_context(replica(api.database_url, free_port())))
        headers = {"Authorization": f"Bearer {api.key_a}"}
        clients = [
            stack.enter_context(
                httpx.Client(base_url=urls[n % len(urls)], headers=headers, timeout=60)
            )
            for n in range(WRITERS + 1)
        ]
        barrier = threading.Barrier(WRITERS + 1)

        def append(n: int) -> None:
            barrier.wait()
            for r in range(ROUNDS):
                batch = work_history(1)[1:3] if (n + r) % 2 else openai_history(3)
                answer = clients[n].post(f"/v1/sessions/{sid}/messages", json={"messages": batch})
                appends.append(answer.status_code)

        def compact() -> None:
            barrier.wait()
            for _ in range(ROUNDS // 2):
                answer = clients[WRITERS].post(
                    f"/v1/sessions/{sid}/compact", json={"kind": "micro"}
                )
                compactions.append(answer.status_code)

        threads = [threading.Thread(target=append, args=(n,)) for n in range(WRITERS)]
        threads.append(threading.Thread(target=compact))
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    assert appends == [201] * (WRITERS * ROUNDS)
    assert set(compactions) <= {201, 409}, compactions
    compacted = client.get(f"/v1/sessions/{sid}/compactions").json()["items"]
    assert compacted, "no compaction ran between the appends"
    totals = consistent(api, client, sid)
    # Every append landed: the last seq counts them all, whatever the compactions took.
    last_seq = client.get(f"/v1/sessions/{sid}").json()["last_seq"]
    assert last_seq == start["messages"] + sum(
        3 if (n + r) % 2 == 0 else 2 for n in range(WRITERS) for r in range(ROUNDS)
    )
    removed = sum(c["messages"] - 1 for c in compacted)
    assert totals["messages"] == last_seq - removed
