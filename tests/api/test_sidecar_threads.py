"""The sidecar's thread match with what Claude Code really sends, through the official
Anthropic SDK and a real ctxc server (on each database): breakpoints moved every turn, a text
block folded back into a string, a billing line that changes on every request."""

from __future__ import annotations

import uuid
from typing import Any

import anthropic

from tests.api.sidecar import TOOLS_ANTHROPIC, Sidecar, prompt, stored
from tests.upstreams import Upstream

BREAKPOINT = {"type": "ephemeral"}


def _system(request: int, who: str = "Claude Code") -> list[dict[str, Any]]:
    """Claude Code's system prompt: a billing line new on every request, then its prompt."""
    billing = f"x-anthropic-billing-header: cc_version=2.1.332; cch={request:05x};"
    prompt_block = {"type": "text", "text": f"You are {who}.", "cache_control": BREAKPOINT}
    return [{"type": "text", "text": billing}, prompt_block]


def _as_sent(history: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The history as Claude Code sends it: one breakpoint, on the newest message's last block
    (a string content becomes one text block to carry it); the others as they were."""
    newest = history[-1]
    content = newest["content"]
    blocks = [{"type": "text", "text": content}] if isinstance(content, str) else list(content)
    blocks[-1] = {**blocks[-1], "cache_control": BREAKPOINT}
    return [*history[:-1], {**newest, "content": blocks}]


def _breakpoints(value: Any) -> int:
    """The blocks of a request body that carry ``cache_control``."""
    if isinstance(value, list):
        return sum(_breakpoints(v) for v in value)
    if isinstance(value, dict):
        return ("cache_control" in value) + sum(_breakpoints(v) for v in value.values())
    return 0


def _send(
    client: anthropic.Anthropic, n: int, history: list[dict[str, Any]], who: str = "Claude Code"
) -> Any:
    """Request ``n`` of the loop, as Claude Code sends it."""
    return client.messages.with_raw_response.create(
        model="claude-haiku-4-5",
        max_tokens=512,
        system=_system(n, who),  # type: ignore[arg-type]
        messages=_as_sent(history),  # type: ignore[arg-type]
        tools=TOOLS_ANTHROPIC,  # type: ignore[arg-type]
    )


def _result(call_id: str) -> dict[str, Any]:
    return {"type": "tool_result", "tool_use_id": call_id, "content": "code line\n" * 30}


def _claude_code(sidecar: Sidecar, session: str, requests: int) -> list[dict[str, Any]]:
    """A Claude-Code-like loop of ``requests`` requests: prompt, tool call, tool result, ...
    Every answer says it did not fork."""
    client = sidecar.anthropic(session)
    history: list[dict[str, Any]] = [{"role": "user", "content": prompt(0)}]
    for n in range(requests):
        raw = _send(client, n, history)
        assert "x-ctxc-forked-to" not in raw.headers
        assert raw.headers["x-ctxc-session"] == session
        answer = raw.parse()
        history.append({"role": "assistant", "content": [b.model_dump() for b in answer.content]})
        calls = [b for b in answer.content if b.type == "tool_use"]
        results = [_result(c.id) for c in calls]
        history.append({"role": "user", "content": results or prompt(n + 1)})
    return history


def _role(message: dict[str, Any]) -> str:
    """The role ctxc stores a message under (tool results are ``tool`` messages)."""
    content = message["content"]
    results = isinstance(content, list) and content[0]["type"] == "tool_result"
    return "tool" if results else str(message["role"])


def test_claude_codes_moving_breakpoints_never_fork(sidecar: Sidecar, up: Upstream) -> None:
    session = f"cc-{uuid.uuid4().hex[:8]}"
    history = _claude_code(sidecar, session, requests=16)
    messages = stored(sidecar, session)
    # The system prompt, then every message once (the last prompt was never sent).
    assert [m["role"] for m in messages] == ["system"] + [_role(m) for m in history[:-1]]
    with sidecar.ctxc() as c:
        assert c.get(f"/v1/sessions/{session}:fork-1").status_code == 404
    assert len(up.requests) == 16
    for n, seen in enumerate(up.requests):
        assert _breakpoints(seen.body) <= 4
        assert seen.body["system"] == _system(n)  # the request's own, billing line and all
        assert "cache_control" in seen.body["messages"][-1]["content"][-1]
        assert _breakpoints(seen.body["messages"]) == 1  # the agent's, none stored


def test_an_edit_in_a_claude_code_history_still_forks(sidecar: Sidecar, up: Upstream) -> None:
    session = f"cc-edit-{uuid.uuid4().hex[:8]}"
    history = _claude_code(sidecar, session, requests=3)
    # The same root (system prompt and first message), then another message.
    edited = [*history[:2], {"role": "user", "content": "Another task altogether."}]
    raw = _send(sidecar.anthropic(session), 9, edited)
    assert raw.headers["x-ctxc-forked-to"] == f"{session}:fork-1"


def _step(raw: Any, history: list[dict[str, Any]], n: int) -> None:
    """The agent's history after answer ``raw``: the reply, then its tool results or a prompt."""
    answer = raw.parse()
    history.append({"role": "assistant", "content": [b.model_dump() for b in answer.content]})
    results = [_result(b.id) for b in answer.content if b.type == "tool_use"]
    history.append({"role": "user", "content": results or prompt(n + 1)})


def test_two_conversations_under_one_header_each_continue(sidecar: Sidecar, up: Upstream) -> None:
    session = f"cc-two-{uuid.uuid4().hex[:8]}"
    client = sidecar.anthropic(session)
    agents = {"Claude Code": session, "a sub-agent": f"{session}:thread-1"}
    histories: dict[str, list[dict[str, Any]]] = {
        who: [{"role": "user", "content": f"{who}: {prompt(0)}"}] for who in agents
    }
    for n in range(12):  # main, sub-agent, main, ...
        who = list(agents)[n % 2]
        raw = _send(client, n, histories[who], who)
        assert "x-ctxc-forked-to" not in raw.headers
        assert raw.headers["x-ctxc-session"] == agents[who]
        _step(raw, histories[who], n)
    for who, stored_in in agents.items():
        messages = stored(sidecar, stored_in)
        assert [m["role"] for m in messages] == ["system"] + [_role(m) for m in histories[who][:-1]]
    with sidecar.ctxc() as c:
        thread = c.get(f"/v1/sessions/{session}:thread-1").json()
        assert thread["metadata"]["ctxc_thread_of"] == session
        assert c.get(f"/v1/sessions/{session}:thread-2").status_code == 404
        assert c.get(f"/v1/sessions/{session}:fork-1").status_code == 404


def test_side_requests_with_other_endings_start_threads_beside(
    sidecar: Sidecar, up: Upstream
) -> None:
    """A side request resends the main conversation with a question of its own (Gemini CLI's
    next-speaker check): each is a conversation beside the main one, which stays where it is;
    one that goes on with its own answer continues its thread. Nothing forks."""
    session = f"cc-side-{uuid.uuid4().hex[:8]}"
    client = sidecar.anthropic(session)
    main: list[dict[str, Any]] = [{"role": "user", "content": prompt(0)}]
    question = {"role": "user", "content": "Who speaks next: the user or the model?"}
    answers = []
    for n in range(3):
        raw = _send(client, n, main)
        answers.append(raw.headers)
        assert raw.headers["x-ctxc-session"] == session
        _step(raw, main, n)
        side = [*main[:-1], question]
        raw = _send(client, 10 + n, side, "a next-speaker check")
        answers.append(raw.headers)
        assert raw.headers["x-ctxc-session"] == f"{session}:thread-{n + 1}"
        if n == 2:  # the check goes on: it continues its own thread
            _step(raw, side, n)
            raw = _send(client, 20, side, "a next-speaker check")
            answers.append(raw.headers)
            assert raw.headers["x-ctxc-session"] == f"{session}:thread-3"
    assert not [a["x-ctxc-forked-to"] for a in answers if "x-ctxc-forked-to" in a]
    assert [m["role"] for m in stored(sidecar, session)][1:] == [_role(m) for m in main[:-1]]
    with sidecar.ctxc() as c:
        for forked in (session, *(f"{session}:thread-{n}" for n in (1, 2, 3))):
            assert c.get(f"/v1/sessions/{forked}:fork-1").status_code == 404
        assert c.get(f"/v1/sessions/{session}:thread-4").status_code == 404
