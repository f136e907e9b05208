"""Anthropic Messages (``system`` + ``messages``), to and from canonical messages.

The system prompt becomes one canonical system message first; then each turn is one canonical
message (a user turn holding only tool results becomes role ``tool``; every canonical ``tool``
message goes back as a user turn). What the canonical model does not hold is kept under
``metadata["anthropic"]`` so that ``to_anthropic(from_anthropic(m, s)) == (s, m)`` (without the
caller's ``metadata`` keys). Message-level hints:

- ``content``: ``"string"`` when the turn's content (or the system prompt) was a string;
- ``extra``: every other turn field, verbatim;
- ``place``: ``"messages"`` on a system message sent inside ``messages`` (Claude Code's
  mid-conversation system messages): it goes back there, at its place, not into ``system``.

In the other shapes such a message stays a system message at its place (OpenAI Chat: a
``system`` message; Responses: a ``system`` item, the leading ones being the ``instructions``);
Gemini has no system turn, so it joins ``systemInstruction``, in order. A system message from
another shape (no ``place`` hint) joins Anthropic's ``system`` prompt, as before.

Part-level hints are described in ``_anthropic_blocks``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from app.domain.errors import FormatError, Path
from app.domain.formats._anthropic_blocks import (
    PROVIDER,
    SYSTEM_READERS,
    read_block,
    write_block,
)
from app.domain.formats._common import (
    add_extra,
    caller_metadata,
    expect_object,
    extra_fields,
    hints,
    string_system,
)
from app.domain.formats._foreign import (
    OPENAI_MESSAGE_FIELDS,
    OPENAI_ONLY_ROLES,
    RESPONSES_ITEMS,
    advice,
)
from app.domain.messages import (
    JSONObject,
    Message,
    OpaquePart,
    Part,
    Role,
    TextPart,
    ToolResultPart,
    provider_meta,
    with_provider_meta,
)

System = str | list[JSONObject] | None


def from_anthropic(messages: Any, system: Any = None) -> list[Message]:
    """Canonical messages for Anthropic ``messages`` and ``system``, system first."""
    if not isinstance(messages, list):
        raise FormatError((), "messages must be a list")
    head = [] if system is None else [_read_system(system)]
    return head + [_read_turn(raw, (index,)) for index, raw in enumerate(messages)]


def _read_system(system: Any) -> Message:
    """The system prompt; paths of its errors start with ``"system"``."""
    if isinstance(system, str):
        return string_system(system, PROVIDER)
    if not isinstance(system, list):
        raise FormatError(("system",), "system must be a string or a list of text blocks")
    blocks = (read_block(raw, ("system", i), SYSTEM_READERS) for i, raw in enumerate(system))
    return Message(role="system", content=tuple(blocks))


def _read_turn(raw: Any, path: Path) -> Message:
    turn = expect_object(raw, path, "a message object")
    role = turn.get("role")
    if role == "system" and not any(key in turn for key in OPENAI_MESSAGE_FIELDS):
        return _read_system_turn(turn, path)
    if role not in ("user", "assistant"):
        why = ""
        if isinstance(role, str) and role in OPENAI_ONLY_ROLES:
            why = f"; a {role!r} message {advice('openai')}"
            if role == "system":
                why += ", or give the system prompt as `system`"
        elif role == "model":
            why = f"; a 'model' content {advice('gemini')}"
        elif role is None and turn.get("type") in RESPONSES_ITEMS:
            why = f"; a {turn['type']!r} item {advice('responses')}"
        raise FormatError((*path, "role"), f"role must be 'user' or 'assistant'{why}")
    for key in OPENAI_MESSAGE_FIELDS:
        if key in turn:
            raise FormatError(
                (*path, key), f"{key!r} is an OpenAI message field: this {advice('openai')}"
            )
    content = turn.get("content")
    if isinstance(content, str):
        parts: tuple[Part, ...] = (TextPart(text=content),)
    elif isinstance(content, list):
        parts = tuple(read_block(block, (*path, "content", i)) for i, block in enumerate(content))
    else:
        raise FormatError((*path, "content"), "content must be a string or a list of blocks")
    hint = hints(
        content="string" if isinstance(content, str) else None,
        extra=extra_fields(turn, ("role", "content", "metadata")),
    )
    metadata = with_provider_meta(caller_metadata(turn, path), PROVIDER, hint)
    return Message(role=_canonical_role(role, parts), content=parts, metadata=metadata)


def _read_system_turn(turn: JSONObject, path: Path) -> Message:
    """A system message inside ``messages``: text only, like the system prompt, marked so that
    it is written back at its place."""
    content = turn.get("content")
    if isinstance(content, str):
        parts: tuple[Part, ...] = (TextPart(text=content),)
    elif isinstance(content, list):
        parts = tuple(
            read_block(block, (*path, "content", i), SYSTEM_READERS)
            for i, block in enumerate(content)
        )
    else:
        raise FormatError((*path, "content"), "content must be a string or a list of text blocks")
    hint = hints(
        content="string" if isinstance(content, str) else None,
        extra=extra_fields(turn, ("role", "content", "metadata")),
        place="messages",
    )
    metadata = with_provider_meta(caller_metadata(turn, path), PROVIDER, hint)
    return Message(role="system", content=parts, metadata=metadata)


def in_messages(message: Message) -> bool:
    """Whether ``message`` is a system message that was sent inside Anthropic ``messages``."""
    return (
        message.role == "system"
        and provider_meta(message.metadata, PROVIDER).get("place") == "messages"
    )


def _canonical_role(role: str, parts: tuple[Part, ...]) -> Role:
    if role == "assistant":
        return "assistant"
    only_results = bool(parts) and all(isinstance(part, ToolResultPart) for part in parts)
    return "tool" if only_results else "user"


def to_anthropic(messages: Sequence[Message]) -> tuple[System, list[JSONObject]]:
    """Anthropic ``(system, messages)`` for canonical messages, one turn per non-system message
    and per system message sent inside ``messages`` (at its place); the other system messages
    make the system prompt.

    Turns are neither merged nor reordered: provider validity is the compile step's job.
    """
    systems = [m for m in messages if m.role == "system" and not in_messages(m)]
    turns = [anthropic_message(m) for m in messages if m.role != "system" or in_messages(m)]
    return _system_value(systems), turns


def _system_value(systems: list[Message]) -> System:
    """The system prompt: the original string when it was one, else all system parts as blocks."""
    if not systems:
        return None
    if len(systems) == 1 and _is_string_form(systems[0]):
        return _joined_text(systems[0])
    blocks = (_system_block(part) for message in systems for part in message.content)
    return [block for block in blocks if block is not None]


def _system_block(part: Part) -> JSONObject | None:
    # Anthropic's system prompt holds text blocks only; images and tool parts cannot go there.
    if isinstance(part, TextPart) or (isinstance(part, OpaquePart) and part.provider == PROVIDER):
        return write_block(part)
    return None


def anthropic_message(message: Message) -> JSONObject:
    """The Anthropic turn for one non-system canonical message (tool messages are user turns).

    Tool calls whose arguments are a raw string (not a JSON object) become
    ``input: {"_raw": "<the string>"}``; reasoning and Anthropic blocks are kept, OpenAI-only
    blocks and hints are dropped.
    """
    if message.role == "system" and not in_messages(message):
        raise ValueError("system messages go to the system prompt; use to_anthropic")
    hint = provider_meta(message.metadata, PROVIDER)
    content: str | list[JSONObject]
    if _is_string_form(message):
        content = _joined_text(message)
    elif message.role == "system":
        blocks = (_system_block(part) for part in message.content)
        content = [block for block in blocks if block is not None]
    else:
        blocks = (write_block(part) for part in message.content)
        content = [block for block in blocks if block is not None]
    role = message.role if message.role in ("assistant", "system") else "user"
    return add_extra({"role": role, "content": content}, hint.get("extra"))


def _is_string_form(message: Message) -> bool:
    string_form = provider_meta(message.metadata, PROVIDER).get("content") == "string"
    return string_form and all(isinstance(part, TextPart) for part in message.content)


def _joined_text(message: Message) -> str:
    return "\n".join(part.text for part in message.content if isinstance(part, TextPart))
