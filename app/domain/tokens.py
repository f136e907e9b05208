"""Token counting in the chat format.

A message costs ``TOKENS_PER_MESSAGE`` plus its role, plus its content parts, plus
``TOKENS_PER_NAME`` and the name when it has one (OpenAI's published chat-format rule); a request
adds ``REPLY_PRIMING`` once. Text is counted exactly with the encoding; images have a fixed cost.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Protocol

from app.domain.formats._openai_parts import arguments_text
from app.domain.messages import (
    ImagePart,
    Message,
    OpaquePart,
    Part,
    ReasoningPart,
    ResultItem,
    TextPart,
    ToolCallPart,
    ToolResultPart,
)

ENCODINGS: tuple[str, ...] = ("o200k_base", "cl100k_base")
TOKENS_PER_MESSAGE = 3
TOKENS_PER_NAME = 1
REPLY_PRIMING = 3
TOOL_CALL_OVERHEAD = 3
IMAGE_TOKENS_LOW = 85
IMAGE_TOKENS = 765  # a 1024x1024 image at high detail: 85 + 4 tiles x 170


class Encoder(Protocol):
    """Counts the tokens of plain text (special-token strings count as text)."""

    name: str

    def count(self, text: str) -> int: ...


def _count_item(item: ResultItem | Part, enc: Encoder) -> int:
    match item:
        case TextPart(text=text):
            return enc.count(text)
        case ImagePart(detail=detail):
            return IMAGE_TOKENS_LOW if detail == "low" else IMAGE_TOKENS
        case ToolCallPart(name=name):
            # The arguments text exactly as it is sent (the recorded string when it still applies).
            return TOOL_CALL_OVERHEAD + enc.count(name) + enc.count(arguments_text(item))
        case ToolResultPart(content=content):
            if isinstance(content, str):
                return enc.count(content)
            return sum(_count_item(i, enc) for i in content)
        case ReasoningPart(text=text, redacted_data=data):
            return enc.count(text or "") + enc.count(data or "")
        case OpaquePart(data=data):
            return enc.count(json.dumps(data, ensure_ascii=False))
    raise TypeError(f"unexpected part {type(item).__name__}")


def count_message(message: Message, enc: Encoder) -> int:
    """Tokens one message costs in a request, per-message overhead included."""
    total = TOKENS_PER_MESSAGE + enc.count(message.role)
    total += sum(_count_item(part, enc) for part in message.content)
    if message.name:
        total += TOKENS_PER_NAME + enc.count(message.name)
    return total


def count_messages(messages: Iterable[Message], enc: Encoder) -> list[int]:
    """Per-message counts, in order."""
    return [count_message(m, enc) for m in messages]


def request_total(per_message: Sequence[int]) -> int:
    """Tokens of a whole request: its messages plus the reply priming."""
    return sum(per_message) + REPLY_PRIMING


class TokenCounter:
    """Counts messages in every known encoding at once (what the store keeps per message)."""

    def __init__(self, encoders: Mapping[str, Encoder]) -> None:
        self.encoders = dict(encoders)

    def encoder(self, name: str) -> Encoder:
        return self.encoders[name]

    def count_all(self, message: Message) -> dict[str, int]:
        """The message's count in each encoding, keyed by encoding name."""
        return {name: count_message(message, enc) for name, enc in self.encoders.items()}
