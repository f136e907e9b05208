"""Tool payload compaction (seeds/002): older duplicate tool payloads shrink to ``"[omitted]"``.

Every tool call has a group key ``{toolName}|{identifierKey}``: the JSON of its identifier
arguments (``toolIdentifierFields[toolName]``, in configured order, missing ones null), or
``__tool_only__`` when the tool has none configured. Scanning from the newest message back, the
newest occurrence of each group (its call and its result) stays whole; older calls and results of
the group have each top-level field bigger than the byte threshold replaced by ``"[omitted]"``,
with ``_tool_compaction`` metadata (``thresholdBytes``, and per omitted field its ``bytes`` and
the ``sha256`` of its original). Identifier fields are never trimmed; excluded tools are never
touched; a call with no result yet is never compacted. Payloads that cannot be handled are left
as they are: arguments that are not a JSON object, results with more than text.

A tool result is a text. When the text is a JSON object its top-level keys are the fields;
otherwise it is one field named ``content``. A compacted result's content becomes the one-line
placeholder that names the tool and call id; its ``_tool_compaction`` metadata stays with the
part (ctxc's own, never sent). Compacted arguments carry the metadata inside themselves, as the
source does.

Sizes and hashes. A string's size is its UTF-8 length; null and false are 0, true is 1, a number
the length of its JSON text, an array or object the UTF-8 length of its JSON. That JSON (and the
JSON every ``sha256`` is of, for any value) is compact and UTF-8 with keys in their stored
order: Python's ``json.dumps(value, ensure_ascii=False, separators=(",", ":"))``. So the hash of
a string field is the sha256 of the string as a quoted JSON string.

Beyond the source, ``dedupe_results`` replaces an older result whose text equals a newer, untouched
result's by a short reference to the newer call.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from app.domain.messages import (
    JSONObject,
    Message,
    Part,
    TextPart,
    ToolCallPart,
    ToolResultPart,
    result_text,
)

OMITTED = "[omitted]"
META_KEY = "_tool_compaction"
# The metadata key of a result ``compact_tool_results`` previewed (see ``previews``).
PREVIEW_KEY = "_tool_result_preview"
TOOL_ONLY = "__tool_only__"
CONTENT_FIELD = "content"
Side = Literal["arguments", "result"]


@dataclass(frozen=True)
class PayloadRules:
    """The source's parameters (``inputTrimBytes`` ... ``toolIdentifierFields``) and ours."""

    input_trim_bytes: int = 100
    output_trim_bytes: int = 100
    excluded_tools: frozenset[str] = frozenset()
    identifier_fields: Mapping[str, Sequence[str]] = field(default_factory=dict)


@dataclass(frozen=True)
class Omitted:
    """One original payload a compaction took out of the view."""

    call_id: str
    side: Side
    field: str
    bytes: int
    sha256: str
    value: Any


@dataclass(frozen=True)
class Compaction:
    """The compacted messages (same order, same count) and what was taken out, per message."""

    messages: tuple[Message, ...]
    omitted: Mapping[int, tuple[Omitted, ...]]  # message index -> what it lost


def payload_json(value: Any) -> str:
    """The JSON sizes and hashes are of (see the module docstring)."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def payload_size(value: Any) -> int:
    """The byte size of a field value, as the source measures it."""
    if isinstance(value, str):
        return len(value.encode())
    if value is None or value is False:
        return 0
    if value is True:
        return 1
    return len(payload_json(value).encode())


def payload_sha256(value: Any) -> str:
    """The sha256 (hex) of the value's JSON."""
    return hashlib.sha256(payload_json(value).encode()).hexdigest()


def digests(fields: JSONObject) -> dict[str, tuple[int, str]]:
    """Each field's byte size and sha256, as a compaction would report them."""
    return {key: (payload_size(value), payload_sha256(value)) for key, value in fields.items()}


def placeholder(tool: str, call_id: str) -> str:
    """The visible content of a compacted tool result (no original data)."""
    return (
        f"[tool_compaction] Tool result compacted for tool={tool}, callId={call_id}. "
        "Large fields omitted."
    )


def same_as(tool: str, call_id: str, newer: str) -> str:
    """The visible content of a result replaced by a reference to an identical newer one."""
    return (
        f"[tool_compaction] Tool result for tool={tool}, callId={call_id} is identical to the "
        f"result of the newer callId={newer}."
    )


@dataclass(eq=False)
class _Call:
    """One tool call occurrence (ids may repeat across turns: occurrences are compared by
    identity, a result belonging to the newest call of its id before it)."""

    id: str
    name: str
    group: str
    answered: bool = False


Place = tuple[int, int]  # (message index, part index)


def group_key(call: ToolCallPart, rules: PayloadRules) -> str:
    """``{toolName}|{identifierKey}``."""
    names = rules.identifier_fields.get(call.name)
    if not names:
        return f"{call.name}|{TOOL_ONLY}"
    if not isinstance(call.arguments, dict):  # unparsed: no identifiers to read
        return f"{call.name}|{payload_json(call.arguments)}"
    pairs = {name: call.arguments.get(name) for name in names}
    return f"{call.name}|{payload_json(pairs)}"


def _index(messages: Sequence[Message], rules: PayloadRules) -> dict[Place, _Call]:
    """Every tool call and result place with the call occurrence it belongs to."""
    places: dict[Place, _Call] = {}
    latest: dict[str, _Call] = {}
    for i, message in enumerate(messages):
        for j, part in enumerate(message.content):
            if isinstance(part, ToolCallPart) and message.role == "assistant":
                latest[part.id] = places[i, j] = _Call(part.id, part.name, group_key(part, rules))
            elif isinstance(part, ToolResultPart) and part.call_id in latest:
                call = places[i, j] = latest[part.call_id]
                call.answered = True
    return places


def _plan(messages: Sequence[Message], rules: PayloadRules, keep: frozenset[int]) -> list[Place]:
    """The places to compact, by the source's reverse scan with protected call occurrences."""
    places = _index(messages, rules)
    seen: set[str] = set()
    protected: set[int] = set()  # ids of protected _Call occurrences
    chosen: list[Place] = []
    for i in reversed(range(len(messages))):
        for j in reversed(range(len(messages[i].content))):
            call = places.get((i, j))
            if call is None or call.name in rules.excluded_tools:
                continue
            is_result = isinstance(messages[i].content[j], ToolResultPart)
            if i in keep or id(call) in protected or call.group not in seen:
                seen.add(call.group)
                protected.add(id(call))
            elif is_result or call.answered:
                chosen.append((i, j))
    return chosen


def _omit(
    fields: JSONObject, threshold: int, keep: Sequence[str], call_id: str, side: Side
) -> tuple[JSONObject, list[Omitted]]:
    out: JSONObject = {}
    omitted: list[Omitted] = []
    for key, value in fields.items():
        size = payload_size(value)
        if key in keep or size <= threshold or size <= 0:
            out[key] = value
            continue
        out[key] = OMITTED
        omitted.append(Omitted(call_id, side, key, size, payload_sha256(value), value))
    return out, omitted


def _meta(threshold: int, omitted: Sequence[Omitted]) -> JSONObject:
    return {
        "thresholdBytes": threshold,
        "omittedFields": {o.field: {"bytes": o.bytes, "sha256": o.sha256} for o in omitted},
    }


def _compact_call(part: ToolCallPart, rules: PayloadRules) -> tuple[Part, list[Omitted]]:
    args = part.arguments
    if not isinstance(args, dict) or META_KEY in args:
        return part, []  # not a JSON object, or compacted already
    keep = rules.identifier_fields.get(part.name, ())
    out, omitted = _omit(args, rules.input_trim_bytes, keep, part.id, "arguments")
    if not omitted:
        return part, []
    out[META_KEY] = _meta(rules.input_trim_bytes, omitted)
    return part.model_copy(update={"arguments": out}), omitted


def result_fields(part: ToolResultPart) -> JSONObject | None:
    """A result's fields (see the module docstring); None when it holds more than text."""
    text = textual(part)
    if text is None:
        return None
    try:
        parsed = json.loads(text, parse_constant=_refuse)
    except (ValueError, RecursionError):  # not JSON, NaN or Infinity, nested too deep
        parsed = None
    return parsed if isinstance(parsed, dict) else {CONTENT_FIELD: text}


def _refuse(constant: str) -> Any:
    raise ValueError(f"{constant} is not JSON")


def textual(part: ToolResultPart) -> str | None:
    """A result's text; None when it holds more than text (images, documents)."""
    if isinstance(part.content, str) or all(isinstance(i, TextPart) for i in part.content):
        return result_text(part)
    return None


def fresh_text(part: ToolResultPart) -> str | None:
    """The text of a textual result no compaction step has rewritten yet (None otherwise)."""
    return None if compacted(part) else textual(part)


def _replaced(part: ToolResultPart, text: str, meta: JSONObject) -> ToolResultPart:
    return part.model_copy(update={"content": text, "metadata": {**part.metadata, META_KEY: meta}})


def _compact_result(
    part: ToolResultPart, tool: str, rules: PayloadRules
) -> tuple[Part, list[Omitted]]:
    fields = None if compacted(part) else result_fields(part)
    if fields is None:
        return part, []
    threshold = rules.output_trim_bytes
    _, omitted = _omit(fields, threshold, (), part.call_id, "result")
    if not omitted:
        return part, []
    return _replaced(part, placeholder(tool, part.call_id), _meta(threshold, omitted)), omitted


def compact_tool_payloads(
    messages: Sequence[Message], rules: PayloadRules, keep: frozenset[int] = frozenset()
) -> Compaction:
    """``messages`` with older tool payloads compacted (the input is left as it is).

    ``keep``: indexes of messages never compacted (their calls still count as the newest of
    their groups). Never raises on odd payloads: they are left as they are.
    """
    places = _index(messages, rules)
    parts = {i: list(m.content) for i, m in enumerate(messages)}
    omitted: dict[int, list[Omitted]] = {}
    for i, j in _plan(messages, rules, keep):
        part = parts[i][j]
        if isinstance(part, ToolCallPart):
            new, lost = _compact_call(part, rules)
        elif isinstance(part, ToolResultPart):
            new, lost = _compact_result(part, places[i, j].name, rules)
        else:  # pragma: no cover - places hold only tool parts
            continue
        parts[i][j] = new
        omitted.setdefault(i, []).extend(lost)
    return _compaction(messages, parts, omitted)


def _compaction(
    messages: Sequence[Message], parts: Mapping[int, list[Part]], omitted: dict[int, list[Omitted]]
) -> Compaction:
    out = tuple(
        m.model_copy(update={"content": tuple(parts[i])}) if omitted.get(i) else m
        for i, m in enumerate(messages)
    )
    return Compaction(out, {i: tuple(lost) for i, lost in sorted(omitted.items()) if lost})


def dedupe_results(
    messages: Sequence[Message], rules: PayloadRules, keep: frozenset[int] = frozenset()
) -> Compaction:
    """``messages`` with each older untouched result whose text equals a newer untouched
    result's replaced by a reference to the newer call (excluded tools aside)."""
    places = _index(messages, rules)
    parts = {i: list(m.content) for i, m in enumerate(messages)}
    omitted: dict[int, list[Omitted]] = {}
    newest: dict[str, str] = {}  # sha256 of the text -> call id of its newest result
    for i in reversed(range(len(messages))):
        for j in reversed(range(len(parts[i]))):
            part, call = parts[i][j], places.get((i, j))
            if not isinstance(part, ToolResultPart) or call is None:
                continue
            text = None if call.name in rules.excluded_tools else fresh_text(part)
            if not text:
                continue
            sha = payload_sha256(text)
            newer = newest.setdefault(sha, part.call_id)
            if newer == part.call_id or i in keep:
                continue
            lost = Omitted(part.call_id, "result", CONTENT_FIELD, payload_size(text), sha, text)
            meta = {"sameAs": newer, "bytes": lost.bytes, "sha256": sha}
            parts[i][j] = _replaced(part, same_as(call.name, part.call_id, newer), meta)
            omitted.setdefault(i, []).append(lost)
    return _compaction(messages, parts, omitted)


def compacted(part: ToolResultPart) -> bool:
    """True for a result a compaction step rewrote already (in this view or when stored)."""
    return META_KEY in part.metadata or PREVIEW_KEY in part.metadata
