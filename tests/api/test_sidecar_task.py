"""The sidecar with what Claude Code sends today: a system message inside ``messages`` is
accepted, forwarded at its place and stored; the opening task (with its reminder blocks) stays
byte-identical in the request retried after the provider's "prompt is too long"."""

from __future__ import annotations

import uuid
from typing import Any

from tests.api.sidecar import TOOLS_ANTHROPIC, Sidecar, prompt, stored, tool_results
from tests.upstreams import Upstream

TASK = {
    "role": "user",
    "content": [
        {
            "type": "text",
            "text": "<system-reminder>\nAs you answer, use the CLAUDE.md context.\n"
            "</system-reminder>",
        },
        {"type": "text", "text": "Fix the failing test in tests/test_parser.py."},
    ],
}
AGENTS = {
    "role": "system",
    "content": [
        {
            "type": "text",
            "text": "Available agents: general-purpose, Explore, Plan.",
            "cache_control": {"type": "ephemeral"},
        },
    ],
}
# As it goes on once the session holds it: a breakpoint is resent only on the request's new
# messages, and one plain text block is its string (what a thread ignores, docs/sidecar.md).
AGENTS_HELD = {"role": "system", "content": "Available agents: general-purpose, Explore, Plan."}


def _turn(client: Any, history: list[Any]) -> Any:
    return client.messages.create(
        model="claude-haiku-4-5",
        max_tokens=256,
        system="You are Claude Code.",
        messages=history,
        tools=TOOLS_ANTHROPIC,
    )


def test_a_system_message_inside_messages_is_forwarded_in_place_and_stored(
    sidecar: Sidecar, up: Upstream
) -> None:
    session = f"cc-{uuid.uuid4().hex[:8]}"
    client = sidecar.anthropic(session)
    history: list[Any] = [TASK, AGENTS]
    answer = _turn(client, history)
    assert up.requests[-1].body["messages"] == [TASK, AGENTS]
    assert up.requests[-1].body["system"] == "You are Claude Code."
    history.append(
        {"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in answer.content]}
    )
    history.append({"role": "user", "content": "Go on."})
    _turn(client, history)
    assert up.requests[-1].body["messages"][:2] == [TASK, AGENTS_HELD]
    roles = [m["role"] for m in stored(sidecar, session)]
    assert roles[:3] == ["system", "user", "system"]
    assert roles.count("system") == 2  # stored once, not again on the second turn
    with sidecar.ctxc() as c:  # stored as sent: read back in Anthropic's shape, at its place
        page = c.get(f"/v1/sessions/{session}/messages", params={"format": "anthropic"}).json()
    assert page["system"] == "You are Claude Code."
    assert page["messages"][:2] == [TASK, AGENTS_HELD]
    assert page["messages"][2:4] == history[2:4]


def test_the_task_survives_the_prompt_too_long_retry(sidecar: Sidecar, up: Upstream) -> None:
    session = f"ptl-{uuid.uuid4().hex[:8]}"
    client = sidecar.anthropic(session, **{"X-Ctxc-Context-Window": "100000"})
    history: list[Any] = [TASK, AGENTS]
    for turn in range(6):
        while True:
            final = _turn(client, history)
            history.append(
                {
                    "role": "assistant",
                    "content": [b.model_dump(exclude_none=True) for b in final.content],
                }
            )
            calls = [b for b in final.content if b.type == "tool_use"]
            if not calls:
                break
            history.append(tool_results(calls, turn))
        history.append({"role": "user", "content": prompt(turn)})
    up.requests.clear()
    up.window = 2_000  # the provider counts more than ctxc's budget allows for
    try:
        raw = client.messages.with_raw_response.create(
            model="claude-haiku-4-5",
            max_tokens=256,
            system="You are Claude Code.",
            messages=history,
            tools=TOOLS_ANTHROPIC,
        )
    finally:
        up.window = 1_000_000
    assert raw.headers["x-ctxc-retried"] == "prompt_too_long"
    assert len(up.requests) == 2
    retried = up.requests[1].body["messages"]
    assert retried[0] == TASK  # byte-identical: not replaced by, nor merged with, the summary
    assert AGENTS_HELD in retried
    assert len(retried) < len(up.requests[0].body["messages"])


def test_an_openai_developer_message_mid_history_is_forwarded_in_place(
    sidecar: Sidecar, up: Upstream
) -> None:
    session = f"dev-{uuid.uuid4().hex[:8]}"
    client = sidecar.openai(session)
    history: list[Any] = [
        {"role": "system", "content": "You are a coding agent."},
        {"role": "user", "content": "Fix the failing test."},
    ]
    answer = client.chat.completions.create(model="gpt-4o", messages=history)
    history.append({"role": "assistant", "content": answer.choices[0].message.content})
    history += [
        {"role": "developer", "content": "Plan mode: do not edit files."},
        {"role": "user", "content": "Go on."},
    ]
    client.chat.completions.create(model="gpt-4o", messages=history)
    assert up.requests[-1].body["messages"] == history
    assert [m["role"] for m in stored(sidecar, session)] == [
        "system",
        "user",
        "assistant",
        "system",
        "user",
        "assistant",
    ]
