"""Gemini ``generateContent`` requests (``systemInstruction`` + ``contents``), to and from
canonical messages.

The system instruction becomes one canonical system message first; then each content is one
canonical message (``model`` is the assistant; a ``user`` content holding only function
responses becomes role ``tool``; every canonical ``tool`` message goes back as a user content).
What the canonical model does not hold is kept under ``metadata["gemini"]`` so that
``to_gemini(from_gemini(c, s)) == (s, c)`` (without the caller's ``metadata`` keys).
Message-level hints: ``extra`` (every other content field, verbatim) and, on the system
message, ``content: "string"`` when the system instruction was given as a plain string.

Every canonical system message (those of the conversation too: Anthropic's mid-conversation
system messages, OpenAI system or developer messages) joins ``systemInstruction``, in order:
Gemini has no system turn.

Part-level hints are described in ``_gemini_parts``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

from app.domain.errors import FormatError, Path
from app.domain.formats._common import (
    add_extra,
    caller_metadata,
    expect_object,
    extra_fields,
    hints,
    string_system,
)
from app.domain.formats._gemini_parts import PROVIDER, TurnIds, read_part, write_part
from app.domain.messages import (
    JSONObject,
    Message,
    Part,
    Role,
    TextPart,
    ToolResultPart,
    provider_meta,
    with_provider_meta,
)

# The system instruction: a Content object, or the plain string it was given as.
SystemInstruction = JSONObject | str | None
_OTHER_ROLES: Final = frozenset({"assistant", "system", "tool", "developer", "function"})


def from_gemini(contents: Any, system_instruction: Any = None) -> list[Message]:
    """Canonical messages for Gemini ``contents`` and ``systemInstruction``, system first."""
    if not isinstance(contents, list):
        raise FormatError((), "contents must be a list")
    head = [] if system_instruction is None else [_read_system(system_instruction)]
    return head + [_read_content(raw, (index,)) for index, raw in enumerate(contents)]


def _read_system(value: Any) -> Message:
    """The system instruction; paths of its errors start with ``"system"``."""
    if isinstance(value, str):
        return string_system(value, PROVIDER)
    found = expect_object(value, ("system",), "a Content object {parts: [{text}]} or a string")
    raw_parts = found.get("parts")
    if not isinstance(raw_parts, list):
        raise FormatError(("system", "parts"), "parts must be a list of text parts")
    parts = []
    for j, raw in enumerate(raw_parts):
        part = read_part(raw, ("system", "parts", j), TurnIds())
        if not isinstance(part, TextPart):
            raise FormatError(("system", "parts", j), "the system instruction holds text only")
        parts.append(part)
    hint = hints(extra=extra_fields(found, ("parts",)))
    return Message(
        role="system", content=tuple(parts), metadata=with_provider_meta({}, PROVIDER, hint)
    )


def _read_content(raw: Any, path: Path) -> Message:
    content = expect_object(raw, path, "a content object {role, parts}")
    role = content.get("role")
    if role not in ("user", "model"):
        why = ""
        if isinstance(role, str) and role in _OTHER_ROLES:
            why = '; this looks like OpenAI or Anthropic: send "format": "openai" or "anthropic"'
            if role == "system":
                why += ", or give the system instruction as `system`"
        raise FormatError((*path, "role"), f"role must be 'user' or 'model'{why}")
    raw_parts = content.get("parts")
    if not isinstance(raw_parts, list):
        raise FormatError((*path, "parts"), "parts must be a list of parts")
    ids = TurnIds()
    parts = tuple(read_part(p, (*path, "parts", j), ids) for j, p in enumerate(raw_parts))
    hint = hints(extra=extra_fields(content, ("role", "parts", "metadata")))
    metadata = with_provider_meta(caller_metadata(content, path), PROVIDER, hint)
    return Message(role=_canonical_role(role, parts), content=parts, metadata=metadata)


def _canonical_role(role: str, parts: tuple[Part, ...]) -> Role:
    if role == "model":
        return "assistant"
    only_results = bool(parts) and all(isinstance(part, ToolResultPart) for part in parts)
    return "tool" if only_results else "user"


def to_gemini(messages: Sequence[Message]) -> tuple[SystemInstruction, list[JSONObject]]:
    """Gemini ``(systemInstruction, contents)`` for canonical messages, one content per
    non-system message. Contents are neither merged nor reordered: provider validity is the
    compile step's job. A response from another format takes the name of the call it answers.
    """
    names: dict[str, str] = {}
    contents = []
    for message in messages:
        if message.role == "system":
            continue
        names.update((call.id, call.name) for call in message.tool_calls)
        contents.append(gemini_content(message, names))
    return system_instruction([m for m in messages if m.role == "system"]), contents


def system_instruction(systems: Sequence[Message]) -> SystemInstruction:
    """The system instruction for the system messages: their text parts (None when none)."""
    if not systems:
        return None
    first = provider_meta(systems[0].metadata, PROVIDER)
    texts = [p for m in systems for p in m.content if isinstance(p, TextPart)]
    if len(systems) == 1 and first.get("content") == "string" and len(texts) == 1:
        return texts[0].text
    if not texts:
        return None
    parts = [write_part(p) for p in texts]
    return add_extra({"parts": parts}, first.get("extra"))


def gemini_content(message: Message, names: dict[str, str] | None = None) -> JSONObject:
    """The Gemini content of one non-system canonical message (tool messages are user
    contents); parts Gemini does not take are left out."""
    hint = provider_meta(message.metadata, PROVIDER)
    written = (write_part(part, names) for part in message.content)
    role = "model" if message.role == "assistant" else "user"
    return add_extra(
        {"role": role, "parts": [p for p in written if p is not None]}, hint.get("extra")
    )
