"""OpenAI Chat Completions content parts and tool calls, to and from canonical parts.

Hints kept under the part's ``metadata["openai"]``:

- content parts: ``extra`` (part fields we do not model, e.g. ``cache_control``) and
  ``image_url_extra`` (fields of the ``image_url`` object other than ``url`` and a string
  ``detail``);
- tool calls: ``arguments`` (the exact ``function.arguments`` string when it is not the compact
  JSON dump of the parsed object), ``untyped`` (true when the call had no ``type``), ``custom``
  (true for a ``type: "custom"`` call), ``extra`` (other fields of the call) and
  ``function_extra`` / ``custom_extra`` (other fields of the ``function`` / ``custom`` object).

A tool call's null fields, and its ``function``'s, are not kept (as in ``openai``), nor is its
``index``: the place of a streamed delta, which the OpenAI SDK's stream helper leaves on the calls
it assembles and which a request's tool call does not have.
"""

from __future__ import annotations

import json
import math
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
    set_fields,
)
from app.domain.formats._foreign import advice, foreign_in_openai, part_message
from app.domain.limits import json_problems
from app.domain.messages import (
    ImagePart,
    JSONObject,
    OpaquePart,
    TextPart,
    ToolCallPart,
    provider_meta,
)

PROVIDER = "openai"
ContentItem = TextPart | ImagePart | OpaquePart

_DATA_URL = re.compile(r"data:(?P<media>[^;,]+);base64,(?P<data>.*)", re.DOTALL)


def read_part(raw: Any, path: Path) -> ContentItem:
    """One content part; parts we do not model (audio, file, refusal, newer types) are kept
    opaque, another format's parts are refused."""
    part = expect_object(raw, path, "a content part object")
    kind = part.get("type")
    if not isinstance(kind, str):
        raise FormatError((*path, "type"), "a content part needs a string type")
    shape = foreign_in_openai(kind, part)
    if shape is not None:
        raise FormatError((*path, "type"), part_message(kind, shape, "openai"))
    if kind == "text":
        text = expect_str(part, "text", path)
        meta = part_metadata(PROVIDER, extra=extra_fields(part, ("type", "text")))
        return TextPart(text=text, metadata=meta)
    if kind == "image_url":
        return _read_image(part, path)
    return OpaquePart(provider=PROVIDER, data=clone(part))


def _read_image(part: JSONObject, path: Path) -> ImagePart:
    image_url = expect_object(part.get("image_url"), (*path, "image_url"), "an image_url object")
    url = expect_str(image_url, "url", (*path, "image_url"))
    detail = image_url.get("detail")
    detail = detail if isinstance(detail, str) else None
    known = ("url", "detail") if detail is not None else ("url",)
    meta = part_metadata(
        PROVIDER,
        extra=extra_fields(part, ("type", "image_url")),
        image_url_extra=extra_fields(image_url, known),
    )
    found = _DATA_URL.fullmatch(url)
    if found is None:
        return ImagePart(url=url, detail=detail, metadata=meta)
    source = {"data": found["data"], "media_type": found["media"]}
    return ImagePart(**source, detail=detail, metadata=meta)


def write_part(part: ContentItem) -> JSONObject | None:
    """The OpenAI content part for ``part`` (None for another provider's opaque block)."""
    hint = provider_meta(part.metadata, PROVIDER)
    if isinstance(part, OpaquePart):
        return clone(part.data) if part.provider == PROVIDER else None
    if isinstance(part, TextPart):
        return add_extra({"type": "text", "text": part.text}, hint.get("extra"))
    image_url: JSONObject = {"url": image_url_of(part)}
    if part.detail is not None:
        image_url["detail"] = part.detail
    add_extra(image_url, hint.get("image_url_extra"))
    return add_extra({"type": "image_url", "image_url": image_url}, hint.get("extra"))


def image_url_of(part: ImagePart) -> str:
    """The image's URL, a ``data:`` URL for inline data."""
    if part.url is not None:
        return part.url
    return f"data:{part.media_type};base64,{part.data}"


def read_tool_call(raw: Any, path: Path) -> ToolCallPart:
    """One entry of an assistant message's ``tool_calls``."""
    call = set_fields(expect_object(raw, path, "a tool call object"))
    call.pop("index", None)
    call_id = expect_str(call, "id", path)
    kind = call.get("type")
    if kind == "custom":
        return _read_custom_call(call, call_id, path)
    if "type" in call and kind != "function":
        hint = f"; this {advice('anthropic')}" if kind == "tool_use" else ""
        raise FormatError((*path, "type"), f"a tool call type must be 'function' or 'custom'{hint}")
    function = set_fields(
        expect_object(call.get("function"), (*path, "function"), "a function object")
    )
    name = expect_str(function, "name", (*path, "function"))
    raw_arguments = expect_str(function, "arguments", (*path, "function"))
    arguments = parse_arguments(raw_arguments)
    meta = part_metadata(
        PROVIDER,
        arguments=None if dump_arguments(arguments) == raw_arguments else raw_arguments,
        untyped="type" not in call,
        extra=extra_fields(call, ("id", "type", "function")),
        function_extra=extra_fields(function, ("name", "arguments")),
    )
    return ToolCallPart(id=call_id, name=name, arguments=arguments, metadata=meta)


def _read_custom_call(call: JSONObject, call_id: str, path: Path) -> ToolCallPart:
    custom = set_fields(expect_object(call.get("custom"), (*path, "custom"), "a custom object"))
    name = expect_str(custom, "name", (*path, "custom"))
    tool_input = expect_str(custom, "input", (*path, "custom"))
    meta = part_metadata(
        PROVIDER,
        custom=True,
        extra=extra_fields(call, ("id", "type", "custom")),
        custom_extra=extra_fields(custom, ("name", "input")),
    )
    # Custom tool input is free text, never JSON to parse.
    return ToolCallPart(id=call_id, name=name, arguments=tool_input, metadata=meta)


def write_tool_call(part: ToolCallPart) -> JSONObject:
    """The OpenAI ``tool_calls`` entry for ``part``."""
    hint = provider_meta(part.metadata, PROVIDER)
    arguments = arguments_text(part)
    if hint.get("custom") is True:
        custom = add_extra({"name": part.name, "input": arguments}, hint.get("custom_extra"))
        return add_extra({"id": part.id, "type": "custom", "custom": custom}, hint.get("extra"))
    function = add_extra({"name": part.name, "arguments": arguments}, hint.get("function_extra"))
    out: JSONObject = {"id": part.id, "type": "function", "function": function}
    if hint.get("untyped") is True:
        del out["type"]
    return add_extra(out, hint.get("extra"))


def parse_arguments(raw: str) -> JSONObject | str:
    """The arguments as a JSON object when ``raw`` is one, else ``raw`` itself."""
    try:
        value = _ARGUMENTS.decode(raw)
    except (ValueError, RecursionError):
        return raw
    # Keep text raw when its value could not be stored exactly (lone surrogates, deep nesting).
    return value if isinstance(value, dict) and not json_problems(value) else raw


def dump_arguments(arguments: JSONObject | str) -> str:
    """The arguments string OpenAI expects: compact JSON for an object."""
    if isinstance(arguments, str):
        return arguments
    return json.dumps(arguments, ensure_ascii=False, separators=(",", ":"))


def arguments_text(part: ToolCallPart) -> str:
    """The recorded arguments string when it still matches the arguments, else a fresh dump."""
    raw = provider_meta(part.metadata, PROVIDER).get("arguments")
    if isinstance(raw, str) and parse_arguments(raw) == part.arguments:
        return raw
    return dump_arguments(part.arguments)


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"{text} overflows a float")
    return value


def _reject_constant(name: str) -> Any:
    # NaN and Infinity are not JSON and would not survive storage; keep such text raw.
    raise ValueError(f"{name} is not JSON")


# ``json.loads(raw, parse_constant=..., parse_float=...)`` builds this decoder on every call.
_ARGUMENTS = json.JSONDecoder(parse_constant=_reject_constant, parse_float=_finite_float)
