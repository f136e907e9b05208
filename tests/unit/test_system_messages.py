"""System messages inside the conversation (Anthropic's mid-conversation system messages, OpenAI
system/developer messages, Responses system/developer items): read, stored as sent, written
back at their place, converted for the other shapes, and valid after the repairs."""

from __future__ import annotations

from typing import Any

import pytest

from app.domain.formats.anthropic import from_anthropic, in_messages, to_anthropic
from app.domain.formats.documents import provider_document
from app.domain.formats.gemini import to_gemini
from app.domain.formats.openai import from_openai, to_openai
from app.domain.formats.responses import from_responses, to_responses
from app.domain.messages import Message, TextPart
from app.domain.validity import render, request_problems

CACHED = {"type": "ephemeral"}
AGENTS = "<system-reminder>Available agents: general-purpose, Explore</system-reminder>"


def claude_code_turns() -> list[dict[str, Any]]:
    """Claude Code 2.1's shape: the task, its agent list as a system message, then the loop."""
    return [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "<system-reminder>x</system-reminder>"},
                {"type": "text", "text": "Fix the failing test."},
            ],
        },
        {"role": "system", "content": [{"type": "text", "text": AGENTS, "cache_control": CACHED}]},
        {
            "role": "assistant",
            "content": [
                {"type": "tool_use", "id": "toolu_1", "name": "Read", "input": {"path": "a.py"}}
            ],
        },
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "print(1)"}],
        },
        {"role": "system", "content": "The user switched to plan mode."},
        {"role": "assistant", "content": [{"type": "text", "text": "Done."}]},
        {"role": "user", "content": "thanks"},
    ]


def test_anthropic_system_messages_in_messages_are_read_and_written_back_in_place() -> None:
    turns = claude_code_turns()
    messages = from_anthropic(turns, system="You are Claude Code.")
    assert [m.role for m in messages] == [
        "system",
        "user",
        "system",
        "assistant",
        "tool",
        "system",
        "assistant",
        "user",
    ]
    assert [in_messages(m) for m in messages if m.role == "system"] == [False, True, True]
    assert messages[2].content[0].metadata == {"anthropic": {"extra": {"cache_control": CACHED}}}
    assert to_anthropic(messages) == ("You are Claude Code.", turns)


def test_anthropic_system_messages_render_valid_and_in_place() -> None:
    turns = claude_code_turns()
    system, out, warnings = render(from_anthropic(turns, system="sys"), "anthropic")
    assert (system, out) == ("sys", turns)
    assert warnings == []
    assert request_problems("anthropic", system, out) == []


def test_a_system_message_between_two_user_turns_is_not_merged_into_them() -> None:
    turns = [
        {"role": "user", "content": "task"},
        {"role": "system", "content": "agents"},
        {"role": "user", "content": "more"},
    ]
    system, out, _ = render(from_anthropic(turns), "anthropic")
    assert out == turns
    assert request_problems("anthropic", system, out) == []


def test_a_leading_system_message_gets_a_user_turn_before_it() -> None:
    messages = from_anthropic(
        [
            {"role": "user", "content": "t"},
            {"role": "system", "content": "s"},
            {"role": "assistant", "content": "a"},
        ]
    )[1:]
    system, out, _ = render(messages, "anthropic")
    assert [t["role"] for t in out] == ["user", "system", "assistant"]
    assert request_problems("anthropic", system, out) == []


def test_the_validator_checks_system_messages_in_messages() -> None:
    bad = [
        {"role": "user", "content": "t"},
        {"role": "system", "content": [{"type": "image", "source": {}}]},
    ]
    assert request_problems("anthropic", None, bad) == [
        "message 1: block 0: a system message holds text blocks only"
    ]
    assert request_problems("anthropic", None, [{"role": "system", "content": "s"}])


def test_anthropic_system_messages_convert_in_place_for_the_other_shapes() -> None:
    messages = from_anthropic(claude_code_turns(), system="sys")
    chat = to_openai(messages)
    assert [m["role"] for m in chat][:3] == ["system", "user", "system"]
    assert chat[2]["content"] == AGENTS
    assert request_problems("openai", None, render(messages, "openai")[1]) == []
    instructions, items = to_responses(messages)
    assert instructions == "sys"
    assert [i.get("role") for i in items][:2] == ["user", "system"]
    system, out, _ = render(messages, "responses")
    assert request_problems("responses", system, out) == []
    # Gemini has no system turn: every system message joins the system instruction, in order.
    instruction, _ = to_gemini(messages)
    assert [p["text"] for p in instruction["parts"]] == [  # type: ignore[index]
        "sys",
        AGENTS,
        "The user switched to plan mode.",
    ]
    system, out, _ = render(messages, "gemini")
    assert request_problems("gemini", system, out) == []


@pytest.mark.parametrize("role", ["system", "developer"])
def test_openai_system_and_developer_messages_stay_in_place(role: str) -> None:
    sent = [
        {"role": "system", "content": "sys"},
        {"role": "user", "content": "task"},
        {"role": "assistant", "content": "ok"},
        {"role": role, "content": "new rule"},
        {"role": "user", "content": "go"},
    ]
    messages = from_openai(sent)
    assert [m.role for m in messages] == ["system", "user", "assistant", "system", "user"]
    assert to_openai(messages) == sent
    _, out, _ = render(messages, "openai")
    assert out == sent


@pytest.mark.parametrize("role", ["system", "developer"])
def test_responses_system_and_developer_items_stay_in_place(role: str) -> None:
    items = [
        {"type": "message", "role": "developer", "content": "instructions"},
        {"type": "message", "role": "user", "content": "task"},
        {
            "type": "message",
            "role": "assistant",
            "content": [{"type": "output_text", "text": "ok", "annotations": []}],
        },
        {"type": "message", "role": role, "content": "new rule"},
        {"type": "message", "role": "user", "content": "go"},
    ]
    messages = from_responses(items)
    assert [m.role for m in messages] == ["system", "user", "assistant", "system", "user"]
    assert to_responses(messages) == (None, items)
    system, out, _ = render(messages, "responses")
    assert (system, out) == (None, items)


def test_a_system_message_from_another_shape_goes_to_the_anthropic_system_prompt() -> None:
    # Only a system message that came inside Anthropic `messages` goes back there.
    messages = [
        Message(role="system", content=(TextPart(text="a"),)),
        Message(role="user", content=(TextPart(text="u"),)),
        Message(role="system", content=(TextPart(text="b"),)),
    ]
    system, out = to_anthropic(messages)
    assert system == [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]
    assert out == [{"role": "user", "content": [{"type": "text", "text": "u"}]}]


def test_the_anthropic_document_gives_a_system_message_in_messages_its_seq() -> None:
    messages = from_anthropic(claude_code_turns(), system="sys")
    document = provider_document("anthropic", list(enumerate(messages, start=10)))
    assert document.system == "sys"
    assert document.messages == claude_code_turns()
    assert document.seqs == [11, 12, 13, 14, 15, 16, 17]
