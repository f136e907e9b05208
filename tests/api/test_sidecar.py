"""The sidecar end to end: the official OpenAI and Anthropic SDKs pointed at a real `ctxc`
server, which forwards to a real local upstream (tests/upstreams.py), on each database: turns
stored once, forks, usage, the agent loop that compacts, the README's quick starts."""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import select

from app.settings import Settings
from app.storage.db import create_engine
from app.storage.models import CompileRow
from tests.api.sidecar import (
    TOOLS_ANTHROPIC,
    TOOLS_OPENAI,
    Sidecar,
    anthropic_loop,
    openai_loop,
    prompt,
    stored,
)
from tests.api.test_bulk_digest import counted
from tests.conftest import LiveServer, row_counts, scrape
from tests.upstreams import Upstream


def test_openai_turns_store_new_messages_once(sidecar: Sidecar, up: Upstream) -> None:
    session = f"agent-{uuid.uuid4().hex[:8]}"
    client = sidecar.openai(session)
    history: list[Any] = [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": "Read the README please."},
    ]
    first = client.chat.completions.with_raw_response.create(
        model="gpt-4o", messages=history, tools=TOOLS_OPENAI
    )
    completion = first.parse()
    assert first.headers["x-ctxc-session"] == session
    assert completion.choices[0].message.tool_calls
    history.append(completion.choices[0].message)
    call = completion.choices[0].message.tool_calls[0]
    history.append({"role": "tool", "tool_call_id": call.id, "content": "# README\nhello"})
    second = client.chat.completions.create(model="gpt-4o", messages=history, tools=TOOLS_OPENAI)
    assert second.choices[0].message.content
    messages = stored(sidecar, session)
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "tool", "assistant"]
    # The upstream received the compiled history each time.
    assert [len(r.body["messages"]) for r in up.requests] == [2, 4]


def test_anthropic_streamed_turn_is_stored(sidecar: Sidecar, up: Upstream) -> None:
    session = f"claude-{uuid.uuid4().hex[:8]}"
    client = sidecar.anthropic(session)
    history: list[Any] = [{"role": "user", "content": "Say hello."}]
    with client.messages.stream(
        model="claude-haiku-4-5", max_tokens=256, system="Be brief.", messages=history
    ) as stream:
        final = stream.get_final_message()
    history.append({"role": "assistant", "content": [b.model_dump() for b in final.content]})
    history.append({"role": "user", "content": "Again."})
    client.messages.create(
        model="claude-haiku-4-5", max_tokens=256, system="Be brief.", messages=history
    )
    messages = stored(sidecar, session)
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "user", "assistant"]


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_a_streamed_turn_is_stored_before_the_agent_has_its_end(
    sidecar: Sidecar, up: Upstream, provider: str
) -> None:
    # An agent sends its next request as soon as a stream ended: that request must find this
    # turn stored, or it would look like an edited history.
    session = f"ordered-{uuid.uuid4().hex[:8]}"
    prompt = [{"role": "user", "content": "Say hello."}]
    for _ in range(5):
        if provider == "openai":
            chunks = sidecar.openai(session).chat.completions.create(
                model="gpt-4o", messages=prompt, stream=True
            )
            assert [c for c in chunks]
        else:
            with sidecar.anthropic(session).messages.stream(
                model="claude-haiku-4-5", max_tokens=64, messages=prompt
            ) as stream:
                stream.get_final_message()
        assert [m["role"] for m in stored(sidecar, session)][-2:] == ["user", "assistant"]
        session = f"ordered-{uuid.uuid4().hex[:8]}"


def test_stateless_without_a_session_header(sidecar: Sidecar, up: Upstream) -> None:
    before = row_counts(sidecar.database_url)
    answer = sidecar.openai().chat.completions.create(
        model="gpt-4o", messages=[{"role": "user", "content": "hi"}]
    )
    assert answer.choices[0].message.content
    after = row_counts(sidecar.database_url)
    assert after["messages"] == before["messages"] and after["sessions"] == before["sessions"]


def _everything_stored(sidecar: Sidecar, session: str) -> list[dict[str, Any]]:
    """The session's messages as stored: the live ones but summaries, and those compactions
    archived, by seq."""
    with sidecar.ctxc() as c:
        found = {
            m["seq"]: m
            for m in c.get(f"/v1/sessions/{session}/messages", params={"limit": 1000}).json()[
                "items"
            ]
            if m["section"] != "summary"
        }
        compactions = c.get(f"/v1/sessions/{session}/compactions").json()["items"]
        for record in compactions:
            detail = c.get(f"/v1/sessions/{session}/compactions/{record['id']}").json()
            for archived in detail["archived"]:
                if archived["section"] == "summary":  # an earlier compaction's, summarised again
                    continue
                assert archived["seq"] not in found
                found[archived["seq"]] = archived
    return [found[seq] for seq in sorted(found)]


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_an_agent_loop_with_a_small_window_compacts_and_loses_nothing(
    sidecar: Sidecar, up: Upstream, provider: str
) -> None:
    session = f"loop-{provider}-{uuid.uuid4().hex[:6]}"
    loop = openai_loop if provider == "openai" else anthropic_loop
    history = loop(sidecar, session, turns=12, window=3_000)
    # (Every request the upstream received is checked with the provider's rules by `up`.)
    assert len(up.requests) > 20
    with sidecar.ctxc() as c:
        compactions = c.get(f"/v1/sessions/{session}/compactions").json()["items"]
    assert compactions, "a window this small must have made ctxc compact"
    # The upstream got less than the agent's history: its older part summarised.
    assert len(up.requests[-1].body["messages"]) < len(history) / 2
    with sidecar.ctxc() as c:
        assert c.get(f"/v1/sessions/{session}:fork-1").status_code == 404  # it never forked
    # Nothing is lost: every message the agent sent or got back is stored, live or archived.
    everything = _everything_stored(sidecar, session)
    roles = [m["message"]["role"] for m in everything]
    if provider == "openai":
        assert roles == [m["role"] if isinstance(m, dict) else m.role for m in history]
    else:  # the system prompt, stored first; tool results are "tool" messages in ctxc
        assert roles == ["system"] + [_anthropic_role(m) for m in history]


def _anthropic_role(message: dict[str, Any]) -> str:
    content = message["content"]
    results = isinstance(content, list) and all(
        isinstance(b, dict) and b.get("type") == "tool_result" for b in content
    )
    return "tool" if results else str(message["role"])


def test_an_edited_history_forks_the_session(sidecar: Sidecar, up: Upstream) -> None:
    session = f"fork-{uuid.uuid4().hex[:6]}"
    history = openai_loop(sidecar, session, turns=2, window=100_000)
    before = stored(sidecar, session)
    edited = [*history[:2], {"role": "user", "content": "Actually, do something else."}]
    raw = sidecar.openai(session).chat.completions.with_raw_response.create(
        model="gpt-4o", messages=edited
    )
    assert raw.headers["x-ctxc-forked-to"] == f"{session}:fork-1"
    assert stored(sidecar, f"{session}:fork-1") == before  # the earlier history, unchanged
    assert [m["role"] for m in stored(sidecar, session)] == ["system", "user", "user", "assistant"]


def test_two_agents_on_two_sessions_at_once(sidecar: Sidecar, up: Upstream) -> None:
    sessions = [f"pair-{n}-{uuid.uuid4().hex[:6]}" for n in range(2)]
    with ThreadPoolExecutor(2) as pool:
        histories = list(pool.map(lambda s: openai_loop(sidecar, s, 4, 100_000), sessions))
    for session, history in zip(sessions, histories, strict=True):
        assert len(stored(sidecar, session)) == len(history)


def _compile_usage(database_url: str, compile_id: str) -> Any:
    async def run() -> Any:
        engine = create_engine(database_url)
        try:
            async with engine.connect() as conn:
                found = await conn.execute(
                    select(CompileRow.usage).where(CompileRow.id == compile_id)
                )
                return found.scalar_one()
        finally:
            await engine.dispose()

    return asyncio.run(run())


def test_a_streamed_openai_turn_records_usage_the_agent_did_not_ask_for(
    sidecar: Sidecar, up: Upstream
) -> None:
    session = f"usage-{uuid.uuid4().hex[:6]}"
    raw = sidecar.openai(session).chat.completions.with_raw_response.create(
        model="gpt-4o", stream=True, messages=[{"role": "user", "content": "hi"}]
    )
    chunks = list(raw.parse())
    assert chunks and all(c.choices for c in chunks) and all(c.usage is None for c in chunks)
    assert up.requests[-1].body["stream_options"] == {"include_usage": True}
    # Stored once the stream ended: after the agent got its last byte.
    deadline = time.monotonic() + 10
    while (usage := _compile_usage(sidecar.database_url, raw.headers["x-ctxc-compile-id"])) is None:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    assert usage["prompt_tokens"] > 0 and usage["completion_tokens"] > 0
    # An agent that asked gets the usage chunk, as from the provider.
    asked = sidecar.openai(session).chat.completions.create(
        model="gpt-4o",
        stream=True,
        stream_options={"include_usage": True},
        messages=[{"role": "user", "content": "hi"}, {"role": "assistant", "content": "x"}],
    )
    assert [c.usage for c in asked if c.usage]


README = Path(__file__).resolve().parents[2] / "README.md"


README_URL = "http://127.0.0.1:8080"


def quick_starts() -> list[str]:
    """The python blocks of the README's "## Sidecar" section."""
    text = README.read_text()
    start = text.index("\n## Sidecar\n")
    section = text[start : text.index("\n## ", start + 1)]
    blocks = re.findall(r"^```python\n(.*?)^```", section, re.M | re.S)
    assert len(blocks) == 2 and all(README_URL in b for b in blocks)
    # The sidecar's page shows the same two, as its start.
    page = (README.parent / "docs" / "sidecar.md").read_text()
    assert re.findall(r"^```python\n(.*?)^```", page, re.M | re.S)[:2] == blocks
    return blocks


def test_the_readme_quick_starts_run(database_url: str, tmp_path: Path) -> None:
    """As written, against `make serve`'s local mode (no ctxc key), each SDK's key from its
    usual environment variable; then the agent resends its history with the reply."""
    openai_block, anthropic_block = quick_starts()
    then = {
        "openai": "\nhistory.append(reply.choices[0].message)\nhistory.append({'role': 'user', "
        "'content': 'And now?'})\nclient.chat.completions.create(model='gpt-4o', "
        "messages=history)\nprint(reply.choices[0].message.content)\n",
        "anthropic": "\nhistory.append({'role': 'assistant', 'content': reply.content})\n"
        "history.append({'role': 'user', 'content': 'And now?'})\nclient.messages.create("
        "model='claude-haiku-4-5', max_tokens=1024, messages=history)\n"
        "print(reply.content[0].text)\n",
    }
    with Upstream() as upstream:
        settings = Settings(
            database_url=database_url,
            openai_upstream=upstream.openai_base,
            anthropic_upstream=upstream.anthropic_base,
        )
        with LiveServer(settings) as server:
            env = {**os.environ, "OPENAI_API_KEY": "sk-test", "ANTHROPIC_API_KEY": "sk-ant-test"}
            for name, block in (("openai", openai_block), ("anthropic", anthropic_block)):
                code = block.replace(README_URL, server.url) + then[name]
                done = subprocess.run(
                    [sys.executable, "-c", code],
                    env=env,
                    cwd=tmp_path,
                    capture_output=True,
                    text=True,
                    timeout=120,
                )
                assert done.returncode == 0, done.stderr
                assert done.stdout.strip()
            with httpx.Client(base_url=server.url) as ctxc:
                for session, roles in (
                    ("my-agent", ["user", "assistant", "user", "assistant"]),
                    ("my-other-agent", ["user", "assistant", "user", "assistant"]),
                ):
                    page = ctxc.get(f"/v1/sessions/{session}/messages").json()
                    assert [i["message"]["role"] for i in page["items"]] == roles


def _message_lookups(sidecar: Sidecar) -> float:
    with httpx.Client(base_url=sidecar.url) as c:
        text = scrape(c).text
    found = re.search(r'ctxc_cache_lookups_total\{cache="messages",result="(?:hit)"\} (\S+)', text)
    missed = re.search(r'ctxc_cache_lookups_total\{cache="messages",result="miss"\} (\S+)', text)
    return sum(float(m.group(1)) for m in (found, missed) if m)


def test_a_turn_parses_only_what_follows_the_part_the_session_holds(
    sidecar: Sidecar, up: Upstream
) -> None:
    session = f"fast-{uuid.uuid4().hex[:6]}"
    history = openai_loop(sidecar, session, turns=5, window=100_000)
    history.append({"role": "user", "content": "One more thing."})
    before = _message_lookups(sidecar)
    sidecar.openai(session).chat.completions.create(
        model="gpt-4o", messages=history, tools=TOOLS_OPENAI
    )
    # The reply ctxc stored last turn (compared by content) and the new prompt: not the other
    # 20 messages, which were sent byte for byte as before.
    assert _message_lookups(sidecar) - before == 2


def test_a_history_serialised_differently_still_extends_the_session(
    sidecar: Sidecar, up: Upstream
) -> None:
    session = f"reordered-{uuid.uuid4().hex[:6]}"
    history = openai_loop(sidecar, session, turns=2, window=100_000)
    # The same messages, their keys in another order (another JSON library, say).
    resent = [dict(reversed(list(m.items()))) if isinstance(m, dict) else m for m in history]
    resent.append({"role": "user", "content": "Go on."})
    raw = sidecar.openai(session).chat.completions.with_raw_response.create(
        model="gpt-4o", messages=resent
    )
    assert "x-ctxc-forked-to" not in raw.headers
    assert len(stored(sidecar, session)) == len(resent) + 1


def _claude_code_turn(history: list[Any], billing: int) -> tuple[list[Any], list[Any]]:
    """The request Claude Code sends for ``history``: a billing line of its own in the system
    prompt, its breakpoint on the newest message only, and a message that had one text block
    and lost its breakpoint written back as a string."""
    system = [
        {"type": "text", "text": f"x-anthropic-billing-header: cc_version=2.1; cch={billing:04x};"},
        {"type": "text", "text": "You are a coding agent.", "cache_control": {"type": "ephemeral"}},
    ]
    messages = []
    for i, message in enumerate(history):
        blocks = [dict(b) for b in message["content"]]
        if i == len(history) - 1:
            blocks[-1]["cache_control"] = {"type": "ephemeral"}
        elif len(blocks) == 1 and blocks[0]["type"] == "text":
            messages.append({"role": message["role"], "content": blocks[0]["text"]})
            continue
        messages.append({"role": message["role"], "content": blocks})
    return system, messages


def test_an_agent_that_moves_its_breakpoints_never_forks(sidecar: Sidecar, up: Upstream) -> None:
    session = f"moves-{uuid.uuid4().hex[:6]}"
    client = sidecar.anthropic(session)
    history: list[Any] = [{"role": "user", "content": [{"type": "text", "text": prompt(0)}]}]
    for turn in range(16):
        system, messages = _claude_code_turn(history, turn)
        raw = client.messages.with_raw_response.create(
            model="claude-haiku-4-5",
            max_tokens=256,
            system=system,
            messages=messages,
            tools=TOOLS_ANTHROPIC,
        )
        assert "x-ctxc-forked-to" not in raw.headers
        # The system prompt goes on as the agent sent it this turn, its billing line included.
        assert up.requests[-1].body["system"] == system
        reply = raw.parse()
        history.append({"role": "assistant", "content": [b.model_dump() for b in reply.content]})
        calls = [b for b in reply.content if b.type == "tool_use"]
        results = [
            {"type": "tool_result", "tool_use_id": c.id, "content": f"module {turn}"} for c in calls
        ] or [{"type": "text", "text": prompt(turn + 1)}]
        history.append({"role": "user", "content": results})
    with sidecar.ctxc() as c:
        assert c.get(f"/v1/sessions/{session}:fork-1").status_code == 404
    # Each message once: the system prompt, then every message the agent sent or got back.
    assert len(stored(sidecar, session)) == 1 + len(history) - 1


def test_a_turn_that_extends_its_session_reads_the_session_once(
    sidecar: Sidecar, up: Upstream
) -> None:
    """The open reads the session with its thread and its tenant's name in one statement, and
    the compile takes the row it read: the session is looked up by its id twice in a turn, by
    the open and by the store after the reply, where the compile looked it up again too."""
    session = f"once-{uuid.uuid4().hex[:6]}"
    history = openai_loop(sidecar, session, turns=2, window=100_000)
    history.append({"role": "user", "content": "One more thing."})
    client = sidecar.openai(session)
    with counted("sessions.id = ") as reads:
        client.chat.completions.create(model="gpt-4o", messages=history, tools=TOOLS_OPENAI)
    assert len(reads) == 2, reads
    assert "proxy_threads" in reads[0] and "tenants" in reads[0]
    assert stored(sidecar, session)[-2]["content"][0]["text"] == "One more thing."


def test_a_turn_the_upstream_counted_as_filling_the_window_compacts_the_next(
    sidecar: Sidecar, up: Upstream
) -> None:
    """The usage a turn's reply reported is what the next turn's compile acts on, once: a
    prompt the provider counted as filling the window (what a sidecar session's policy compacts
    on) makes the next turn compact the session, and the turn after it compacts nothing more."""
    session = f"full-{uuid.uuid4().hex[:6]}"
    history = openai_loop(sidecar, session, turns=3, window=100_000)
    client = sidecar.openai(session, **{"X-Ctxc-Context-Window": "100000"})
    up.prompt_count = lambda body: 100_000
    try:
        history.append({"role": "user", "content": prompt(3)})
        reply = client.chat.completions.create(model="gpt-4o", messages=history)
    finally:
        up.prompt_count = None
    history.append(reply.choices[0].message)
    for turn in (4, 5):
        history.append({"role": "user", "content": prompt(turn)})
        reply = client.chat.completions.create(model="gpt-4o", messages=history)
        history.append(reply.choices[0].message)
        with sidecar.ctxc() as c:
            compactions = c.get(f"/v1/sessions/{session}/compactions").json()["items"]
        assert [r["reason"] for r in compactions] == ["reactive_full"], turn
