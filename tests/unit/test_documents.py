"""Stored messages rendered as provider documents and tool-call shapes (pure, no I/O)."""

from __future__ import annotations

from app.domain.formats.anthropic import from_anthropic
from app.domain.formats.documents import call_shape, provider_document, result_shape
from app.domain.formats.openai import from_openai

TURNS = [
    {
        "role": "assistant",
        "content": [
            {"type": "tool_use", "id": "a", "name": "ls", "input": {}},
            {"type": "tool_use", "id": "b", "name": "cat", "input": {"path": "x"}},
        ],
    },
    {
        "role": "user",
        "content": [
            {"type": "tool_result", "tool_use_id": "a", "content": "x y"},
            {"type": "text", "text": "and then?"},
            {"type": "tool_result", "tool_use_id": "b", "content": "hello", "is_error": False},
        ],
    },
]


def test_a_turn_split_for_openai_keeps_its_seq_on_each_message() -> None:
    system, *messages = from_anthropic(TURNS, "Be brief.")
    stored = [(1, system), (2, messages[0]), (3, messages[1])]
    openai = provider_document("openai", stored)
    assert [m["role"] for m in openai.messages] == ["system", "assistant", "tool", "tool", "user"]
    assert openai.seqs == [1, 2, 3, 3, 3]
    anthropic = provider_document("anthropic", stored)
    assert (anthropic.system, anthropic.messages, anthropic.seqs) == ("Be brief.", TURNS, [2, 3])


def test_each_result_of_a_mixed_turn_has_its_own_tool_message_and_block() -> None:
    call_turn, results_turn = from_anthropic(TURNS)
    second = results_turn.tool_results[1]
    assert result_shape("openai", results_turn, second) == {
        "role": "tool",
        "tool_call_id": "b",
        "content": "hello",
    }
    assert result_shape("anthropic", results_turn, second) == TURNS[1]["content"][2]
    assert call_shape("anthropic", call_turn.tool_calls[1]) == TURNS[0]["content"][1]
    assert call_shape("openai", call_turn.tool_calls[1]) == {
        "id": "b",
        "type": "function",
        "function": {"name": "cat", "arguments": '{"path":"x"}'},
    }


def test_an_openai_tool_message_comes_back_with_its_own_fields() -> None:
    legacy = {"role": "function", "name": "ls", "content": "x y"}
    [message] = from_openai([legacy])
    assert result_shape("openai", message, message.tool_results[0]) == legacy
