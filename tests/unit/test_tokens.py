"""The chat-format counting rule, on the domain alone."""

from __future__ import annotations

from app.adapters.tokenizers import load_counter
from app.domain.messages import ImagePart, Message, TextPart, ToolCallPart, ToolResultPart
from app.domain.tokens import (
    IMAGE_TOKENS,
    IMAGE_TOKENS_LOW,
    REPLY_PRIMING,
    TOKENS_PER_MESSAGE,
    TOKENS_PER_NAME,
    TOOL_CALL_OVERHEAD,
    count_message,
    request_total,
)

COUNTER = load_counter()
ENC = COUNTER.encoder("o200k_base")


def test_a_text_message_costs_overhead_role_and_text() -> None:
    message = Message(role="user", content=(TextPart(text="Hello there"),))
    assert count_message(message, ENC) == TOKENS_PER_MESSAGE + ENC.count("user") + ENC.count(
        "Hello there"
    )


def test_a_name_costs_one_more_token_plus_the_name() -> None:
    plain = Message(role="user", content=(TextPart(text="hi"),))
    named = plain.model_copy(update={"name": "alice"})
    assert count_message(named, ENC) - count_message(plain, ENC) == TOKENS_PER_NAME + ENC.count(
        "alice"
    )


def test_tool_calls_count_name_and_compact_json_arguments() -> None:
    call = ToolCallPart(id="c", name="read_file", arguments={"path": "a.py", "n": 1})
    message = Message(role="assistant", content=(call,))
    expected = TOOL_CALL_OVERHEAD + ENC.count("read_file") + ENC.count('{"path":"a.py","n":1}')
    assert count_message(message, ENC) == TOKENS_PER_MESSAGE + ENC.count("assistant") + expected


def test_tool_results_and_images() -> None:
    result = ToolResultPart(
        call_id="c", content=(TextPart(text="out"), ImagePart(url="http://x/i.png"))
    )
    message = Message(role="tool", content=(result,))
    assert (
        count_message(message, ENC)
        == TOKENS_PER_MESSAGE + ENC.count("tool") + ENC.count("out") + IMAGE_TOKENS
    )
    low = Message(role="user", content=(ImagePart(url="http://x/i.png", detail="low"),))
    assert count_message(low, ENC) == TOKENS_PER_MESSAGE + ENC.count("user") + IMAGE_TOKENS_LOW


def test_a_request_adds_reply_priming_once() -> None:
    assert request_total([10, 20]) == 30 + REPLY_PRIMING


def test_counts_differ_by_encoding() -> None:
    counts = COUNTER.count_all(
        Message(role="user", content=(TextPart(text="日本語のテキスト " * 30),))
    )
    assert set(counts) == {"o200k_base", "cl100k_base"}
    assert counts["o200k_base"] != counts["cl100k_base"]
