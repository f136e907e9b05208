"""Another format's parts are refused where they do not belong; unknown types stay opaque."""

from __future__ import annotations

from typing import Any

import pytest

from app.domain.errors import InvalidInput
from app.domain.formats._foreign import ANTHROPIC_BLOCKS, OPENAI_PARTS
from app.domain.formats.convert import Format, parse_messages
from app.domain.messages import OpaquePart

TOOL_USE = {"type": "tool_use", "id": "toolu_1", "name": "ls", "input": {"path": "."}}
TOOL_RESULT = {"type": "tool_result", "tool_use_id": "toolu_1", "content": "a.txt"}
ANTHROPIC = 'looks like Anthropic; send "format": "anthropic"'
OPENAI = 'looks like OpenAI; send "format": "openai"'
CANONICAL = 'looks like a canonical part; send "format": "canonical"'


def problems(fmt: Format, messages: list[Any], system: Any = None) -> list[tuple[Any, str]]:
    with pytest.raises(InvalidInput) as caught:
        parse_messages(fmt, messages, system)
    return list(caught.value.problems)


@pytest.mark.parametrize(
    ("messages", "path", "advice"),
    [
        (
            [{"role": "user", "content": "ls"}, {"role": "assistant", "content": [TOOL_USE]}],
            (1, "content", 0, "type"),
            ANTHROPIC,
        ),
        ([{"role": "user", "content": [TOOL_RESULT]}], (0, "content", 0, "type"), ANTHROPIC),
        (
            [{"role": "assistant", "content": [{"type": "thinking", "thinking": "hm"}]}],
            (0, "content", 0, "type"),
            ANTHROPIC,
        ),
        (
            [
                {
                    "role": "user",
                    "content": [{"type": "image", "source": {"type": "url", "url": "u"}}],
                }
            ],
            (0, "content", 0, "type"),
            ANTHROPIC,
        ),
        (
            [{"role": "user", "content": [{"type": "document", "source": {}}]}],
            (0, "content", 0, "type"),
            ANTHROPIC,
        ),
        (
            [
                {
                    "role": "assistant",
                    "content": [{"type": "tool_call", "id": "c", "name": "ls", "arguments": {}}],
                }
            ],
            (0, "content", 0, "type"),
            CANONICAL,
        ),
        (
            [{"role": "user", "content": [{"type": "image", "url": "https://x.test/a.png"}]}],
            (0, "content", 0, "type"),
            CANONICAL,
        ),
        (
            [
                {
                    "role": "tool",
                    "tool_call_id": "c",
                    "content": [{"type": "tool_result", "call_id": "c", "content": "x"}],
                }
            ],
            (0, "content", 0, "type"),
            CANONICAL,
        ),
        (
            [{"role": "assistant", "content": None, "tool_calls": [TOOL_USE]}],
            (0, "tool_calls", 0, "type"),
            ANTHROPIC,
        ),
    ],
)
def test_other_formats_parts_in_openai_messages_are_refused(
    messages: list[Any], path: tuple[Any, ...], advice: str
) -> None:
    [(where, message)] = problems("openai", messages)
    assert where == path and message.endswith(advice)


@pytest.mark.parametrize(
    ("messages", "path", "advice"),
    [
        (
            [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "u"}}]}],
            (0, "content", 0, "type"),
            OPENAI,
        ),
        (
            [{"role": "user", "content": [{"type": "input_audio", "input_audio": {}}]}],
            (0, "content", 0, "type"),
            OPENAI,
        ),
        (
            [
                {
                    "role": "assistant",
                    "content": "",
                    "tool_calls": [
                        {
                            "id": "c",
                            "type": "function",
                            "function": {"name": "f", "arguments": "{}"},
                        }
                    ],
                }
            ],
            (0, "tool_calls"),
            OPENAI,
        ),
        (
            [{"role": "user", "content": [{"type": "text", "text": "x"}], "tool_call_id": "c"}],
            (0, "tool_call_id"),
            OPENAI,
        ),
        ([{"role": "tool", "tool_call_id": "c", "content": "x"}], (0, "role"), OPENAI),
        ([{"role": "developer", "content": "x"}], (0, "role"), OPENAI),
        (
            [
                {
                    "role": "user",
                    "content": [
                        TOOL_RESULT
                        | {"content": [{"type": "image_url", "image_url": {"url": "u"}}]}
                    ],
                }
            ],
            (0, "content", 0, "content", 0, "type"),
            OPENAI,
        ),
        (
            [{"role": "assistant", "content": [{"type": "reasoning", "text": "hm"}]}],
            (0, "content", 0, "type"),
            CANONICAL,
        ),
        (
            [
                {
                    "role": "assistant",
                    "content": [{"type": "opaque", "provider": "anthropic", "data": {}}],
                }
            ],
            (0, "content", 0, "type"),
            CANONICAL,
        ),
    ],
)
def test_other_formats_parts_in_anthropic_turns_are_refused(
    messages: list[Any], path: tuple[Any, ...], advice: str
) -> None:
    [(where, message)] = problems("anthropic", messages)
    assert where == path and advice in message


def test_every_bad_message_of_a_batch_is_named() -> None:
    messages = [
        {"role": "user", "content": "ls"},
        {"role": "assistant", "content": [TOOL_USE]},
        {"role": "user", "content": [TOOL_RESULT]},
    ]
    assert [p for p, _ in problems("openai", messages)] == [
        (1, "content", 0, "type"),
        (2, "content", 0, "type"),
    ]
    # ... and the same batch in its own format is accepted, as calls and results.
    parsed = parse_messages("anthropic", messages)
    assert [m.role for m in parsed] == ["user", "assistant", "tool"]


@pytest.mark.parametrize(
    ("part", "path", "advice"),
    [
        (
            {"type": "opaque", "provider": "openai", "data": TOOL_USE},
            (0, "content", 0, "data", "type"),
            'give it "provider": "anthropic"',
        ),
        (
            {"type": "opaque", "provider": "anthropic", "data": {"type": "image_url"}},
            (0, "content", 0, "data", "type"),
            'give it "provider": "openai"',
        ),
        (
            {"type": "opaque", "provider": "anthropic", "data": TOOL_USE},
            (0, "content", 0, "data", "type"),
            'or the message with "format": "anthropic"',
        ),
        (
            {
                "type": "tool_result",
                "call_id": "c",
                "content": [
                    {"type": "opaque", "provider": "openai", "data": {"type": "text", "text": "x"}}
                ],
            },
            (0, "content", 0, "content", 0, "data", "type"),
            '"format": "openai"',
        ),
    ],
)
def test_canonical_opaque_parts_holding_a_known_shape_are_refused(
    part: dict[str, Any], path: tuple[Any, ...], advice: str
) -> None:
    [(where, message)] = problems("canonical", [{"role": "user", "content": [part]}])
    assert where == path and message.endswith(advice)


@pytest.mark.parametrize("fmt", ["openai", "anthropic"])
@pytest.mark.parametrize("kind", ["future_block", "web_thing", "x"])
def test_types_no_format_knows_stay_opaque(kind: str, fmt: Format) -> None:
    part = {"type": kind, "payload": [1, 2]}
    [message] = parse_messages(fmt, [{"role": "user", "content": [part]}])
    assert message.content == (OpaquePart(provider=fmt, data=part),)  # type: ignore[arg-type]
    canonical = {"type": "opaque", "provider": fmt, "data": part}
    [same] = parse_messages("canonical", [{"role": "user", "content": [canonical]}])
    assert same.content == message.content


def test_no_type_is_known_to_both_providers_except_text() -> None:
    assert not (ANTHROPIC_BLOCKS & OPENAI_PARTS)
    assert "text" not in ANTHROPIC_BLOCKS | OPENAI_PARTS
