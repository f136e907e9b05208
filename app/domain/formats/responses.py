"""OpenAI Responses input items (``instructions`` + ``input``), to and from canonical messages.

``instructions`` becomes a canonical system message first. Then items group into messages:

- a ``user``, ``system`` or ``developer`` message item is one message (``developer`` as
  canonical ``system``);
- what the model produced in one turn is one assistant message: its ``reasoning`` items, at most
  one assistant message item, its ``function_call`` items and the other calls it made
  (``web_search_call``, ``custom_tool_call``, ``mcp_call``... kept opaque), in order; a second
  assistant message item starts the next assistant message;
- a ``function_call_output`` is one ``tool`` message;
- every other item (``*_output`` of opaque calls, ``item_reference``, types we do not know) is
  one user message holding it opaque.

Writing goes back item for item, so ``to_responses(from_responses(i, s)) == (s, i)`` (without
the caller's ``metadata`` keys and null fields). The system prompt (``instructions``) is the
system messages that open the list and did not come from an input item; later ones, and
system messages read from items, are written as items where they are. Message-level hints under
``metadata["responses"]``: ``role`` (``"developer"``), ``untyped`` (the item had no ``type``),
``string`` (its content was a string), ``empty`` (an assistant message item with no content)
and ``extra`` (its other fields: ``id``, ``status``...). Part-level hints are described in
``_responses_parts``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Final

from app.domain.errors import FormatError, Path
from app.domain.formats._common import (
    add_extra,
    caller_metadata,
    clone,
    expect_object,
    expect_str,
    extra_fields,
    hints,
    set_fields,
)
from app.domain.formats._foreign import OPENAI_MESSAGE_FIELDS, advice
from app.domain.formats._responses_kinds import PROVIDER, is_item, produced_by_model
from app.domain.formats._responses_parts import (
    ContentItem,
    read_call,
    read_content,
    read_output,
    read_reasoning,
    write_call,
    write_content,
    write_output,
    write_reasoning,
)
from app.domain.messages import (
    ImagePart,
    JSONObject,
    Message,
    OpaquePart,
    Part,
    ReasoningPart,
    Role,
    TextPart,
    ToolCallPart,
    ToolResultPart,
    provider_meta,
    with_provider_meta,
)

ROLES: Final[dict[str, Role]] = {
    "user": "user",
    "assistant": "assistant",
    "system": "system",
    "developer": "system",
}


def from_responses(items: Any, instructions: Any = None) -> list[Message]:
    """Canonical messages for a Responses ``input`` list and its ``instructions``, system first."""
    if not isinstance(items, list):
        raise FormatError((), "input must be a list of items")
    head = [] if instructions is None else [_read_instructions(instructions)]
    return head + group_turns([read_item(raw, (index,)) for index, raw in enumerate(items)])


def _read_instructions(instructions: Any) -> Message:
    if not isinstance(instructions, str):
        raise FormatError(("instructions",), "instructions must be a string")
    return Message(role="system", content=(TextPart(text=instructions),))


def read_item(raw: Any, path: Path) -> Message:
    """One input item as a message of its own (``group_turns`` joins a turn's items)."""
    item = expect_object(raw, path, "an input item object")
    kind = item.get("type")
    if kind is None or kind == "message":
        return _read_message(set_fields(item), path)
    if not isinstance(kind, str) or not kind:
        raise FormatError((*path, "type"), "an item's type must be a non-empty string")
    if kind == "function_call":
        return Message(role="assistant", content=(read_call(set_fields(item), path),))
    if kind == "reasoning":  # kept verbatim: the API refuses one without these
        expect_str(item, "id", path)
        if not isinstance(item.get("summary"), list):
            missing = "missing" if "summary" not in item else "not a list"
            raise FormatError((*path, "summary"), f"'summary' is {missing}; expected a list")
        return Message(role="assistant", content=(read_reasoning(item),))
    if kind == "function_call_output":
        item = set_fields(item)
        metadata = caller_metadata(item, path)
        item.pop("metadata", None)
        return Message(role="tool", content=(read_output(item, path),), metadata=metadata)
    opaque = OpaquePart(provider=PROVIDER, data=clone(item))
    return Message(role="assistant" if produced_by_model(kind) else "user", content=(opaque,))


def _read_message(item: JSONObject, path: Path) -> Message:
    role = item.get("role")
    if not isinstance(role, str) or role not in ROLES:
        raise FormatError((*path, "role"), _role_problem(role, item))
    for key in OPENAI_MESSAGE_FIELDS:
        if key in item:
            why = f"{key!r} is a Chat Completions message field: this {advice('openai')}"
            raise FormatError((*path, key), why)
    content = item.get("content")
    if isinstance(content, str):
        parts: tuple[Part, ...] = (TextPart(text=content),)
    elif isinstance(content, list):
        where = (*path, "content")
        parts = tuple(read_content(x, (*where, i), role) for i, x in enumerate(content))
    else:
        raise FormatError((*path, "content"), "content must be a string or a list of parts")
    hint = hints(
        role=role if role == "developer" else None,
        item=ROLES[role] == "system",  # not the instructions
        untyped="type" not in item,
        string=isinstance(content, str),
        empty=role == "assistant" and not parts,
        extra=extra_fields(item, ("type", "role", "content", "metadata")),
    )
    metadata = with_provider_meta(caller_metadata(item, path), PROVIDER, hint)
    return Message(role=ROLES[role], content=parts, metadata=metadata)


def group_turns(messages: Sequence[Message]) -> list[Message]:
    """One message per item joined into turns: consecutive model items (reasoning, calls, other
    model output) and at most one assistant message item among them become one assistant
    message; a second assistant message item, or an empty one, starts the next."""
    out: list[Message] = []
    turn: list[Message] = []  # the one-item messages of the turn being gathered
    has_message = False
    for message in messages:
        if message.role == "assistant":
            is_message = _is_message_item(message)
            empty = provider_meta(message.metadata, PROVIDER).get("empty") is True
            if is_message and turn and (has_message or empty):
                out.append(_turn(turn))
                turn, has_message = [], False
            turn.append(message)
            has_message = has_message or is_message
            continue
        if turn:
            out.append(_turn(turn))
            turn, has_message = [], False
        out.append(message)
    if turn:
        out.append(_turn(turn))
    return out


def _turn(messages: list[Message]) -> Message:
    """One assistant message of a turn's items, with its message item's metadata."""
    if len(messages) == 1:
        return messages[0]
    metadata = next((m.metadata for m in messages if _is_message_item(m)), {})
    content = tuple(part for m in messages for part in m.content)
    return Message(role="assistant", content=content, metadata=metadata)


def _is_message_item(message: Message) -> bool:
    """Whether a one-item assistant message is a message item (not a call or reasoning)."""
    hint = provider_meta(message.metadata, PROVIDER)
    return hint.get("empty") is True or any(_in_content(p) for p in message.content)


def _role_problem(role: Any, item: JSONObject) -> str:
    why = "a message item's role must be one of user, assistant, system, developer"
    if role in ("tool", "function"):
        return f"{why}; a {role!r} message {advice('openai')}"
    if role is None and "type" not in item:
        return "an input item needs a type, or a role for a message"
    return why


def to_responses(
    messages: Sequence[Message],
    items_of: Callable[[Message], Sequence[JSONObject]] | None = None,
) -> tuple[str | None, list[JSONObject]]:
    """``(instructions, input)`` for canonical messages (the inverse of ``from_responses``);
    ``items_of``: what gives a message's items (``responses_items``, or a kept copy of them).

    Items are neither merged nor reordered: provider validity is the compile step's job.
    """
    flags = instruction_flags(messages)
    instructions = [m for m, flag in zip(messages, flags, strict=True) if flag]
    items_of = items_of or responses_items
    items = [
        item
        for message, flag in zip(messages, flags, strict=True)
        if not flag
        for item in items_of(message)
    ]
    return instructions_text(instructions), items


def instruction_flags(messages: Sequence[Message]) -> list[bool]:
    """Per message, whether it goes to ``instructions``: the system messages that open the list,
    but those read from an input item."""
    flags = [False] * len(messages)
    for i, message in enumerate(messages):
        if message.role != "system":
            break
        flags[i] = not provider_meta(message.metadata, PROVIDER)
    return flags


def instructions_text(systems: Sequence[Message]) -> str | None:
    """The instructions: the text of the system messages given, joined by newlines."""
    if not systems:
        return None
    return "\n".join(p.text for m in systems for p in m.content if isinstance(p, TextPart))


def responses_items(message: Message) -> list[JSONObject]:
    """The input items of one canonical message, in the order of its parts."""
    hint = provider_meta(message.metadata, PROVIDER)
    out: list[JSONObject] = []
    if message.role == "assistant" and hint.get("empty") is True:
        out.append(_message_item(message, []))
    results = [write_output(r) for r in message.tool_results]
    group: list[ContentItem] = []
    for part in message.content:
        if _in_content(part):
            assert isinstance(part, TextPart | ImagePart | OpaquePart)
            group.append(part)
            continue
        if group:
            out.append(_message_item(message, group))
            group = []
        item = _part_item(part)
        if item is not None and not isinstance(part, ToolResultPart):
            out.append(item)
    # A user or system message item with no content is still an item.
    bare = message.role in ("user", "system") and not message.content
    if group or bare:
        out.append(_message_item(message, group))
    return results + out


def _in_content(part: Part) -> bool:
    if isinstance(part, TextPart | ImagePart):
        return True
    return isinstance(part, OpaquePart) and part.provider == PROVIDER and not is_item(part)


def _part_item(part: Part) -> JSONObject | None:
    if isinstance(part, ToolCallPart):
        return write_call(part)
    if isinstance(part, ReasoningPart):
        return write_reasoning(part)
    if isinstance(part, OpaquePart):
        return clone(part.data) if part.provider == PROVIDER else None
    return None


def _message_item(message: Message, parts: list[ContentItem]) -> JSONObject:
    hint = provider_meta(message.metadata, PROVIDER)
    role = _role(message, hint)
    content: str | list[JSONObject]
    if hint.get("string") is True and all(isinstance(p, TextPart) for p in parts):
        content = "\n".join(p.text for p in parts if isinstance(p, TextPart))
    else:
        written = (write_content(part, role) for part in parts)
        content = [item for item in written if item is not None]
    out: JSONObject = {"role": role, "content": content}
    extra = hint.get("extra")
    if hint.get("untyped") is not True:
        out = {"type": "message", **out}
    elif isinstance(extra, dict) and "type" in extra:
        # Recorded fields never make a message another kind of item.
        extra = {key: value for key, value in extra.items() if key != "type"}
    return add_extra(out, extra)


def _role(message: Message, hint: JSONObject) -> str:
    if message.role != "system":
        return "user" if message.role == "tool" else message.role
    developer = hint.get("role") == "developer" or (
        not hint and provider_meta(message.metadata, "openai").get("role") == "developer"
    )
    return "developer" if developer else "system"
