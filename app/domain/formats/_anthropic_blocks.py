"""Anthropic Messages content blocks, to and from canonical parts.

Hints kept under the part's ``metadata["anthropic"]``: ``extra`` (block fields we do not model:
``cache_control``, ``citations``, a non-boolean ``is_error``, a non-string ``signature``, unknown
keys), ``source_extra`` (fields of an image ``source`` we do not model) and, on tool results,
``content: "absent"`` when the block had no ``content``.

Null fields are not kept, at any depth but inside a tool ``input``: the SDKs dump a response
block with every field it left out as null (``citations: null``, ``caller: null``...) and the API
reads them as absent, so a block a client resends reads the same as the reply ctxc stored.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Final

from app.domain.errors import FormatError, Path
from app.domain.formats._common import (
    add_extra,
    clone,
    expect_object,
    expect_str,
    extra_fields,
    part_metadata,
    without_nulls,
)
from app.domain.formats._foreign import foreign_in_anthropic, part_message
from app.domain.formats._gemini_parts import is_own_thought
from app.domain.messages import (
    ImagePart,
    JSONObject,
    OpaquePart,
    Part,
    ReasoningPart,
    ResultItem,
    TextPart,
    ToolCallPart,
    ToolResultPart,
    provider_meta,
)

PROVIDER = "anthropic"
RAW_INPUT_KEY = "_raw"

Reader = Callable[[JSONObject, Path], Part]


def read_block(raw: Any, path: Path, readers: Mapping[str, Reader] | None = None) -> Part:
    """One content block; a type without a reader is kept opaque, another format's part is
    refused."""
    block = without_nulls(expect_object(raw, path, "a content block object"))
    kind = block.get("type")
    if not isinstance(kind, str):
        raise FormatError((*path, "type"), "a content block needs a string type")
    shape = foreign_in_anthropic(kind, block)
    if shape is not None:
        raise FormatError((*path, "type"), part_message(kind, shape, "anthropic"))
    reader = (BLOCK_READERS if readers is None else readers).get(kind)
    if reader is None:
        return OpaquePart(provider=PROVIDER, data=clone(block))
    return reader(block, path)


def _read_text(block: JSONObject, path: Path) -> Part:
    text = expect_str(block, "text", path)
    return TextPart(text=text, metadata=_meta(block, ("type", "text")))


def _read_image(block: JSONObject, path: Path) -> Part:
    source = expect_object(block.get("source"), (*path, "source"), "a source object")
    kind = source.get("type")
    data, media_type, url = source.get("data"), source.get("media_type"), source.get("url")
    if kind == "base64" and isinstance(data, str) and isinstance(media_type, str) and media_type:
        meta = _meta(block, ("type", "source"), source, ("type", "data", "media_type"))
        return ImagePart(data=data, media_type=media_type, metadata=meta)
    if kind == "url" and isinstance(url, str):
        meta = _meta(block, ("type", "source"), source, ("type", "url"))
        return ImagePart(url=url, metadata=meta)
    # Files and future source kinds are valid Anthropic input we do not model.
    return OpaquePart(provider=PROVIDER, data=clone(block))


def _read_tool_use(block: JSONObject, path: Path) -> Part:
    call_id = expect_str(block, "id", path)
    name = expect_str(block, "name", path)
    arguments = expect_object(block.get("input"), (*path, "input"), "input to be an object")
    meta = _meta(block, ("type", "id", "name", "input"))
    return ToolCallPart(id=call_id, name=name, arguments=clone(arguments), metadata=meta)


def _read_tool_result(block: JSONObject, path: Path) -> Part:
    call_id = expect_str(block, "tool_use_id", path)
    content = block.get("content", "")
    if isinstance(content, list):
        content = tuple(
            _read_result_item(item, (*path, "content", i)) for i, item in enumerate(content)
        )
    elif not isinstance(content, str):
        raise FormatError((*path, "content"), "content must be a string or a list of blocks")
    is_error = block.get("is_error")
    is_error = is_error if isinstance(is_error, bool) else None
    known = ("type", "tool_use_id", "content") + (("is_error",) if is_error is not None else ())
    meta = part_metadata(
        PROVIDER,
        content=None if "content" in block else "absent",
        extra=extra_fields(block, known),
    )
    return ToolResultPart(call_id=call_id, content=content, is_error=is_error, metadata=meta)


def _read_result_item(raw: Any, path: Path) -> ResultItem:
    item = read_block(raw, path, RESULT_READERS)
    assert isinstance(item, TextPart | ImagePart | OpaquePart)  # only those readers are given
    return item


def _read_thinking(block: JSONObject, path: Path) -> Part:
    text = expect_str(block, "thinking", path)
    signature = block.get("signature")
    signature = signature if isinstance(signature, str) else None
    known = ("type", "thinking") + (("signature",) if signature is not None else ())
    return ReasoningPart(text=text, signature=signature, metadata=_meta(block, known))


def _read_redacted(block: JSONObject, path: Path) -> Part:
    data = expect_str(block, "data", path)
    return ReasoningPart(redacted_data=data, metadata=_meta(block, ("type", "data")))


def _meta(
    block: JSONObject,
    known: tuple[str, ...],
    source: JSONObject | None = None,
    source_known: tuple[str, ...] = (),
) -> JSONObject:
    source_extra = extra_fields(source, source_known) if source is not None else None
    return part_metadata(PROVIDER, extra=extra_fields(block, known), source_extra=source_extra)


BLOCK_READERS: Final[Mapping[str, Reader]] = {
    "text": _read_text,
    "image": _read_image,
    "tool_use": _read_tool_use,
    "tool_result": _read_tool_result,
    "thinking": _read_thinking,
    "redacted_thinking": _read_redacted,
}
RESULT_READERS: Final[Mapping[str, Reader]] = {"text": _read_text, "image": _read_image}
SYSTEM_READERS: Final[Mapping[str, Reader]] = {"text": _read_text}


def write_block(part: Part) -> JSONObject | None:
    """The Anthropic block for ``part`` (None for another provider's opaque block, for a
    Gemini thought or for reasoning from OpenAI Responses: a signature only its own provider
    can verify)."""
    hint = provider_meta(part.metadata, PROVIDER)
    out: JSONObject
    if isinstance(part, OpaquePart):
        return clone(part.data) if part.provider == PROVIDER else None
    if isinstance(part, ReasoningPart) and (
        is_own_thought(part) or "item" in provider_meta(part.metadata, "responses")
    ):
        return None
    if isinstance(part, TextPart):
        out = {"type": "text", "text": part.text}
    elif isinstance(part, ImagePart):
        out = {"type": "image", "source": add_extra(_source(part), hint.get("source_extra"))}
    elif isinstance(part, ToolCallPart):
        out = {"type": "tool_use", "id": part.id, "name": part.name, "input": tool_input(part)}
    elif isinstance(part, ToolResultPart):
        out = _write_result(part, hint)
    else:
        out = _write_reasoning(part)
    return add_extra(out, hint.get("extra"))


def tool_input(part: ToolCallPart) -> JSONObject:
    """The tool_use ``input``: the arguments object, or ``{"_raw": text}`` for raw arguments."""
    if isinstance(part.arguments, dict):
        return clone(part.arguments)
    return {RAW_INPUT_KEY: part.arguments}


def _source(part: ImagePart) -> JSONObject:
    if part.data is not None:
        return {"type": "base64", "media_type": part.media_type, "data": part.data}
    return {"type": "url", "url": part.url}


def _write_result(part: ToolResultPart, hint: JSONObject) -> JSONObject:
    out: JSONObject = {"type": "tool_result", "tool_use_id": part.call_id}
    if isinstance(part.content, tuple):
        blocks = (write_block(item) for item in part.content)
        out["content"] = [block for block in blocks if block is not None]
    elif part.content or hint.get("content") != "absent":
        out["content"] = part.content
    if part.is_error is not None:
        out["is_error"] = part.is_error
    return out


def _write_reasoning(part: ReasoningPart) -> JSONObject:
    if part.redacted_data is not None:
        return {"type": "redacted_thinking", "data": part.redacted_data}
    out: JSONObject = {"type": "thinking", "thinking": part.text or ""}
    if part.signature is not None:
        out["signature"] = part.signature
    return out
