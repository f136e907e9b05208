"""Every method of the client, sync and async, on both databases: the README walk-through's
flows, with typed answers."""

from __future__ import annotations

import asyncio
import uuid
from datetime import datetime
from typing import Any

from ctxc_client import (
    AppendResult,
    AsyncClient,
    Compaction,
    CompactionDetail,
    CompileResult,
    Conflict,
    Cursor,
    NotFound,
    RecallResult,
    Session,
    ToolCall,
)

from tests.api.sse import emit_one
from tests.client.conftest import connect, fresh_key
from tests.conftest import Api

SYSTEM = [
    {"name": "identity", "text": "You are a careful coding agent."},
    {"name": "todos", "text": "- fix the build", "lifecycle": "dynamic"},
]
IDENTIFIERS = {"read_file": ["path"]}
BIG = "".join(f"target{n}: build\n" for n in range(300))


def sid() -> str:
    return f"s-{uuid.uuid4().hex[:10]}"


def read_file(call_id: str, content: str) -> list[dict[str, Any]]:
    return [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": call_id,
                    "type": "function",
                    "function": {"name": "read_file", "arguments": '{"path": "Makefile"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": call_id, "content": content},
    ]


def test_sessions_are_created_read_updated_and_deleted(ctxc: Any) -> None:
    name = sid()
    created = ctxc.create_session(
        id=name, provider="gpt-4o", resume_key="/home/me/repo", system_prompt=SYSTEM
    )
    assert isinstance(created, Session)
    assert (created.id, created.provider, created.message_count) == (name, "gpt-4o", 0)
    assert [f.lifecycle for f in created.system_prompt] == ["static", "dynamic"]
    assert isinstance(created.created_at, datetime)
    assert ctxc.get_session(name) == created
    updated = ctxc.update_session(name, context_window=64000, metadata={"team": "build"})
    assert (updated.context_window, updated.metadata) == (64000, {"team": "build"})
    assert updated.resume_key == "/home/me/repo"
    assert ctxc.delete_session(name) is None
    try:
        ctxc.get_session(name)
    except NotFound as error:
        assert error.status == 404 and error.slug == "not-found"
    else:
        raise AssertionError("a deleted session was found")


def test_a_generated_id_and_the_paging_helpers_cross_pages(api: Api, kind: str) -> None:
    with connect(kind, api.url, fresh_key(api)) as ctxc:
        made = sorted(ctxc.create_session().id for _ in range(5))
        first = ctxc.list_sessions(limit=2)
        assert [s.id for s in first.items] == made[:2] and first.next_after == made[1]
        second = ctxc.list_sessions(after=first.next_after, limit=2)
        assert [s.id for s in second.items] == made[2:4]
        assert [s.id for s in ctxc.iter_sessions(page_size=2)] == made
        assert [s.id for s in ctxc.iter_sessions()] == made

        name = made[0]
        for n in range(5):
            ctxc.append_messages(name, [{"role": "user", "content": f"question {n}"}])
        page = ctxc.list_messages(name, limit=2)
        assert [m.seq for m in page.items] == [1, 2] and page.next_after_seq == 2
        items = list(ctxc.iter_messages(name, page_size=2))
        assert [m.seq for m in items] == [1, 2, 3, 4, 5]
        assert [m.message["content"][0]["text"] for m in items][-1] == "question 4"
        assert [m.seq for m in ctxc.iter_messages(name, after_seq=3, page_size=1)] == [4, 5]
        assert list(ctxc.iter_messages(name, section="elsewhere")) == []


def test_appends_are_idempotent_by_key_and_read_back_in_each_shape(ctxc: Any) -> None:
    name = ctxc.create_session(id=sid(), provider="gpt-4o").id
    question = [{"role": "user", "content": "Why does the build fail?"}]
    first = ctxc.append_messages(name, question)
    assert isinstance(first, AppendResult)
    assert (first.first_seq, first.last_seq, first.encoding) == (1, 1, "o200k_base")
    assert first.messages[0].tokens == first.tokens > 0
    trace = ctxc.append_messages(
        name,
        read_file("call_1", "all: build"),
        idempotency_key=f"{name}-turn-1",
        metadata={"execution_id": "run-1", "is_trace": True},
    )
    again = ctxc.append_messages(
        name,
        read_file("call_1", "all: build"),
        idempotency_key=f"{name}-turn-1",
        metadata={"execution_id": "run-1", "is_trace": True},
    )
    assert again == trace and (trace.first_seq, trace.last_seq) == (2, 3)
    try:
        ctxc.append_messages(name, question, idempotency_key=f"{name}-turn-1")
    except Conflict as error:
        assert error.status == 409 and "already used" in error.detail
    else:
        raise AssertionError("a reused key with another body was accepted")
    reply = [{"role": "assistant", "content": [{"type": "text", "text": "It is missing."}]}]
    assert ctxc.append_messages(name, reply, format="anthropic").first_seq == 4
    assert ctxc.get_session(name).message_count == 4
    anthropic = ctxc.provider_messages(name, "anthropic")
    assert anthropic.format == "anthropic" and anthropic.seqs == [1, 2, 3, 4]
    openai = ctxc.provider_messages(name, "openai", after_seq=1, limit=2)
    assert [m["role"] for m in openai.messages] == ["assistant", "tool"]
    assert openai.next_after_seq == 3


def test_compiles_stateless_and_of_a_session(ctxc: Any) -> None:
    result = ctxc.compile(
        [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hi"}],
        provider="anthropic",
        context_window=8000,
        ephemeral=[{"role": "user", "content": "Retrieved: docs/intro.md says hello."}],
        compiler={
            "base": "current_tool_trace",
            "decorators": [
                "redact",
                "inject",
                {"name": "token_limit", "params": {"reserve": 1024}},
            ],
        },
    )
    assert isinstance(result, CompileResult)
    assert result.format == "anthropic" and result.system is not None
    assert result.tokens.context_window == 8000 and result.seq_range == [1, 2]

    name = ctxc.create_session(id=sid(), provider="gpt-4o", system_prompt=SYSTEM).id
    ctxc.append_messages(name, [{"role": "user", "content": "Why does the build fail?"}])
    ctxc.append_messages(
        name,
        read_file("call_1", "all: build"),
        metadata={"execution_id": "run-1", "is_trace": True},
    )
    compiled = ctxc.compile_session(name, execution_id="run-1")
    assert compiled.format == "openai" and compiled.mode == "full"
    assert compiled.seq_range == [1, 3] and compiled.tokens.context_window == 128000
    assert compiled.messages[0]["role"] == "system"
    counted = ctxc.count_tokens([{"role": "user", "content": "hello"}], provider="gpt-4o")
    assert counted.exact and counted.total > 0 and len(counted.messages) == 1
    providers = ctxc.list_providers()
    assert providers.default in {p.name for p in providers.items}


def test_the_cursor_is_acknowledged_then_reset(ctxc: Any) -> None:
    name = ctxc.create_session(
        id=sid(), provider="claude-code", resume_key="/home/me/project", system_prompt=SYSTEM
    ).id
    ctxc.append_messages(name, [{"role": "user", "content": "Help me build a feature"}])
    full = ctxc.compile_session(name)
    assert full.mode == "full"
    cursor = ctxc.acknowledge(
        name, full.compile_id, provider_session_id="sess-1", usage={"prompt_tokens": 812}
    )
    assert isinstance(cursor, Cursor)
    assert (cursor.cursor_seq, cursor.provider_session_id, cursor.advanced) == (1, "sess-1", True)
    ctxc.append_messages(name, [{"role": "user", "content": "Now add tests"}])
    delta = ctxc.compile_session(name, fragments=[{"name": "todos", "text": "2. add tests"}])
    assert (delta.mode, delta.after_seq) == ("delta", 1)
    texts = [part["text"] for part in delta.messages[0]["content"]]
    assert texts == ["[System Context]: 2. add tests", "Now add tests"]
    reset = ctxc.reset_cursor(name)
    assert (reset.cursor_seq, reset.provider_session_id) == (None, None)
    assert ctxc.compile_session(name).mode == "full"


def test_originals_come_back_by_call_id_and_by_sha256(ctxc: Any) -> None:
    name = ctxc.create_session(id=sid(), provider="gpt-4o").id
    for call_id in ("call_2", "call_3"):
        ctxc.append_messages(name, read_file(call_id, BIG))
    ctxc.append_messages(name, [{"role": "user", "content": "What does it build?"}])
    compiled = ctxc.compile_session(
        name,
        compiler={
            "decorators": [
                {"name": "tool_compaction", "params": {"toolIdentifierFields": IDENTIFIERS}},
                "compact_tool_results",
                "token_limit",
            ]
        },
    )
    [step, _] = compiled.steps
    assert (step.name, step.call_ids, step.seqs) == ("tool_compaction", ["call_2"], [2])
    assert step.tokens_saved > 0
    call = ctxc.get_tool_call(name, "call_2")
    assert isinstance(call, ToolCall)
    assert call.arguments == {"path": "Makefile"} and call.result is not None
    assert call.result.content == BIG
    assert ctxc.get_tool_call(name, "call_2", seq=call.seq) == call
    digest = call.result.fields["content"]  # type: ignore[index]
    payload = ctxc.get_payload(name, digest.sha256)
    assert (payload.value, payload.bytes) == (BIG, digest.bytes)
    # The recall tool: the model's call run through ctxc, the tool result in the shape asked.
    recalled = ctxc.recall(
        name, '{"call_id": "call_2", "seq": 2}', tool_call_id="c9", max_tokens=32_000
    )
    assert isinstance(recalled, RecallResult) and recalled.page is not None
    assert recalled.result == {"role": "tool", "tool_call_id": "c9", "content": BIG}
    missing = ctxc.recall(name, {"sha256": "0" * 64}, format="gemini")
    assert missing.is_error and "error" in missing.result["functionResponse"]["response"]


def test_compactions_run_list_read_and_announce_themselves(ctxc: Any) -> None:
    name = ctxc.create_session(id=sid(), provider="gpt-4o").id
    turns = [
        {"role": role, "content": f"{role} turn {n}: " + "Look at src/part.py please. " * 30}
        for n in range(6)
        for role in ("user", "assistant")
    ]
    ctxc.append_messages(name, turns)
    done = ctxc.compact(name, "full")
    assert isinstance(done, Compaction)
    assert done.kind == "full" and done.messages > 0 and done.summarizer == "ledger"
    assert ctxc.list_compactions(name) == [done]
    detail = ctxc.get_compaction(name, done.id)
    assert isinstance(detail, CompactionDetail) and detail.id == done.id
    assert [a.seq for a in detail.archived] == list(range(done.seq_from, done.seq_to + 1))
    assert detail.archived[0].message["content"][0]["text"] == turns[done.seq_from - 1]["content"]
    events = ctxc.events(name, last_event_id=0)
    event = next(events)
    events.close()
    assert event.type == "compaction" and event.data.compaction_id == done.id
    assert event.data.kind == "full" and event.data.outcome == "compacted"


def test_the_async_client_serves_concurrent_calls_and_async_iteration(api: Api) -> None:
    key = fresh_key(api)

    async def main() -> tuple[list[str], list[str], list[int]]:
        async with AsyncClient(api.url, api_key=key) as ctxc:
            made = await asyncio.gather(*(ctxc.create_session() for _ in range(4)))
            names = [s.id for s in made]
            hello = [{"role": "user", "content": "hi"}]
            await asyncio.gather(*(ctxc.append_messages(n, hello) for n in names * 2))
            listed = [s.id async for s in ctxc.iter_sessions(page_size=3)]
            seqs = [m.seq async for m in ctxc.iter_messages(names[0], page_size=1)]
            emitted = await asyncio.to_thread(emit_one, api.database_url, names[0], 1)
            async for event in ctxc.events(names[0], last_event_id=0):
                assert event.id == emitted
                break
            return names, listed, seqs

    names, listed, seqs = asyncio.run(main())
    assert listed == sorted(names) and seqs == [1, 2]
