"""What the sidecar counts as the same reply when an agent resends it (app/services/sidecar)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from app.domain.formats.convert import parse_messages
from app.domain.wire import fitting_share
from app.services.sidecar.threads import chain, content_digest


def digest(fmt: str, message: dict[str, Any]) -> str:
    return content_digest(parse_messages(fmt, [message]))  # type: ignore[arg-type]


CALL = {"id": "call_1", "type": "function",
        "function": {"name": "read", "arguments": '{"path": "a.py"}'}}  # fmt: skip


@pytest.mark.parametrize(
    ("received", "resent"),
    [
        # An OpenAI-compatible server's reasoning, which agents must not send back.
        ({"role": "assistant", "content": "x", "reasoning_content": "because"},
         {"role": "assistant", "content": "x"}),
        # The SDK's dump of its message object, nulls and all.
        ({"role": "assistant", "content": None, "tool_calls": [CALL]},
         {"role": "assistant", "content": None, "tool_calls": [CALL], "refusal": None,
          "annotations": [], "audio": None, "function_call": None}),
        # Blank text next to tool calls, and arguments with other spacing.
        ({"role": "assistant", "content": "", "tool_calls": [CALL]},
         {"role": "assistant", "content": None, "tool_calls": [
             {**CALL, "function": {"name": "read", "arguments": '{"path":"a.py"}'}}]}),
    ],
)  # fmt: skip
def test_an_openai_reply_resent_differently_is_the_same(
    received: dict[str, Any], resent: dict[str, Any]
) -> None:
    assert digest("openai", received) == digest("openai", resent)


def test_an_anthropic_reply_resent_without_its_thinking_is_the_same() -> None:
    text = {"type": "text", "text": "Done."}
    thinking = {"type": "thinking", "thinking": "hmm", "signature": "sig"}
    received = {"role": "assistant", "content": [thinking, text]}
    assert digest("anthropic", received) == digest("anthropic", {"role": "assistant",
                                                                 "content": [text]})  # fmt: skip
    assert digest("anthropic", received) == digest(
        "anthropic", {"role": "assistant", "content": [thinking, {**text, "citations": None}]}
    )


@pytest.mark.parametrize(
    "other",
    [
        {"role": "assistant", "content": "y"},
        {"role": "user", "content": "x"},
        {"role": "assistant", "content": "x", "tool_calls": [CALL]},
        {"role": "assistant", "content": "x",
         "tool_calls": [{**CALL, "function": {"name": "read", "arguments": '{"path": "b"}'}}]},
    ],
)  # fmt: skip
def test_a_different_reply_is_not_the_same(other: dict[str, Any]) -> None:
    assert digest("openai", {"role": "assistant", "content": "x"}) != digest("openai", other)


def test_a_chain_depends_on_every_key_and_its_order() -> None:
    keys = [bytes([n]) * 32 for n in range(3)]
    assert chain(keys) == chain(list(keys))
    assert chain(keys) != chain(keys[::-1]) != chain(keys[:2])


@pytest.mark.parametrize(
    ("provider", "message", "share"),
    [
        ("anthropic", "prompt is too long: 250000 tokens > 200000 maximum", 0.8),
        ("openai", "This model's maximum context length is 8000 tokens. However, your messages "
                   "resulted in 10000 tokens. Please reduce the length of the messages.", 0.8),
        ("openai", "Input tokens exceed the configured limit", None),
        ("anthropic", "prompt is too long: 100 tokens > 200 maximum", None),  # says nothing
    ],
)  # fmt: skip
def test_what_an_overflow_error_says_fits(provider: str, message: str, share: float | None) -> None:
    body = json.dumps({"error": {"type": "invalid_request_error", "message": message}}).encode()
    assert fitting_share(provider, body) == share  # type: ignore[arg-type]
