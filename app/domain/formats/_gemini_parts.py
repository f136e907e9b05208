"""Gemini ``generateContent`` parts (REST, camelCase), to and from canonical parts.

A part holds exactly one data field. ``text`` is a TextPart (a ReasoningPart when
``thought: true``), ``inlineData`` of an image type an ImagePart, ``functionCall`` a
ToolCallPart, ``functionResponse`` a ToolResultPart; every other data field (``fileData``,
``executableCode``, ``codeExecutionResult``, non-image ``inlineData``, fields of newer APIs) is
kept verbatim as an OpaquePart of provider ``gemini``.

Hints kept under the part's ``metadata["gemini"]``: ``extra`` (part fields beside the data
field: ``thoughtSignature``, ``videoMetadata``...), ``inner_extra`` (fields of the data object
we do not model), ``thought: true`` on reasoning (only Gemini's own thoughts go back to Gemini),
``id: "absent"`` / ``args: "absent"`` / ``response: "absent"`` for fields the part left out,
``name`` (the function a response answers) and ``response: "json"`` when a function response
was not ``{"output": <text>}`` or ``{"error": <text>}`` (its content is then the JSON text).

Gemini pairs calls and responses by their order, not by id: the API gives no call an id, and a
client labels them as it likes (Gemini CLI makes up ``<name>_<time>_<n>`` for the calls it
resends). So every call's canonical id is ``<name>_<n>`` (its ``n``-th call to that function in
its turn), and every response's is its ``n``-th response from that function in its turn: they
pair wherever the turns were cut into append batches, and an answer as the API gave it (no ids)
is the same call as the client's resend of it (with its label). A label the client gave is kept
(``given_id``) and written back; an id ctxc made is left out again.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping
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
from app.domain.messages import (
    ImagePart,
    JSONObject,
    OpaquePart,
    Part,
    ReasoningPart,
    TextPart,
    ToolCallPart,
    ToolResultPart,
    provider_meta,
    result_text,
)

PROVIDER = "gemini"
RAW_ARGS_KEY = "_raw"
# The data fields of a Part (exactly one per part) and the fields that may accompany one.
DATA_FIELDS: Final = (
    "text",
    "inlineData",
    "fileData",
    "functionCall",
    "functionResponse",
    "executableCode",
    "codeExecutionResult",
)
PART_FIELDS: Final = frozenset(
    {"thought", "thoughtSignature", "videoMetadata", "partMetadata", "mediaResolution"}
)
# Data fields ctxc models itself: an opaque part holding one would bypass every check.
MODELLED: Final = frozenset({"text", "functionCall", "functionResponse"})


def _snake(name: str) -> str:
    return "".join(f"_{c.lower()}" if c.isupper() else c for c in name)


# The proto field names the REST API also reads; ctxc takes the camelCase form only.
_SNAKE: Final = {
    _snake(key): key
    for key in (*DATA_FIELDS, "thoughtSignature", "videoMetadata")
    if _snake(key) != key
}
_NAMES: Final = ", ".join(DATA_FIELDS)


def part_kind(data: Mapping[str, Any]) -> str | None:
    """The data field of a Gemini part: a known one, else its first field that is not a part
    field (None when it has none)."""
    for key in DATA_FIELDS:
        if key in data:
            return key
    return next((key for key in data if key not in PART_FIELDS), None)


class TurnIds:
    """Ids for the calls and responses of one turn that carry none (see the module doc)."""

    def __init__(self) -> None:
        self._seen: Counter[tuple[str, str]] = Counter()

    def call(self, name: str) -> str:
        return self._next("call", name)

    def result(self, name: str) -> str:
        return self._next("result", name)

    def _next(self, kind: str, name: str) -> str:
        self._seen[kind, name] += 1
        return f"{name}_{self._seen[kind, name] - 1}"


def read_part(raw: Any, path: Path, ids: TurnIds) -> Part:
    """One part; a data field ctxc does not model is kept opaque."""
    # Null fields are dropped (the SDKs dump what a part leaves out as null), but inside call
    # `args` and a `response`, where a null is a value.
    part = without_nulls(expect_object(raw, path, "a part object"), ("args", "response"))
    for key in part:
        if key in _SNAKE:
            raise FormatError((*path, key), f"send the camelCase field {_SNAKE[key]!r}")
    if "type" in part:
        raise FormatError(
            (*path, "type"),
            'a Gemini part has no "type": this looks like OpenAI or Anthropic; send '
            '"format": "openai" or "format": "anthropic"',
        )
    found = [key for key in DATA_FIELDS if key in part]
    if len(found) > 1:
        raise FormatError(path, f"a part holds exactly one of {_NAMES}; this one has {found}")
    if not found:
        if part_kind(part) is None:
            raise FormatError(path, f"a part needs one of {_NAMES}")
        return OpaquePart(provider=PROVIDER, data=clone(part))
    reader = _READERS.get(found[0])
    if reader is None:
        return OpaquePart(provider=PROVIDER, data=clone(part))
    return reader(part, path, ids)


def _read_text(part: JSONObject, path: Path, ids: TurnIds) -> Part:
    text = expect_str(part, "text", path)
    signature = part.get("thoughtSignature")
    if part.get("thought") is True:
        signed = isinstance(signature, str)
        known = ("text", "thought") + (("thoughtSignature",) if signed else ())
        meta = part_metadata(PROVIDER, thought=True, extra=extra_fields(part, known))
        return ReasoningPart(text=text, signature=signature if signed else None, metadata=meta)
    return TextPart(
        text=text, metadata=part_metadata(PROVIDER, extra=extra_fields(part, ("text",)))
    )


def _read_inline(part: JSONObject, path: Path, ids: TurnIds) -> Part:
    where = (*path, "inlineData")
    inline = expect_object(part["inlineData"], where, "inlineData to be an object")
    # Other media types are kept opaque and sent as they came: the API needs both fields.
    mime, data = expect_str(inline, "mimeType", where), expect_str(inline, "data", where)
    if not data:
        raise FormatError((*where, "data"), "'data' is empty; expected base64 data")
    if mime.startswith("image/"):
        meta = part_metadata(
            PROVIDER,
            extra=extra_fields(part, ("inlineData",)),
            inner_extra=extra_fields(inline, ("mimeType", "data")),
        )
        return ImagePart(data=data, media_type=mime, metadata=meta)
    return OpaquePart(provider=PROVIDER, data=clone(part))


def _read_call(part: JSONObject, path: Path, ids: TurnIds) -> Part:
    where = (*path, "functionCall")
    call = expect_object(part["functionCall"], where, "functionCall to be an object")
    name = expect_str(call, "name", where)
    args = call.get("args", {})
    if not isinstance(args, dict):
        raise FormatError((*where, "args"), "args must be an object")
    given = expect_str(call, "id", where) if "id" in call else None
    meta = part_metadata(
        PROVIDER,
        id=None if "id" in call else "absent",
        given_id=given,
        args=None if "args" in call else "absent",
        extra=extra_fields(part, ("functionCall",)),
        inner_extra=extra_fields(call, ("name", "args", "id")),
    )
    return ToolCallPart(id=ids.call(name), name=name, arguments=clone(args), metadata=meta)


def _read_response(part: JSONObject, path: Path, ids: TurnIds) -> Part:
    where = (*path, "functionResponse")
    found = expect_object(part["functionResponse"], where, "functionResponse to be an object")
    name = expect_str(found, "name", where)
    response = found.get("response", {})
    if not isinstance(response, dict):
        raise FormatError((*where, "response"), "response must be an object")
    given = expect_str(found, "id", where) if "id" in found else None
    content, is_error, form = (
        _result_content(response) if "response" in found else ("", None, "absent")
    )
    meta = part_metadata(
        PROVIDER,
        id=None if "id" in found else "absent",
        given_id=given,
        name=name,
        response=form,
        extra=extra_fields(part, ("functionResponse",)),
        inner_extra=extra_fields(found, ("name", "response", "id")),
    )
    return ToolResultPart(
        call_id=ids.result(name), content=content, is_error=is_error, metadata=meta
    )


def _result_content(response: JSONObject) -> tuple[str, bool | None, str | None]:
    """``(content, is_error, form)``: the text of ``{"output": text}`` or ``{"error": text}``,
    else the response's JSON text with the form ``"json"``."""
    if len(response) == 1:
        key, value = next(iter(response.items()))
        if key in ("output", "error") and isinstance(value, str):
            return value, (True if key == "error" else None), None
    return json.dumps(response, ensure_ascii=False), None, "json"


_READERS: Final = {
    "text": _read_text,
    "inlineData": _read_inline,
    "functionCall": _read_call,
    "functionResponse": _read_response,
}


def write_part(part: Part, names: Mapping[str, str] | None = None) -> JSONObject | None:
    """The Gemini part for ``part``; None for what Gemini does not take: another provider's
    opaque block, an image by URL, reasoning that is not Gemini's own. ``names``: the function
    name of each call id, for responses from other formats."""
    hint = provider_meta(part.metadata, PROVIDER)
    out: JSONObject
    if isinstance(part, OpaquePart):
        return clone(part.data) if part.provider == PROVIDER else None
    if isinstance(part, TextPart):
        out = {"text": part.text}
    elif isinstance(part, ImagePart):
        if part.data is None:
            return None
        inline = {"mimeType": part.media_type, "data": part.data}
        out = {"inlineData": add_extra(inline, hint.get("inner_extra"))}
    elif isinstance(part, ToolCallPart):
        out = {"functionCall": write_call(part)}
    elif isinstance(part, ToolResultPart):
        name = hint.get("name") or (names or {}).get(part.call_id) or part.call_id
        out = {"functionResponse": write_response(part, str(name), hint.get("id") != "absent")}
    else:
        if not is_own_thought(part) or part.redacted_data is not None:
            return None
        out = {"text": part.text or "", "thought": True}
        if part.signature is not None:
            out["thoughtSignature"] = part.signature
    return add_extra(out, hint.get("extra"))


def is_own_thought(part: ReasoningPart) -> bool:
    """Whether ``part`` is a Gemini thought (only those go back to Gemini)."""
    return provider_meta(part.metadata, PROVIDER).get("thought") is True


def has_id(part: ToolCallPart) -> bool:
    """Whether the call had an id of its own (one ctxc made is not sent)."""
    return provider_meta(part.metadata, PROVIDER).get("id") != "absent"


def write_call(part: ToolCallPart) -> JSONObject:
    """The ``functionCall`` object; raw string arguments become ``{"_raw": text}``."""
    hint = provider_meta(part.metadata, PROVIDER)
    args = (
        clone(part.arguments)
        if isinstance(part.arguments, dict)
        else {RAW_ARGS_KEY: part.arguments}
    )
    call: JSONObject = {"name": part.name}
    if args or hint.get("args") != "absent":
        call["args"] = args
    if has_id(part):
        call["id"] = hint.get("given_id", part.id)
    return add_extra(call, hint.get("inner_extra"))


def write_response(part: ToolResultPart, name: str, with_id: bool) -> JSONObject:
    """The ``functionResponse`` object answering the call ``name`` (with its id if ``with_id``)."""
    hint = provider_meta(part.metadata, PROVIDER)
    found: JSONObject = {"name": name}
    response = response_object(part)
    if response or hint.get("response") != "absent":
        found["response"] = response
    if with_id:
        found["id"] = hint.get("given_id", part.call_id)
    return add_extra(found, hint.get("inner_extra"))


def response_object(part: ToolResultPart) -> JSONObject:
    """The ``response`` object: the parsed JSON text of a response that was not text, else
    ``{"error": text}`` for an error, ``{"output": text}`` otherwise (empty when it was absent)."""
    hint = provider_meta(part.metadata, PROVIDER)
    text = result_text(part)
    if hint.get("response") == "json":
        try:
            parsed = json.loads(text)
        except ValueError:
            parsed = None
        if isinstance(parsed, dict):
            return parsed
    if hint.get("response") == "absent" and not text:
        return {}
    return {"error": text} if part.is_error else {"output": text}
