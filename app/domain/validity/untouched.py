"""Whether the repairs would leave a view as it is, found in one pass.

A compile repairs its view twice: the stored history right after the base compiler, then the
request it sends. Most views need nothing (an agent's history is valid, and the second repair
meets what the first one made), yet the repairs walk them pass after pass, asking each message
for its parts again and again. Here each message's facts for a target are gathered once and
kept beside it (``memo.per_value``), and one walk over them finds how much of the view no pass
would change: up to the round of the first message the target does not take as it is, call id
to rename, result outside the round of its call or second one, or call its round leaves
unanswered.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from app.domain.formats.targets import Target
from app.domain.memo import per_value
from app.domain.messages import Message
from app.domain.validity.fitting import fits_as_is
from app.domain.validity.responses_items import settled
from app.domain.validity.targets import ANTHROPIC_ID, has_content_besides_results, sendable

Boundary = Literal["start", "close", "none"]
# Targets that pair a result with its call by id anywhere in the request: a call id is unique
# in the whole request (elsewhere only within its message).
ACROSS = frozenset({"anthropic", "responses"})


@per_value
def boundary(message: Message, target: Target) -> Boundary:
    """How ``message`` bears on rounds: it starts one, closes one, or neither."""
    if not sendable(message, target):
        return "none"  # it will be dropped, so it must not split a round
    if message.role == "assistant":
        return "start"
    if message.role == "tool" or (message.role == "system" and target in ("anthropic", "gemini")):
        return "none"  # Anthropic and Gemini move system messages out of the turns
    if message.role == "system":
        return "close"
    return "close" if has_content_besides_results(message, target) else "none"


def malformed(call_id: str, target: Target) -> bool:
    """Whether ``target`` refuses ``call_id`` as a tool call id."""
    if target == "anthropic":
        return not ANTHROPIC_ID.fullmatch(call_id)
    return target == "responses" and not call_id


@dataclass(frozen=True, slots=True)
class Facts:
    """What the repairs ask of one message for a target."""

    kind: Boundary
    # The target takes it as it is (parts, name, reasoning followed by what it produced), it
    # reaches the target, and its call ids are well formed and distinct.
    clean: bool
    calls: tuple[str, ...]  # its tool call ids
    results: tuple[str, ...]  # the call ids its tool results answer

    @property
    def ids(self) -> tuple[str, ...]:
        return self.calls + self.results


@per_value
def facts(message: Message, target: Target) -> Facts:
    """``message``'s ``Facts`` for ``target``."""
    calls = tuple(c.id for c in message.tool_calls)
    clean = (
        fits_as_is(message, target)
        and sendable(message, target)
        and len(set(calls)) == len(calls)
        and not any(malformed(c, target) for c in calls)
        and (target != "responses" or settled(message))
    )
    results = tuple(r.call_id for r in message.tool_results)
    return Facts(boundary(message, target), clean, calls, results)


def held(found: Sequence[Facts]) -> tuple[frozenset[str], frozenset[str]]:
    """The calls the rounds of ``found`` make (their assistant messages') and every id they
    hold."""
    calls = frozenset(call for fact in found if fact.kind == "start" for call in fact.calls)
    return calls, frozenset(cid for fact in found for cid in fact.ids)


def untouched(
    found: Sequence[Facts], target: Target, prior: frozenset[str], earlier_calls: frozenset[str]
) -> int:
    """How many of the messages of ``found`` the repairs leave as they are, with no warning: all
    of them, or those before the round in which the first change falls (0 when it falls in the
    first). The repairs of the rest depend on those only through what ``repair.Earlier.then``
    tells them.

    ``prior``: the calls the provider holds (the view may open with their results);
    ``earlier_calls``: the calls earlier rounds of the view made, as repaired."""
    seen = set(prior) | earlier_calls if target in ACROSS else set()
    open_calls = set(prior)  # the current round's calls not answered yet
    owned = False  # the current round has a call turn (prior calls may stay unanswered)
    # Where the current round starts: a clean assistant message, so a start once fitted too (a
    # message the fitting changes may not be: one left empty joins the round before it).
    start = 0
    for n, fact in enumerate(found):
        if not fact.clean:
            return start
        if fact.kind == "start":
            if owned and open_calls:
                return start  # the round closed with a call unanswered
            if target in ACROSS:
                if not seen.isdisjoint(fact.calls):
                    return n  # a call id to rename, in the round it starts
                seen.update(fact.calls)
            start, open_calls, owned = n, set(fact.calls), True
            continue
        for call_id in fact.results:
            if call_id not in open_calls:
                return start  # answered twice, outside its round, or unknown
            open_calls.remove(call_id)
        if fact.kind == "close":
            if owned and open_calls:
                return start
            open_calls, owned = set(), False
    return start if owned and open_calls else len(found)
