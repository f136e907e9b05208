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
import weakref
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Literal, TypeVar

from app.domain.messages import (
    JSONObject,
    Message,
    Part,
    TextPart,
    ToolCallPart,
    ToolResultPart,
    result_text,
)

T = TypeVar("T")
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


# What compaction works out of a tool part (its fields' sizes and hashes, its compacted form),
# kept while that part object lives: the parts of a remembered parsed message (a posted history
# the message cache holds, see ``app.services.sessions.cache``) are hashed once, not on every
# compile.
# Keyed by the object itself (its id, while a weak reference says it is alive), never by its
# content: no compile is faster for what another tenant sent. Parts are frozen, and a changed
# part is a new object. A space never refers to its own part (None stands for it), so
# the part still dies when its message is dropped, and its space with it.
_MEMOS: dict[int, tuple[weakref.KeyedRef[int, Part], dict[Any, Any]]] = {}
_MISSING: Any = object()


def _forget(ref: weakref.KeyedRef[int, Part], memos: dict[Any, Any] = _MEMOS) -> None:
    # ``memos`` bound here: at interpreter exit, module globals are gone before the parts.
    if memos.get(ref.key, (None,))[0] is ref:
        memos.pop(ref.key, None)


def memo(part: ToolCallPart | ToolResultPart) -> dict[Any, Any]:
    """The scratch space of this part object (empty at first), dropped with the part."""
    key = id(part)
    found = _MEMOS.get(key)
    if found is not None and found[0]() is part:
        return found[1]
    space: dict[Any, Any] = {}
    _MEMOS[key] = (weakref.KeyedRef(part, _forget, key), space)
    return space


def remembered(space: dict[Any, Any], key: Any, work: Callable[[], T]) -> T:
    """``space[key]``, worked out once (two threads may both work it out: the same value)."""
    found = space.get(key, _MISSING)
    if found is _MISSING:
        found = space[key] = work()
    return found  # type: ignore[no-any-return]


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
    fields: JSONObject,
    threshold: int,
    keep: Sequence[str],
    call_id: str,
    side: Side,
    space: dict[Any, Any],
) -> tuple[JSONObject, list[Omitted]]:
    """``fields`` with those over ``threshold`` bytes omitted; sizes and hashes are remembered
    in the part's ``space``."""
    out: JSONObject = {}
    omitted: list[Omitted] = []
    for key, value in fields.items():
        size = remembered(space, ("size", key), partial(payload_size, value))
        if key in keep or size <= threshold or size <= 0:
            out[key] = value
            continue
        out[key] = OMITTED
        sha = remembered(space, ("sha256", key), partial(payload_sha256, value))
        omitted.append(Omitted(call_id, side, key, size, sha, value))
    return out, omitted


def _meta(threshold: int, omitted: Sequence[Omitted]) -> JSONObject:
    return {
        "thresholdBytes": threshold,
        "omittedFields": {o.field: {"bytes": o.bytes, "sha256": o.sha256} for o in omitted},
    }


def _compact_call(
    part: ToolCallPart, rules: PayloadRules
) -> tuple[Part | None, tuple[Omitted, ...]]:
    """The call with its large arguments omitted (None: none), and what they were."""
    args = part.arguments
    if not isinstance(args, dict) or META_KEY in args:
        return None, ()  # not a JSON object, or compacted already
    keep = rules.identifier_fields.get(part.name, ())
    out, omitted = _omit(args, rules.input_trim_bytes, keep, part.id, "arguments", memo(part))
    if not omitted:
        return None, ()
    out[META_KEY] = _meta(rules.input_trim_bytes, omitted)
    return part.model_copy(update={"arguments": out}), tuple(omitted)


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
) -> tuple[Part | None, tuple[Omitted, ...]]:
    """The result as the placeholder when a field is large (None: none is), and what
    the fields were."""
    fields = None if compacted(part) else result_fields(part)
    if fields is None:
        return None, ()
    threshold = rules.output_trim_bytes
    _, omitted = _omit(fields, threshold, (), part.call_id, "result", memo(part))
    if not omitted:
        return None, ()
    meta = _meta(threshold, omitted)
    return _replaced(part, placeholder(tool, part.call_id), meta), tuple(omitted)


# What a placeholder of the message at an index, for a call id, says besides (the recall tool).
Note = Callable[[int, str], str]


def _noted(part: Part, note: Note | None, index: int) -> Part:
    if note is None or not isinstance(part, ToolResultPart) or not isinstance(part.content, str):
        return part
    added = note(index, part.call_id)
    return part.model_copy(update={"content": part.content + added}) if added else part


def compact_tool_payloads(
    messages: Sequence[Message],
    rules: PayloadRules,
    keep: frozenset[int] = frozenset(),
    note: Note | None = None,
) -> Compaction:
    """``messages`` with older tool payloads compacted (the input is left as it is).

    ``keep``: indexes of messages never compacted (their calls still count as the newest of
    their groups); ``note``: what a result's placeholder adds. Never raises on odd payloads:
    they are left as they are.
    """
    places = _index(messages, rules)
    parts = {i: list(m.content) for i, m in enumerate(messages)}
    omitted: dict[int, list[Omitted]] = {}
    for i, j in _plan(messages, rules, keep):
        part = parts[i][j]
        # The compacted part depends on the part and these rules alone: worked out once.
        if isinstance(part, ToolCallPart):
            keep_fields = tuple(rules.identifier_fields.get(part.name, ()))
            key: Any = ("call", rules.input_trim_bytes, keep_fields)
            new, lost = remembered(memo(part), key, partial(_compact_call, part, rules))
        elif isinstance(part, ToolResultPart):
            tool = places[i, j].name
            key = ("result", rules.output_trim_bytes, tool)
            new, lost = remembered(memo(part), key, partial(_compact_result, part, tool, rules))
        else:  # pragma: no cover - places hold only tool parts
            continue
        if new is None:  # left as it is
            continue
        parts[i][j] = _noted(new, note, i)
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
    messages: Sequence[Message],
    rules: PayloadRules,
    keep: frozenset[int] = frozenset(),
    note: Note | None = None,
) -> Compaction:
    """``messages`` with each older untouched result whose text equals a newer untouched
    result's replaced by a reference to the newer call (excluded tools aside; ``note``: what
    the reference adds)."""
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
            sha, size = text_digest(part, text)
            newer = newest.setdefault(sha, part.call_id)
            if newer == part.call_id or i in keep:
                continue
            lost = Omitted(part.call_id, "result", CONTENT_FIELD, size, sha, text)
            meta = {"sameAs": newer, "bytes": lost.bytes, "sha256": sha}
            replaced = _replaced(part, same_as(call.name, part.call_id, newer), meta)
            parts[i][j] = _noted(replaced, note, i)
            omitted.setdefault(i, []).append(lost)
    return _compaction(messages, parts, omitted)


def text_digest(part: ToolResultPart, text: str) -> tuple[str, int]:
    """The sha256 and byte size of a result's ``text`` (its ``fresh_text``), remembered."""
    space = memo(part)
    return remembered(space, "text", lambda: (payload_sha256(text), payload_size(text)))


def compacted(part: ToolResultPart) -> bool:
    """True for a result a compaction step rewrote already (in this view or when stored)."""
    return META_KEY in part.metadata or PREVIEW_KEY in part.metadata
