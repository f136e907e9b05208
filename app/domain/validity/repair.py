"""Repairs on canonical messages so that every target request built from them is valid.

A *round* is an assistant message with the messages that answer its tool calls: tool messages
and user messages holding results, up to the next message that is neither (a user message with
other content closes the round once its results are read). Results outside their call's round and
calls without a result in their round are dropped. Duplicate call ids are renamed (in the call and
the results of its round): across the request for Anthropic and Responses (which pairs an
output with its call by id alone), within a message for Chat Completions.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Final

from app.domain.formats.targets import Target
from app.domain.messages import Message, Part, ToolCallPart, ToolResultPart
from app.domain.validity.fitting import fit_message
from app.domain.validity.responses_items import settle_reasoning
from app.domain.validity.targets import sendable
from app.domain.validity.untouched import (
    ACROSS,
    Boundary,
    Facts,
    boundary,
    facts,
    held,
    malformed,
    untouched,
)

Entry = tuple[int, Message]

_ID_CHAR: Final = re.compile(r"[^A-Za-z0-9_-]")
_MALFORMED: Final = {
    "anthropic": "Anthropic ids are A-Z a-z 0-9 _ -",
    "responses": "a Responses call_id is not empty",
}


def make_valid(
    messages: Sequence[Message],
    target: Target,
    *,
    prior_call_ids: frozenset[str] = frozenset(),
) -> tuple[list[Message], list[str]]:
    """Repaired messages for ``target`` and one warning per change; the input is left as is."""
    entries, warnings = repair(messages, target, prior_call_ids)
    return [message for _, message in entries], warnings


def repair(
    messages: Sequence[Message], target: Target, prior_call_ids: frozenset[str]
) -> tuple[list[Entry], list[str]]:
    """``make_valid`` keeping each message's index in the input (warnings cite it)."""
    entries, passes, _ = repair_passes(messages, target, prior_call_ids)
    return entries, [warning for found in passes for warning in found]


@dataclass(frozen=True)
class Earlier:
    """What the repairs of ``messages`` need to know of earlier messages of the same view that
    they are not given (a compile reading only the newest part of a long history).

    ``calls``: call ids, as repaired, that earlier rounds made (duplicates for Anthropic; a
    result answering one is "not in the round of its call"). ``ids``: every id the earlier
    messages hold, of those ``checked``; a new id is made only from checked candidates, since
    one outside them might be taken (``Unknowable``). ``whole``: the earlier messages are all
    known (``ids`` holds every id), so any candidate is checked.
    """

    calls: frozenset[str] = frozenset()
    ids: frozenset[str] = frozenset()
    checked: frozenset[str] = frozenset()
    whole: bool = False

    def then(self, found: Sequence[Facts]) -> Earlier:
        """This, followed by messages the repairs leave as they are, of ``found`` facts."""
        calls, ids = held(found)
        return Earlier(self.calls | calls, self.ids | ids, self.checked, self.whole)


class Unknowable(Exception):
    """The repairs need an earlier message they were not given (see ``Earlier``)."""


Passes = tuple[list[str], list[str], list[str], list[str]]


@dataclass(frozen=True)
class Ids:
    """The ids of a repaired view that later messages' repairs depend on (``Earlier``)."""

    calls: frozenset[str]  # the calls the rounds made, as renamed
    taken: frozenset[str]  # every id in it, new ones included


def repair_passes(
    messages: Sequence[Message],
    target: Target,
    prior_call_ids: frozenset[str],
    labels: Sequence[int] | None = None,
    earlier: Earlier | None = None,
    want_ids: bool = False,
) -> tuple[list[Entry], Passes, Ids | None]:
    """``repair``, its warnings kept per pass (fit, ids, pairing, unsendable): each pass warns in
    message order, so the warnings of two consecutive parts of a view merge pass by pass.
    ``labels``: the index each message is cited by (default: its index in ``messages``); with
    ``want_ids``, the view's ``Ids`` too. The part of the view they would leave as it is
    (``untouched``, one walk: often all of it) is returned as it is; only the rest goes through
    them, told of that part (``Earlier.then``)."""
    found = [facts(message, target) for message in messages]
    before = earlier or Earlier(whole=True)
    kept = untouched(found, target, prior_call_ids, before.calls)
    if kept == 0:
        return each_pass(messages, target, prior_call_ids, labels, earlier, want_ids)
    entries = list(enumerate(messages[:kept]))  # left as they are (often all of them)
    if kept == len(messages):
        return entries, ([], [], [], []), _held(found, prior_call_ids) if want_ids else None
    at = labels if labels is not None else range(len(messages))
    rest, passes, ids = each_pass(
        messages[kept:], target, prior_call_ids, at[kept:], before.then(found[:kept]), want_ids
    )
    entries += [(kept + i, message) for i, message in rest]
    if ids is not None:
        before_ids = _held(found[:kept], prior_call_ids)
        ids = Ids(before_ids.calls | ids.calls, before_ids.taken | ids.taken)
    return entries, passes, ids


def _held(found: Sequence[Facts], prior: frozenset[str]) -> Ids:
    """The ``Ids`` of messages the repairs leave as they are, of ``found`` facts."""
    calls, ids = held(found)
    return Ids(calls, ids | prior)


def each_pass(
    messages: Sequence[Message],
    target: Target,
    prior_call_ids: frozenset[str],
    labels: Sequence[int] | None = None,
    earlier: Earlier | None = None,
    want_ids: bool = False,
) -> tuple[list[Entry], Passes, Ids | None]:
    """``repair_passes`` without asking first whether they would change anything."""
    at = labels if labels is not None else range(len(messages))
    passes: Passes = ([], [], [], [])
    entries = [(i, fit_message(at[i], m, target, passes[0])) for i, m in enumerate(messages)]
    # Renaming ids and pairing results keep every message's boundary: computed once.
    kinds = [boundary(message, target) for _, message in entries]
    fitted = entries
    entries = _rename_ids(entries, kinds, target, prior_call_ids, passes[1], at, earlier)
    ids = _view_ids(fitted, entries, kinds, prior_call_ids) if want_ids else None
    entries = _pair(entries, kinds, prior_call_ids, passes[2], at, earlier)
    if target == "responses":
        entries = settle_reasoning(entries, passes[3], at)
    return _drop_unsendable(entries, target, passes[3], at), passes, ids


def _view_ids(
    fitted: list[Entry], renamed: list[Entry], kinds: list[Boundary], prior: frozenset[str]
) -> Ids:
    """The calls the rounds make (as renamed) and every id, new ones included."""
    calls = {
        call.id
        for (_, message), kind in zip(renamed, kinds, strict=True)
        if kind == "start"
        for call in message.tool_calls
    }
    taken = {cid for _, message in [*fitted, *renamed] for cid in _ids(message)} | prior
    return Ids(frozenset(calls), frozenset(taken))


# Duplicate (and, for Anthropic, malformed) tool call ids


def _rename_ids(
    entries: list[Entry],
    kinds: list[Boundary],
    target: Target,
    prior: frozenset[str],
    warnings: list[str],
    at: Sequence[int],
    earlier: Earlier | None,
) -> list[Entry]:
    taken = _Taken(prior, entries, earlier)
    # Anthropic wants tool_use ids unique in the whole request; OpenAI pairs tool messages with
    # the assistant message right before them, and Gemini responses answer the call turn right
    # before them, so there ids need only be unique per message (real OpenAI histories do reuse
    # ids across rounds, and Gemini's made ids repeat in every turn calling the function).
    # Responses pairs outputs with calls by id anywhere in the input, as Anthropic does.
    seen = set(prior) | (set(earlier.calls) if earlier and target in ACROSS else set())
    # Per round: original call id -> the ids its results should answer, in order.
    pending: dict[str, list[str]] = {cid: [cid] for cid in prior}
    out: list[Entry] = []
    for (i, message), kind in zip(entries, kinds, strict=True):
        if kind == "start":
            pending = {}
            if target in ("openai", "gemini"):  # ids unique per message only
                seen = set()
            message = _rename_calls(at[i], message, target, seen, taken, pending, warnings)
        else:
            message = _rename_results(message, pending)
            if kind == "close":
                pending = {}
        out.append((i, message))
    return out


class _Taken:
    """Every id in the request, gathered on first use (most requests need no new id)."""

    def __init__(
        self, prior: frozenset[str], entries: list[Entry], earlier: Earlier | None
    ) -> None:
        self._prior, self._entries, self._ids = prior, entries, set[str]()
        self._earlier = earlier
        self._gathered = False

    def ids(self) -> set[str]:
        if not self._gathered:
            self._ids |= self._prior | {cid for _, m in self._entries for cid in _ids(m)}
            self._ids |= self._earlier.ids if self._earlier else set()
            self._gathered = True
        return self._ids

    def free(self, candidate: str) -> bool:
        """Whether ``candidate`` may be a new id (``Unknowable`` when earlier messages not given
        might hold it)."""
        if candidate in self.ids():
            return False
        earlier = self._earlier
        if earlier is not None and not earlier.whole and candidate not in earlier.checked:
            raise Unknowable(candidate)
        return True


def _ids(message: Message) -> list[str]:
    return [c.id for c in message.tool_calls] + [r.call_id for r in message.tool_results]


def _rename_calls(
    index: int,
    message: Message,
    target: Target,
    seen: set[str],
    taken: _Taken,
    pending: dict[str, list[str]],
    warnings: list[str],
) -> Message:
    parts = list(message.content)
    for j, part in enumerate(parts):
        if not isinstance(part, ToolCallPart):
            continue
        new_id = part.id
        if part.id in seen or malformed(part.id, target):
            new_id = _fresh_id(part.id, target, taken)
            taken.ids().add(new_id)
            parts[j] = part.model_copy(update={"id": new_id})
            why = "a duplicate" if part.id in seen else _MALFORMED[target]
            warnings.append(
                f"renamed tool call id {part.id!r} to {new_id!r} (message {index}): {why}"
            )
        seen.add(new_id)
        pending.setdefault(part.id, []).append(new_id)
    return _with_parts(message, parts)


def _fresh_id(call_id: str, target: Target, taken: _Taken) -> str:
    base = fresh_base(call_id, target)
    if taken.free(base):
        return base
    n = 2
    while not taken.free(f"{base}__{n}"):
        n += 1
    return f"{base}__{n}"


def fresh_base(call_id: str, target: Target) -> str:
    """What a renamed ``call_id`` is made from: itself, or for Anthropic its allowed form; the
    new id is this, or this with ``__2``, ``__3``... appended."""
    if target == "anthropic":
        return _ID_CHAR.sub("_", call_id) or "call"
    return call_id or "call" if target == "responses" else call_id


def _rename_results(message: Message, pending: dict[str, list[str]]) -> Message:
    if not message.tool_results:
        return message
    parts = list(message.content)
    for j, part in enumerate(parts):
        if isinstance(part, ToolResultPart) and pending.get(part.call_id):
            new_id = pending[part.call_id].pop(0)
            if new_id != part.call_id:
                parts[j] = part.model_copy(update={"call_id": new_id})
    return _with_parts(message, parts)


# Calls and results answer each other within their round


@dataclass
class _Round:
    owner: int | None = None  # position of the assistant entry; None for the prior calls
    calls: dict[str, str] = field(default_factory=dict)  # call id -> tool name
    answered: set[str] = field(default_factory=set)


def _pair(
    entries: list[Entry],
    kinds: list[Boundary],
    prior: frozenset[str],
    warnings: list[str],
    at: Sequence[int],
    earlier: Earlier | None,
) -> list[Entry]:
    out = list(entries)
    current = _Round(calls={cid: "" for cid in prior})
    called: set[str] = set(prior) | (set(earlier.calls) if earlier else set())
    for pos, ((i, message), kind) in enumerate(zip(entries, kinds, strict=True)):
        if kind == "start":
            _close(out, current, warnings, at)
            current = _Round(pos, {c.id: c.name for c in message.tool_calls})
            called |= set(current.calls)
            continue
        if message.tool_results:
            out[pos] = (i, _answer(at[i], message, current, called, warnings))
        if kind == "close":
            _close(out, current, warnings, at)
            current = _Round()
    _close(out, current, warnings, at)
    return out


def _answer(
    index: int, message: Message, current: _Round, called: set[str], warnings: list[str]
) -> Message:
    kept: list[Part] = []
    for part in message.content:
        if not isinstance(part, ToolResultPart):
            kept.append(part)
        elif part.call_id in current.answered:
            warnings.append(
                f"dropped a second tool result for call {part.call_id!r} (message {index})"
            )
        elif part.call_id in current.calls:
            current.answered.add(part.call_id)
            kept.append(part)
        elif part.call_id in called:
            warnings.append(
                f"dropped tool result for call {part.call_id!r} (message {index}): it is not in"
                " the round of its call"
            )
        else:
            warnings.append(
                f"dropped tool result for unknown call {part.call_id!r} (message {index})"
            )
    return _with_parts(message, kept)


def _close(out: list[Entry], current: _Round, warnings: list[str], at: Sequence[int]) -> None:
    """Drop the calls of the finished round that got no result (keeping the rest)."""
    if current.owner is None:
        return
    missing = [cid for cid in current.calls if cid not in current.answered]
    if not missing:
        return
    index, message = out[current.owner]
    for cid in missing:
        warnings.append(
            f"dropped tool call {cid!r} ({current.calls[cid]}) that has no result"
            f" (message {at[index]})"
        )
    kept = [p for p in message.content if not (isinstance(p, ToolCallPart) and p.id in missing)]
    out[current.owner] = (index, _with_parts(message, kept))


# Messages with nothing left to send


def _drop_unsendable(
    entries: list[Entry], target: Target, warnings: list[str], at: Sequence[int]
) -> list[Entry]:
    out = []
    for i, message in entries:
        if sendable(message, target):
            out.append((i, message))
        elif message.content:
            warnings.append(
                f"dropped {message.role} message {at[i]}: nothing in it reaches {target}"
            )
        else:
            warnings.append(f"dropped empty {message.role} message (message {at[i]})")
    return out


def _with_parts(message: Message, parts: list[Part]) -> Message:
    """``message`` with ``parts``; itself when nothing changed (no needless copies)."""
    content = tuple(parts)
    return (
        message if content == message.content else message.model_copy(update={"content": content})
    )
