"""Parse any accepted input shape into canonical messages."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import ValidationError

from app.domain.errors import FormatError, InvalidInput
from app.domain.formats.anthropic import from_anthropic
from app.domain.formats.openai import from_openai
from app.domain.messages import Message

Format = Literal["openai", "anthropic", "canonical"]
FORMATS: tuple[Format, ...] = ("openai", "anthropic", "canonical")


def canonical_messages(raw: Any) -> list[Message]:
    """Validate canonical message documents, reporting every bad field at once."""
    if not isinstance(raw, list):
        raise FormatError((), "expected a list of messages")
    messages, problems = [], []
    for i, item in enumerate(raw):
        try:
            messages.append(Message.model_validate(item))
        except ValidationError as exc:
            problems += [((i, *e["loc"]), e["msg"]) for e in exc.errors()]
    if problems:
        raise InvalidInput(problems)
    return messages


def parse_messages(fmt: Format, raw: Any, system: Any = None) -> list[Message]:
    """Canonical messages from a document in ``fmt`` (``system`` is Anthropic's top-level one)."""
    if fmt == "openai":
        return from_openai(raw)
    if fmt == "anthropic":
        return from_anthropic(raw, system)
    return canonical_messages(raw)
