"""OpenAI Responses content parts, function calls and their outputs, and reasoning items, to and
from canonical parts.

Hints kept under the part's ``metadata["responses"]``:

- content parts: ``type`` (a text part's type when it is not its role's usual one:
  ``output_text`` for an assistant, ``input_text`` otherwise), ``extra`` (fields we do not
  model: ``annotations``, ``logprobs``...), ``content_part`` (true on an opaque part of a type
  no Responses content part has, so it is written back inside its message);
- function calls: ``arguments`` (the exact string when it is not the compact JSON dump of the
  parsed object) and ``extra`` (``id``, ``status``...); outputs: ``extra``;
- reasoning: ``item``, the whole reasoning item verbatim (its encrypted content and summaries go
  back byte for byte; the part's text is its summaries', for reading and counting).

Null fields of messages, parts, calls and outputs are not kept (the SDKs dump what the API left
out as None, and the API reads a null optional field as absent); a reasoning item is kept as is.
"""

from __future__ import annotations

import re
from typing import Any

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
from app.domain.formats._foreign import foreign_in_responses, part_message
from app.domain.formats._openai_parts import dump_arguments, image_url_of, parse_arguments
from app.domain.formats._responses_kinds import CONTENT_TYPES, PROVIDER
from app.domain.messages import (
    ImagePart,
    JSONObject,
    OpaquePart,
    ReasoningPart,
    TextPart,
    ToolCallPart,
    ToolResultPart,
    provider_meta,
)

ContentItem = TextPart | ImagePart | OpaquePart

_DATA_URL = re.compile(r"data:(?P<media>[^;,]+);base64,(?P<data>.*)", re.DOTALL)


def text_type(role: str) -> str:
    """The usual type of a text part in a message of ``role``."""
    return "output_text" if role == "assistant" else "input_text"


def read_content(raw: Any, path: Path, role: str) -> ContentItem:
    """One content part of a message of ``role`` (or of a function output, as ``user``)."""
    part = without_nulls(expect_object(raw, path, "a content part object"))
    kind = part.get("type")
    if not isinstance(kind, str):
        raise FormatError((*path, "type"), "a content part needs a string type")
    shape = foreign_in_responses(kind, part)
    if shape is not None:
        raise FormatError((*path, "type"), part_message(kind, shape, "responses"))
    if kind in ("input_text", "output_text"):
        text = expect_str(part, "text", path)
        meta = part_metadata(
            PROVIDER,
            type=kind if kind != text_type(role) else None,
            extra=extra_fields(part, ("type", "text")),
        )
        return TextPart(text=text, metadata=meta)
    if kind == "input_image" and isinstance(part.get("image_url"), str):
        return _read_image(part)
    content_part = kind not in CONTENT_TYPES or None
    return OpaquePart(
        provider=PROVIDER,
        data=clone(part),
        metadata=part_metadata(PROVIDER, content_part=content_part),
    )


def _read_image(part: JSONObject) -> ImagePart:
    url: str = part["image_url"]
    detail = part.get("detail")
    detail = detail if isinstance(detail, str) else None
    known = ("type", "image_url", "detail") if detail is not None else ("type", "image_url")
    meta = part_metadata(PROVIDER, extra=extra_fields(part, known))
    found = _DATA_URL.fullmatch(url)
    if found is None:
        return ImagePart(url=url, detail=detail, metadata=meta)
    return ImagePart(data=found["data"], media_type=found["media"], detail=detail, metadata=meta)


def write_content(part: ContentItem, role: str) -> JSONObject | None:
    """The Responses content part for ``part`` (None for another provider's opaque block)."""
    hint = provider_meta(part.metadata, PROVIDER)
    if isinstance(part, OpaquePart):
        return clone(part.data) if part.provider == PROVIDER else None
    if isinstance(part, TextPart):
        kind = hint.get("type") if hint.get("type") in ("input_text", "output_text") else None
        out: JSONObject = {"type": kind or text_type(role), "text": part.text}
        return add_extra(out, hint.get("extra"))
    out = {"type": "input_image", "image_url": image_url_of(part)}
    if part.detail is not None:
        out["detail"] = part.detail
    return add_extra(out, hint.get("extra"))


def read_call(item: JSONObject, path: Path) -> ToolCallPart:
    """A ``function_call`` item (its null fields left out)."""
    call_id = expect_str(item, "call_id", path)
    name = expect_str(item, "name", path)
    raw = expect_str(item, "arguments", path)
    arguments = parse_arguments(raw)
    meta = part_metadata(
        PROVIDER,
        arguments=None if dump_arguments(arguments) == raw else raw,
        extra=extra_fields(item, ("type", "call_id", "name", "arguments")),
    )
    return ToolCallPart(id=call_id, name=name, arguments=arguments, metadata=meta)


def write_call(part: ToolCallPart) -> JSONObject:
    """The ``function_call`` item for ``part``."""
    hint = provider_meta(part.metadata, PROVIDER)
    raw = hint.get("arguments")
    if not (isinstance(raw, str) and parse_arguments(raw) == part.arguments):
        raw = dump_arguments(part.arguments)
    out = {"type": "function_call", "call_id": part.id, "name": part.name, "arguments": raw}
    return add_extra(out, hint.get("extra"))


def read_output(item: JSONObject, path: Path) -> ToolResultPart:
    """A ``function_call_output`` item: its output a string or a list of input parts."""
    call_id = expect_str(item, "call_id", path)
    output = item.get("output")
    content: str | tuple[ContentItem, ...]
    if isinstance(output, str):
        content = output
    elif isinstance(output, list):
        where = (*path, "output")
        content = tuple(read_content(x, (*where, i), "user") for i, x in enumerate(output))
    else:
        raise FormatError((*path, "output"), "output must be a string or a list of content parts")
    meta = part_metadata(PROVIDER, extra=extra_fields(item, ("type", "call_id", "output")))
    return ToolResultPart(call_id=call_id, content=content, metadata=meta)


def write_output(part: ToolResultPart) -> JSONObject:
    """The ``function_call_output`` item for ``part`` (an error flag has no Responses field)."""
    hint = provider_meta(part.metadata, PROVIDER)
    output: str | list[JSONObject]
    if isinstance(part.content, str):
        output = part.content
    else:
        written = (write_content(item, "user") for item in part.content)
        output = [item for item in written if item is not None]
    out = {"type": "function_call_output", "call_id": part.call_id, "output": output}
    return add_extra(out, hint.get("extra"))


def read_reasoning(item: JSONObject) -> ReasoningPart:
    """A ``reasoning`` item, kept whole; its text is its summaries' (None when it has none)."""
    summary = item.get("summary")
    texts = [
        entry["text"]
        for entry in (summary if isinstance(summary, list) else [])
        if isinstance(entry, dict) and isinstance(entry.get("text"), str)
    ]
    text = "\n".join(texts) if texts else None
    return ReasoningPart(text=text, metadata={PROVIDER: {"item": clone(item)}})


def write_reasoning(part: ReasoningPart) -> JSONObject | None:
    """The verbatim reasoning item (None for reasoning from another provider)."""
    item = provider_meta(part.metadata, PROVIDER).get("item")
    return clone(item) if isinstance(item, dict) else None
