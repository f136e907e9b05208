"""OpenAI Chat Completions request messages, to and from canonical messages.

One OpenAI message is one canonical message. What the canonical model does not hold is kept under
``metadata["openai"]`` so that ``to_openai(from_openai(x)) == x`` (without the caller's
``metadata`` keys, which are not part of the provider document). Message-level hints:

- ``role``: ``"developer"`` or ``"function"`` (stored as canonical ``system`` / ``tool``);
- ``content``: ``"parts"``, ``"null"`` or ``"absent"``: the form of ``content`` when it was not a
  string;
- ``extra``: every other field, verbatim (a set ``refusal``, ``audio``, ``function_call`` or
  ``annotations``, a non-string ``name``, unknown keys...).

Null fields but ``content`` (whose null is kept as a form hint), and an empty ``annotations``
or ``tool_calls``, are not kept, nor are null fields of tool calls: the SDKs dump a response
message with every field the API left out (``ChatCompletionMessage``'s ``refusal: null,
annotations: [], audio: null``, the stream helper's ``parsed: null``...) and the API reads them
as absent, so a message a client resends reads the same as the reply ctxc stored. The round trip
is exact up to those. A set ``refusal`` is kept verbatim: it goes back to OpenAI as the client
sent it and carries no text for another provider.

Part-level hints are described in ``_openai_parts``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

from app.domain.errors import FormatError, Path
from app.domain.formats._common import (
    add_extra,
    caller_metadata,
    expect_object,
    expect_str,
    extra_fields,
    hints,
    set_fields,
)
from app.domain.formats._foreign import RESPONSES_ITEMS, advice
from app.domain.formats._openai_parts import (
    PROVIDER,
    ContentItem,
    read_part,
    read_tool_call,
    write_part,
    write_tool_call,
)
from app.domain.messages import (
    ImagePart,
    JSONObject,
    Message,
    OpaquePart,
    Part,
    Role,
    TextPart,
    ToolCallPart,
    ToolResultPart,
    provider_meta,
    result_text,
    with_provider_meta,
)

_ROLES: Final[dict[str, Role]] = {
    "system": "system",
    "developer": "system",
    "user": "user",
    "assistant": "assistant",
    "tool": "tool",
    "function": "tool",
}
_ABSENT: Final = object()
_UNSET_WHEN_EMPTY: Final = ("annotations", "tool_calls")

Content = str | tuple[ContentItem, ...]


def from_openai(messages: Any) -> list[Message]:
    """Canonical messages for a list of OpenAI Chat Completions messages, one for one."""
    if not isinstance(messages, list):
        raise FormatError((), "messages must be a list")
    return [_read_message(raw, (index,)) for index, raw in enumerate(messages)]


def _read_message(raw: Any, path: Path) -> Message:
    message = set_fields(expect_object(raw, path, "a message object"), keep=("content",))
    for key in _UNSET_WHEN_EMPTY:
        if message.get(key) == []:
            del message[key]
    role = message.get("role")
    if not isinstance(role, str) or role not in _ROLES:
        why = f"role must be one of {', '.join(_ROLES)}"
        if role == "model":
            why += f"; a 'model' content {advice('gemini')}"
        elif role is None and message.get("type") in RESPONSES_ITEMS:
            why += f"; a {message['type']!r} item {advice('responses')}"
        raise FormatError((*path, "role"), why)
    form, content = _read_content(message, path)
    known = {"role", "content", "metadata", "name"}
    if _ROLES[role] == "tool":
        parts: tuple[Part, ...] = (_read_result(message, role, content, path, known),)
    else:
        parts = _content_parts(form, content) + _read_tool_calls(message, role, path, known)
    name = message.get("name")
    if not isinstance(name, str):
        name = None
        known.discard("name")
    hint = hints(
        role=role if role != _ROLES[role] else None,
        content=form,
        extra=extra_fields(message, known),
    )
    metadata = with_provider_meta(caller_metadata(message, path), PROVIDER, hint)
    return Message(role=_ROLES[role], content=parts, name=name, metadata=metadata)


def _read_content(message: JSONObject, path: Path) -> tuple[str | None, Content]:
    """The content's form hint (None for a string) and its value ('' for null or absent)."""
    if "content" not in message:
        return "absent", ""
    content = message["content"]
    if content is None:
        return "null", ""
    if isinstance(content, str):
        return None, content
    if isinstance(content, list):
        items = (read_part(item, (*path, "content", i)) for i, item in enumerate(content))
        return "parts", tuple(items)
    raise FormatError((*path, "content"), "content must be a string, a list of parts or null")


def _content_parts(form: str | None, content: Content) -> tuple[Part, ...]:
    if isinstance(content, tuple):
        return content
    return (TextPart(text=content),) if form is None else ()


def _read_result(
    message: JSONObject, role: str, content: Content, path: Path, known: set[str]
) -> ToolResultPart:
    if role == "tool":
        call_id = expect_str(message, "tool_call_id", path)
        known.add("tool_call_id")
    else:
        # Legacy function results carry no call id; the function name is the best handle.
        name = message.get("name")
        call_id = name if isinstance(name, str) else ""
    return ToolResultPart(call_id=call_id, content=content)


def _read_tool_calls(
    message: JSONObject, role: str, path: Path, known: set[str]
) -> tuple[ToolCallPart, ...]:
    calls = message.get("tool_calls")
    if role != "assistant" or calls is None:
        return ()
    if not isinstance(calls, list):
        raise FormatError((*path, "tool_calls"), "tool_calls must be a list")
    known.add("tool_calls")
    return tuple(read_tool_call(call, (*path, "tool_calls", i)) for i, call in enumerate(calls))


def to_openai(messages: Sequence[Message]) -> list[JSONObject]:
    """OpenAI Chat Completions messages for canonical messages (the inverse of from_openai)."""
    return [out for message in messages for out in openai_messages(message)]


def openai_messages(message: Message) -> list[JSONObject]:
    """The OpenAI messages for one canonical message: one, or one per tool result plus the rest."""
    results = message.tool_results
    if message.role == "tool" and len(results) == 1 == len(message.content):
        return [_tool_message(message, results[0])]
    if message.role == "tool" or (message.role == "user" and results):
        return _split_results(message)
    return [_plain_message(message)]


def _plain_message(message: Message) -> JSONObject:
    hint = provider_meta(message.metadata, PROVIDER)
    role: str = message.role
    if message.role == "system" and hint.get("role") == "developer":
        role = "developer"
    out: JSONObject = {"role": role}
    content = _content_value(_visible(message.content), hint.get("content"), message.role)
    if content is not _ABSENT:
        out["content"] = content
    if message.name is not None:
        out["name"] = message.name
    if message.role == "assistant" and message.tool_calls:
        out["tool_calls"] = [write_tool_call(call) for call in message.tool_calls]
    return add_extra(out, hint.get("extra"))


def _visible(parts: Sequence[Part]) -> list[ContentItem]:
    """The parts OpenAI can show in ``content`` (reasoning and foreign blocks are dropped)."""
    return [
        part
        for part in parts
        if isinstance(part, TextPart | ImagePart)
        or (isinstance(part, OpaquePart) and part.provider == PROVIDER)
    ]


def _content_value(items: list[ContentItem], form: Any, role: str) -> Any:
    if not items and form == "null":
        return None
    if not items and form == "absent":
        return _ABSENT
    if form == "parts" or not all(isinstance(item, TextPart) for item in items):
        return [out for item in items if (out := write_part(item)) is not None]
    if not items and role == "assistant":
        return None
    return "\n".join(item.text for item in items if isinstance(item, TextPart))


def _tool_message(message: Message, result: ToolResultPart) -> JSONObject:
    hint = provider_meta(message.metadata, PROVIDER)
    legacy = hint.get("role") == "function"
    out: JSONObject = {"role": "function" if legacy else "tool"}
    content = _result_value(result, hint.get("content"))
    if content is not _ABSENT:
        out["content"] = content
    if not legacy:
        out["tool_call_id"] = result.call_id
    if message.name is not None:
        out["name"] = message.name
    return add_extra(out, hint.get("extra"))


def _result_value(result: ToolResultPart, form: Any) -> Any:
    if isinstance(result.content, str):
        if result.content == "" and form in ("null", "absent"):
            return None if form == "null" else _ABSENT
        return result.content
    if form == "parts":
        return [out for item in result.content if (out := write_part(item)) is not None]
    return result_text(result)


def _split_results(message: Message) -> list[JSONObject]:
    """One tool message per result, then a user message with what else the turn held."""
    out: list[JSONObject] = [
        {"role": "tool", "tool_call_id": result.call_id, "content": _result_value(result, None)}
        for result in message.tool_results
    ]
    rest = _visible(message.content)
    if rest:
        user: JSONObject = {"role": "user", "content": _content_value(rest, None, "user")}
        if message.name is not None:
            user["name"] = message.name
        out.append(user)
    return out
