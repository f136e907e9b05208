"""Repairs on canonical messages so that every target request built from them is valid.

A *round* is an assistant message with the messages that answer its tool calls: tool messages
and user messages holding results, up to the next message that is neither (a user message with
other content closes the round once its results are read). Results outside their call's round and
calls without a result in their round are dropped. Duplicate call ids are renamed (in the call and
the results of its round): across the request for Anthropic, within a message for OpenAI.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Final, Literal

from app.domain.messages import Message, Part, ToolCallPart, ToolResultPart
from app.domain.validity.fitting import fit_message
from app.domain.validity.targets import (
    ANTHROPIC_ID,
    Target,
    has_content_besides_results,
    sendable,
)

Entry = tuple[int, Message]
Boundary = Literal["start", "close", "none"]

_ID_CHAR: Final = re.compile(r"[^A-Za-z0-9_-]")


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
    warnings: list[str] = []
    entries = [(i, fit_message(i, message, target, warnings)) for i, message in enumerate(messages)]
    # Renaming ids and pairing results keep every message's boundary: computed once.
    kinds = [boundary(message, target) for _, message in entries]
    entries = _rename_ids(entries, kinds, target, prior_call_ids, warnings)
    entries = _pair(entries, kinds, prior_call_ids, warnings)
    return _drop_unsendable(entries, target, warnings), warnings


def boundary(message: Message, target: Target) -> Boundary:
    """How ``message`` bears on rounds: it starts one, closes one, or neither."""
    if not sendable(message, target):
        return "none"  # it will be dropped, so it must not split a round
    if message.role == "assistant":
        return "start"
    if message.role == "tool" or (message.role == "system" and target == "anthropic"):
        return "none"  # Anthropic moves system messages out of the turns
    if message.role == "system":
        return "close"
    return "close" if has_content_besides_results(message, target) else "none"


# Duplicate (and, for Anthropic, malformed) tool call ids


def _rename_ids(
    entries: list[Entry],
    kinds: list[Boundary],
    target: Target,
    prior: frozenset[str],
    warnings: list[str],
) -> list[Entry]:
    taken = _Taken(prior, entries)
    # Anthropic wants tool_use ids unique in the whole request; OpenAI pairs tool messages with
    # the assistant message right before them, so there ids need only be unique per message
    # (real OpenAI histories do reuse ids across rounds).
    seen = set(prior)
    # Per round: original call id -> the ids its results should answer, in order.
    pending: dict[str, list[str]] = {cid: [cid] for cid in prior}
    out: list[Entry] = []
    for (i, message), kind in zip(entries, kinds, strict=True):
        if kind == "start":
            pending = {}
            if target == "openai":
                seen = set()
            message = _rename_calls(i, message, target, seen, taken, pending, warnings)
        else:
            message = _rename_results(message, pending)
            if kind == "close":
                pending = {}
        out.append((i, message))
    return out


class _Taken:
    """Every id in the request, gathered on first use (most requests need no new id)."""

    def __init__(self, prior: frozenset[str], entries: list[Entry]) -> None:
        self._prior, self._entries, self._ids = prior, entries, set[str]()
        self._gathered = False

    def ids(self) -> set[str]:
        if not self._gathered:
            self._ids |= self._prior | {cid for _, m in self._entries for cid in _ids(m)}
            self._gathered = True
        return self._ids


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
        malformed = target == "anthropic" and not ANTHROPIC_ID.fullmatch(part.id)
        if part.id in seen or malformed:
            new_id = _fresh_id(part.id, target, taken.ids())
            taken.ids().add(new_id)
            parts[j] = part.model_copy(update={"id": new_id})
            why = "a duplicate" if part.id in seen else "Anthropic ids are A-Z a-z 0-9 _ -"
            warnings.append(
                f"renamed tool call id {part.id!r} to {new_id!r} (message {index}): {why}"
            )
        seen.add(new_id)
        pending.setdefault(part.id, []).append(new_id)
    return _with_parts(message, parts)


def _fresh_id(call_id: str, target: Target, taken: set[str]) -> str:
    base = call_id if target == "openai" else (_ID_CHAR.sub("_", call_id) or "call")
    if base not in taken:
        return base
    n = 2
    while f"{base}__{n}" in taken:
        n += 1
    return f"{base}__{n}"


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
    entries: list[Entry], kinds: list[Boundary], prior: frozenset[str], warnings: list[str]
) -> list[Entry]:
    out = list(entries)
    current = _Round(calls={cid: "" for cid in prior})
    called: set[str] = set(prior)
    for pos, ((i, message), kind) in enumerate(zip(entries, kinds, strict=True)):
        if kind == "start":
            _close(out, current, warnings)
            current = _Round(pos, {c.id: c.name for c in message.tool_calls})
            called |= set(current.calls)
            continue
        if message.tool_results:
            out[pos] = (i, _answer(i, message, current, called, warnings))
        if kind == "close":
            _close(out, current, warnings)
            current = _Round()
    _close(out, current, warnings)
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


def _close(out: list[Entry], current: _Round, warnings: list[str]) -> None:
    """Drop the calls of the finished round that got no result (keeping the rest)."""
    if current.owner is None:
        return
    missing = [cid for cid in current.calls if cid not in current.answered]
    if not missing:
        return
    index, message = out[current.owner]
    for cid in missing:
        warnings.append(
            f"dropped tool call {cid!r} ({current.calls[cid]}) that has no result (message {index})"
        )
    kept = [p for p in message.content if not (isinstance(p, ToolCallPart) and p.id in missing)]
    out[current.owner] = (index, _with_parts(message, kept))


# Messages with nothing left to send


def _drop_unsendable(entries: list[Entry], target: Target, warnings: list[str]) -> list[Entry]:
    out = []
    for i, message in entries:
        if sendable(message, target):
            out.append((i, message))
        elif message.content:
            warnings.append(f"dropped {message.role} message {i}: nothing in it reaches {target}")
        else:
            warnings.append(f"dropped empty {message.role} message (message {i})")
    return out


def _with_parts(message: Message, parts: list[Part]) -> Message:
    """``message`` with ``parts``; itself when nothing changed (no needless copies)."""
    content = tuple(parts)
    return (
        message if content == message.content else message.model_copy(update={"content": content})
    )
