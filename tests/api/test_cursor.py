"""Session-stateful providers: prompt fragments, the cursor and delta compiles (seeds/004), on
both databases; the races run against Postgres."""

from __future__ import annotations

import asyncio
import random
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest
from sqlalchemy import update

from app.domain.validity import request_problems
from app.storage.db import create_engine
from app.storage.models import SessionRow
from tests.conftest import Api, new_session

FRAGMENTS = [
    {"name": "identity", "text": "You are the build agent.", "lifecycle": "static"},
    {"name": "todo", "text": "1. fix the tests", "lifecycle": "dynamic"},
]


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def reply(text: str) -> dict[str, Any]:
    return {"role": "assistant", "content": text}


def call(call_id: str) -> dict[str, Any]:
    function = {"name": "read_file", "arguments": '{"path": "main.py"}'}
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [{"id": call_id, "type": "function", "function": function}],
    }


def result(call_id: str, text: str = "print('hi')") -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call_id, "content": text}


def append(client: httpx.Client, sid: str, *messages: dict[str, Any]) -> None:
    response = client.post(f"/v1/sessions/{sid}/messages", json={"messages": list(messages)})
    assert response.status_code == 201, response.text


def compile_(
    client: httpx.Client, sid: str, prior: frozenset[str] = frozenset(), **body: Any
) -> dict[str, Any]:
    """The session's compile, checked with the validator (``prior``: the calls the provider
    session already holds)."""
    response = client.post(f"/v1/sessions/{sid}/compile", json=body)
    assert response.status_code == 200, response.text
    answer: dict[str, Any] = response.json()
    head = answer.get("instructions") if answer["format"] == "responses" else answer.get("system")
    assert request_problems(answer["format"], head, answer["messages"], prior) == []
    return answer


def ack(client: httpx.Client, sid: str, compile_id: str, **body: Any) -> dict[str, Any]:
    response = client.post(f"/v1/sessions/{sid}/cursor", json={"compile_id": compile_id, **body})
    assert response.status_code == 200, response.text
    answer: dict[str, Any] = response.json()
    return answer


def stateful(client: httpx.Client, provider: str = "codex-cli") -> str:
    """A session for a session-stateful profile, with a first exchange stored."""
    sid = new_session(client, provider=provider, system_prompt=FRAGMENTS, resume_key="/work/a")
    append(client, sid, user("help me build a feature"), reply("I'll help with that"))
    return sid


def started(client: httpx.Client, provider: str = "codex-cli") -> tuple[str, dict[str, Any]]:
    """A stateful session whose first full compile was acknowledged with a provider session."""
    sid = stateful(client, provider)
    first = compile_(client, sid)
    ack(client, sid, first["compile_id"], provider_session_id="thread-1")
    return sid, first


# The behaviour table of seeds/004


def test_a_stateless_provider_always_gets_everything(client: httpx.Client) -> None:
    sid = new_session(client, provider="gpt-4o", system_prompt=FRAGMENTS)
    append(client, sid, user("hi"), reply("hello"))
    first = compile_(client, sid)
    cursor = ack(client, sid, first["compile_id"], provider_session_id="ignored")
    assert cursor["cursor_seq"] == 2  # recorded, but a stateless provider never resumes
    append(client, sid, user("and now?"))
    again = compile_(client, sid)
    assert again["mode"] == "full" and again["seq_range"] == [1, 3]
    system = again["messages"][0]
    assert system["role"] == "system" and "build agent" in str(system) and "fix the" in str(system)


def test_a_stateful_provider_without_a_session_gets_everything(client: httpx.Client) -> None:
    sid = stateful(client)
    answer = compile_(client, sid)
    assert answer["mode"] == "full" and answer["after_seq"] is None
    assert answer["seq_range"] == [1, 2]
    assert [m["role"] for m in answer["messages"]] == ["system", "user", "assistant"]
    # Acknowledged without the provider's session id: still no provider session to resume.
    ack(client, sid, answer["compile_id"])
    assert compile_(client, sid)["mode"] == "full"


def test_an_active_session_gets_dynamic_fragments_and_the_delta(client: httpx.Client) -> None:
    sid, first = started(client)
    append(client, sid, user("now add tests"), user("[supervisor] keep it small"))
    delta = compile_(client, sid)
    assert delta["mode"] == "delta" and delta["after_seq"] == 2
    assert delta["seq_range"] == [3, 4]
    assert delta["messages"] == [
        user("[System Context]: 1. fix the tests"),
        user("now add tests"),
        user("[supervisor] keep it small"),
    ]
    assert delta["tokens"]["sections"]["system_context"] > 0
    assert "system_prompt" not in delta["tokens"]["sections"]
    assert delta["tokens"]["total"] < first["tokens"]["total"] + 40


def test_dynamic_fragments_come_from_the_session_or_the_request(client: httpx.Client) -> None:
    sid, _ = started(client)
    append(client, sid, user("next"))
    fragments = [{"name": "todo", "text": "2. write docs"}, {"name": "nudge", "text": "hurry"}]
    delta = compile_(client, sid, fragments=fragments)
    assert [m["content"] for m in delta["messages"][:2]] == [
        "[System Context]: 2. write docs",
        "[System Context]: hurry",
    ]
    static = client.post(
        f"/v1/sessions/{sid}/compile", json={"fragments": [{"name": "identity", "text": "x"}]}
    )
    assert static.status_code == 422
    assert static.json()["errors"][0]["path"] == "body.fragments[0].name"
    # Replaced on the session: the stored dynamic fragment changes for every later compile.
    patched = [FRAGMENTS[0], {**FRAGMENTS[1], "text": "3. ship"}]
    client.patch(f"/v1/sessions/{sid}", json={"system_prompt": patched}).raise_for_status()
    assert compile_(client, sid)["messages"][0]["content"] == "[System Context]: 3. ship"


# The cursor


def test_no_acknowledgement_resends_the_same_delta(client: httpx.Client) -> None:
    sid, _ = started(client)
    append(client, sid, user("step 3"))
    first = compile_(client, sid)
    failed = ack(
        client,
        sid,
        first["compile_id"],
        error_kind="prompt_too_long",
        usage={"prompt_tokens": 210_000},
    )
    assert failed == {"cursor_seq": 2, "provider_session_id": "thread-1", "advanced": False}
    again = compile_(client, sid)  # aborted or failed: the delta is sent again
    assert again["seq_range"] == first["seq_range"] == [3, 3]
    done = ack(client, sid, again["compile_id"], usage={"prompt_tokens": 900})
    assert done["cursor_seq"] == 3 and done["advanced"]


def test_an_older_acknowledgement_never_moves_the_cursor_back(client: httpx.Client) -> None:
    sid, _ = started(client)
    append(client, sid, user("a"))
    older = compile_(client, sid)
    append(client, sid, user("b"))
    newer = compile_(client, sid)
    assert ack(client, sid, newer["compile_id"])["cursor_seq"] == 4
    late = ack(client, sid, older["compile_id"])
    assert late["cursor_seq"] == 4 and not late["advanced"]


def test_unknown_or_foreign_compile_ids_are_404(api: Api, client: httpx.Client) -> None:
    sid, first = started(client)
    other = stateful(client)
    missing = client.post(f"/v1/sessions/{sid}/cursor", json={"compile_id": "nope"})
    assert missing.status_code == 404
    elsewhere = client.post(
        f"/v1/sessions/{other}/cursor", json={"compile_id": first["compile_id"]}
    )
    assert elsewhere.status_code == 404
    with api.client(api.key_b) as b:
        foreign = b.post(f"/v1/sessions/{sid}/cursor", json={"compile_id": first["compile_id"]})
        assert foreign.status_code == 404
        assert b.delete(f"/v1/sessions/{sid}/cursor").status_code == 404


def test_resetting_the_cursor_makes_the_next_compile_full(client: httpx.Client) -> None:
    sid, _ = started(client)
    append(client, sid, user("more"))
    reset = client.delete(f"/v1/sessions/{sid}/cursor")
    assert reset.json() == {"cursor_seq": None, "provider_session_id": None, "advanced": False}
    assert compile_(client, sid)["mode"] == "full"


def test_a_new_resume_key_invalidates_the_provider_session(client: httpx.Client) -> None:
    sid, _ = started(client)
    append(client, sid, user("more"))
    pending = compile_(client, sid)
    assert pending["mode"] == "delta"
    session = client.patch(f"/v1/sessions/{sid}", json={"resume_key": "/work/b"}).json()
    assert session["cursor_seq"] is None and session["provider_session_id"] is None
    full = compile_(client, sid)
    assert full["mode"] == "full" and full["seq_range"] == [1, 3]
    # The delta made for the ended provider session no longer moves anything.
    assert ack(client, sid, pending["compile_id"])["cursor_seq"] is None


def set_cursor(url: str, sid: str, seq: int) -> None:
    """Edit the stored cursor behind the service's back (corruption, a manual edit)."""

    async def run() -> None:
        engine = create_engine(url)
        try:
            async with engine.begin() as conn:
                query = update(SessionRow).where(SessionRow.id == sid).values(cursor_seq=seq)
                await conn.execute(query)
        finally:
            await engine.dispose()

    asyncio.run(run())


def test_a_cursor_beyond_the_history_falls_back_to_full(api: Api, client: httpx.Client) -> None:
    sid, _ = started(client)
    set_cursor(api.database_url, sid, 99)
    answer = compile_(client, sid)
    assert answer["mode"] == "full" and answer["seq_range"] == [1, 2]
    assert "beyond the stored history" in answer["warnings"][0]


def test_acknowledging_through_a_seq_not_stored_is_422(client: httpx.Client) -> None:
    sid, first = started(client)
    response = client.post(
        f"/v1/sessions/{sid}/cursor", json={"compile_id": first["compile_id"], "through_seq": 9}
    )
    assert response.status_code == 422
    assert response.json()["errors"][0]["path"] == "body.through_seq"
    assert client.get(f"/v1/sessions/{sid}").json()["cursor_seq"] == 2


def test_messages_appended_after_a_compile_are_in_the_next_delta(client: httpx.Client) -> None:
    sid, _ = started(client)
    append(client, sid, user("step"))
    sent = compile_(client, sid)
    append(client, sid, user("[delegation] agent-x finished"))  # lands while the call runs
    ack(client, sid, sent["compile_id"])
    nxt = compile_(client, sid)
    assert nxt["seq_range"] == [4, 4]
    assert nxt["messages"][-1] == user("[delegation] agent-x finished")


# Tool calls and results across the cursor


@pytest.mark.parametrize("provider", ["codex-cli", "claude-code"])
def test_a_delta_may_open_with_results_of_calls_the_provider_holds(
    client: httpx.Client, provider: str
) -> None:
    sid, _ = started(client, provider)
    append(client, sid, user("read main.py"), call("c1"))
    sent = compile_(client, sid)  # a call without its result is never sent: held back
    assert sent["seq_range"] == [3, 3]
    append(client, sid, result("c1"))
    whole = compile_(client, sid)
    assert whole["seq_range"] == [3, 5] and whole["mode"] == "delta"  # c1 goes with its result
    # The model answered with a call of its own: the provider session holds it, and the caller
    # stores it (seq 6) and acknowledges through it.
    append(client, sid, call("c2"))
    assert ack(client, sid, whole["compile_id"], through_seq=6)["cursor_seq"] == 6
    append(client, sid, result("c2", "done"))
    delta = compile_(client, sid, frozenset({"c2"}))
    assert delta["seq_range"] == [7, 7]
    if provider == "codex-cli":
        # The results answer the call the provider holds, so they come before the context.
        assert [m["role"] for m in delta["messages"]] == ["tool", "user"]
        assert delta["messages"][0]["tool_call_id"] == "c2"
    else:
        [turn] = delta["messages"]
        assert [b["type"] for b in turn["content"]] == ["tool_result", "text"]


def test_a_round_longer_than_the_look_back_still_pairs_its_results(client: httpx.Client) -> None:
    sid, _ = started(client)
    ids = [f"p{n}" for n in range(80)]  # one turn of parallel calls, answered one by one
    function = {"name": "read_file", "arguments": "{}"}
    calls = [{"id": i, "type": "function", "function": function} for i in ids]
    append(client, sid, {"role": "assistant", "content": None, "tool_calls": calls})
    append(client, sid, *[result(i) for i in ids[:-1]])
    held = compile_(client, sid)  # the round is not complete: nothing of it is sent yet
    assert ack(client, sid, held["compile_id"], through_seq=82)["cursor_seq"] == 82
    append(client, sid, result(ids[-1], "last"))
    delta = compile_(client, sid, frozenset({ids[-1]}))
    assert delta["seq_range"] == [83, 83]
    assert delta["messages"][0] == result(ids[-1], "last")


def test_a_session_defines_its_own_stateful_profile(client: httpx.Client) -> None:
    sid = new_session(
        client,
        provider="gpt-4o",
        system_prompt=FRAGMENTS,
        profile={"session_resumption": True, "context_window": 50_000},
    )
    session = client.get(f"/v1/sessions/{sid}").json()
    assert session["session_resumption"] is True and session["profile"]["context_window"] == 50_000
    append(client, sid, user("hi"))
    first = compile_(client, sid)
    assert first["tokens"]["context_window"] == 50_000
    ack(client, sid, first["compile_id"], provider_session_id="mine-1")
    append(client, sid, user("again"))
    assert compile_(client, sid)["mode"] == "delta"
    bad = client.patch(f"/v1/sessions/{sid}", json={"profile": {"tokenizer": "mine"}})
    assert bad.status_code == 422
    changed = client.patch(f"/v1/sessions/{sid}", json={"profile": None}).json()
    assert changed["session_resumption"] is False and changed["cursor_seq"] is None


# Races (Postgres: real concurrency)


def test_racing_compiles_appends_and_acknowledgements_keep_the_cursor_exact(
    api: Api, client: httpx.Client
) -> None:
    if not api.database_url.startswith("postgresql"):
        pytest.skip("the races run against Postgres")
    sid, _ = started(client)
    rng = random.Random(7)
    compiled: list[dict[str, Any]] = []

    def worker(n: int) -> None:
        with api.client() as own:
            for k in range(6):
                append(own, sid, user(f"worker {n} message {k}"))
                compiled.append(compile_(own, sid))

    with ThreadPoolExecutor(6) as pool:
        list(pool.map(worker, range(6)))
    order = list(compiled)
    rng.shuffle(order)  # acknowledgements arrive in any order, concurrently
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda c: ack(client, sid, c["compile_id"]), order))
    highest = max(c["seq_range"][1] for c in compiled)
    session = client.get(f"/v1/sessions/{sid}").json()
    assert session["cursor_seq"] == highest
    # The next delta holds exactly what came after the highest acknowledged seq, once.
    append(client, sid, user("last"))
    nxt = compile_(client, sid)
    assert nxt["after_seq"] == highest
    assert nxt["seq_range"] == [highest + 1, session["last_seq"] + 1]
    sent = [m["content"] for m in nxt["messages"][1:]]
    assert len(sent) == len(set(sent)) == session["last_seq"] + 1 - highest
