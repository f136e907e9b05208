"""Parse any accepted input shape into canonical messages, reporting every problem at once."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final, Literal

from pydantic import ValidationError

from app.domain.errors import FormatError, InvalidInput
from app.domain.formats._opaque import opaque_problems
from app.domain.formats.anthropic import from_anthropic
from app.domain.formats.gemini import from_gemini
from app.domain.formats.openai import from_openai
from app.domain.formats.responses import from_responses
from app.domain.formats.targets import Target
from app.domain.limits import Problem, message_problems
from app.domain.messages import Message

Format = Literal[Target, "canonical"]


def canonical_messages(raw: Any) -> list[Message]:
    """Validate canonical message documents."""
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


Converter = Callable[[list[Any], Any], list[Message]]
CONVERTERS: dict[str, Converter] = {
    "openai": lambda raw, _system: from_openai(raw),
    "anthropic": from_anthropic,
    "gemini": from_gemini,
    "responses": from_responses,
}
# Formats whose second argument (Anthropic's ``system``, Gemini's ``systemInstruction``,
# Responses' ``instructions``) becomes the first message.
_HEADED: Final = ("anthropic", "gemini", "responses")


def _provider_messages(fmt: Format, raw: Any, system: Any) -> list[Message]:
    convert = CONVERTERS[fmt]
    try:
        return convert(raw, system)
    except FormatError as first:
        if not isinstance(raw, list) or first.path[:1] in (("system",), ("instructions",)):
            raise
        # The converters stop at the first problem: convert each message alone to find them all.
        problems: list[Problem] = []
        for i, item in enumerate(raw):
            try:
                convert([item], None)
            except FormatError as exc:
                problems.append(((i, *exc.path[1:]), exc.message))
        raise InvalidInput(problems or [(first.path, first.message)]) from None


def parse_messages(fmt: Format, raw: Any, system: Any = None) -> list[Message]:
    """Canonical messages from a document in ``fmt`` (``system`` is Anthropic's top-level one,
    or Gemini's ``systemInstruction``, or Responses' ``instructions``).

    Raises FormatError or InvalidInput with paths relative to the message list (or ``system`` /
    ``instructions``).
    """
    if fmt == "canonical":
        messages = canonical_messages(raw)
        if problems := opaque_problems(messages):
            raise InvalidInput(problems)
    else:
        messages = _provider_messages(fmt, raw, system)
    # The system prompt is the first message; report paths against the posted list.
    offset = 1 if fmt in _HEADED and messages and system is not None else 0
    problems = [
        ((p[0] - offset, *p[1:]) if isinstance(p[0], int) else p, m)
        for p, m in message_problems(messages)
    ]
    if problems:
        raise InvalidInput(problems)
    return messages
