"""What the sidecar counts as the same reply when an agent resends it (app/services/sidecar)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.domain.formats.convert import parse_messages
from app.domain.wire import fitting_share
from app.services.sessions.cache import canonical_json
from app.services.sidecar.threads import chain, content_digest, essential


def digest(fmt: str, message: dict[str, Any]) -> str:
    return content_digest(parse_messages(fmt, [message]))  # type: ignore[arg-type]


CALL = {
    "id": "call_1",
    "type": "function",
    "function": {"name": "read", "arguments": '{"path": "a.py"}'},
}


@pytest.mark.parametrize(
    ("received", "resent"),
    [
        # An OpenAI-compatible server's reasoning, which agents must not send back.
        (
            {"role": "assistant", "content": "x", "reasoning_content": "because"},
            {"role": "assistant", "content": "x"},
        ),
        # The SDK's dump of its message object, nulls and all.
        (
            {"role": "assistant", "content": None, "tool_calls": [CALL]},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [CALL],
                "refusal": None,
                "annotations": [],
                "audio": None,
                "function_call": None,
            },
        ),
        # Blank text next to tool calls, and arguments with other spacing.
        (
            {"role": "assistant", "content": "", "tool_calls": [CALL]},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {**CALL, "function": {"name": "read", "arguments": '{"path":"a.py"}'}}
                ],
            },
        ),
    ],
)
def test_an_openai_reply_resent_differently_is_the_same(
    received: dict[str, Any], resent: dict[str, Any]
) -> None:
    assert digest("openai", received) == digest("openai", resent)


def test_an_anthropic_reply_resent_without_its_thinking_is_the_same() -> None:
    text = {"type": "text", "text": "Done."}
    thinking = {"type": "thinking", "thinking": "hmm", "signature": "sig"}
    received = {"role": "assistant", "content": [thinking, text]}
    assert digest("anthropic", received) == digest(
        "anthropic", {"role": "assistant", "content": [text]}
    )
    assert digest("anthropic", received) == digest(
        "anthropic", {"role": "assistant", "content": [thinking, {**text, "citations": None}]}
    )


@pytest.mark.parametrize(
    "other",
    [
        {"role": "assistant", "content": "y"},
        {"role": "user", "content": "x"},
        {"role": "assistant", "content": "x", "tool_calls": [CALL]},
        {
            "role": "assistant",
            "content": "x",
            "tool_calls": [{**CALL, "function": {"name": "read", "arguments": '{"path": "b"}'}}],
        },
    ],
)
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
        (
            "openai",
            "This model's maximum context length is 8000 tokens. However, your messages "
            "resulted in 10000 tokens. Please reduce the length of the messages.",
            0.8,
        ),
        ("openai", "Input tokens exceed the configured limit", None),
        ("anthropic", "prompt is too long: 100 tokens > 200 maximum", None),  # says nothing
    ],
)
def test_what_an_overflow_error_says_fits(provider: str, message: str, share: float | None) -> None:
    body = json.dumps({"error": {"type": "invalid_request_error", "message": message}}).encode()
    assert fitting_share(provider, body) == share  # type: ignore[arg-type]


# A thread's identity: what Claude Code moves from turn to turn is not part of it.
BREAKPOINT = {"type": "ephemeral"}
BILLING = "x-anthropic-billing-header: cc_version=2.1; cch=%d;"


def _dressed(texts: list[str], marks: list[int]) -> list[dict[str, Any]]:
    """Messages saying ``texts`` (user text, assistant text, user tool result, ...), each in
    one of the forms an agent sends the same message in: ``marks[i]`` 0 a string, 1 one text
    block, 2 that block with a breakpoint."""
    out: list[dict[str, Any]] = []
    for i, (text, mark) in enumerate(zip(texts, marks, strict=True)):
        block: dict[str, Any] = {"type": "text", "text": text}
        if i % 3 == 2:  # a tool result, the breakpoint on the result block
            inner: Any = text if mark == 0 else [block]
            result = {"type": "tool_result", "tool_use_id": f"t{i}", "content": inner}
            out.append({"role": "user", "content": [result | _mark(mark)]})
            continue
        role = "assistant" if i % 3 == 1 else "user"
        out.append({"role": role, "content": text if mark == 0 else [block | _mark(mark)]})
    return out


def _mark(mark: int) -> dict[str, Any]:
    return {"cache_control": BREAKPOINT} if mark == 2 else {}


def _system(turn: int) -> list[dict[str, Any]]:
    prompt = {"type": "text", "text": "You are Claude Code.", "cache_control": BREAKPOINT}
    return [{"type": "text", "text": BILLING % turn}, prompt]


def _identity(messages: list[Any], system: Any) -> bytes:
    kept, plain_system = essential("anthropic", messages, system)
    return canonical_json([plain_system, kept])


texts = st.lists(st.text(min_size=1, max_size=8), min_size=1, max_size=9)


@given(data=st.data(), said=texts)
def test_any_placement_of_breakpoints_is_the_same_thread(
    data: st.DataObject, said: list[str]
) -> None:
    forms = st.lists(st.integers(0, 2), min_size=len(said), max_size=len(said))
    one, other = data.draw(forms), data.draw(forms)
    first = _identity(_dressed(said, one), _system(1))
    assert first == _identity(_dressed(said, other), _system(2))


@given(data=st.data(), said=texts)
def test_a_real_edit_is_another_thread(data: st.DataObject, said: list[str]) -> None:
    forms = st.lists(st.integers(0, 2), min_size=len(said), max_size=len(said))
    marks = data.draw(forms)
    where = data.draw(st.integers(0, len(said) - 1))
    edited = [*said[:where], said[where] + "!", *said[where + 1 :]]
    removed = [*said[:where], *said[where + 1 :]]
    first = _identity(_dressed(said, marks), _system(1))
    assert first != _identity(_dressed(edited, marks), _system(1))
    kept = [m for i, m in enumerate(marks) if i != where]
    assert first != _identity(_dressed(removed, kept), _system(1))


def test_other_system_blocks_and_other_formats_are_kept() -> None:
    system = [{"type": "text", "text": "A rule that changes.", "cache_control": BREAKPOINT}]
    assert essential("anthropic", [], system)[1] == [
        {"type": "text", "text": "A rule that changes."}
    ]
    gemini = [{"role": "model", "parts": [{"text": "x", "thoughtSignature": "c2ln"}]}]
    assert essential("gemini", gemini, None) == (gemini, None)
    untouched = [{"role": "user", "content": "hi"}]
    assert essential("anthropic", untouched, None)[0][0] is untouched[0]
