"""Trimming decorators: ``token_limit`` and ``window``.

Both work on API rounds (see ``api_rounds``) and keep or drop a round whole. Some rounds are
always kept and never count against a window: a round holding a pinned message
(``metadata.pinned`` truthy), a ``summary`` message, or an injected message (ephemeral documents
and context providers, seq 0). Of the other rounds both keep an order-preserving suffix: walking
back from the newest, they stop at the first round that does not fit, never skipping a big round
to keep older small ones. Output keeps the inner compiler's order.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Annotated

from pydantic import Field

from app.domain.compilers.base import Compiled, Compiler, Item, LeftOut, Snapshot
from app.domain.errors import DomainError, InvalidInput
from app.domain.messages import SUMMARY_SECTION
from app.domain.validity.anthropic_turns import CONTINUATION, opens_with_assistant

Round = list[Item]


class BudgetTooSmall(DomainError):
    """Even the newest API round, with what must be kept, does not fit the token budget."""

    def __init__(self, needed: int, budget: int) -> None:
        super().__init__(
            f"the newest API round and the messages that must be kept need {needed} tokens; "
            f"the budget is {budget}"
        )
        self.needed = needed
        self.budget = budget


def kept_always(round_: Round) -> bool:
    """True for a round trimming never drops: it holds a pinned, summary or injected message."""
    return any(i.pinned or i.injected or i.section == SUMMARY_SECTION for i in round_)


def _tokens(rounds: Sequence[Round]) -> int:
    return sum(item.tokens for round_ in rounds for item in round_)


def _select(rounds: Sequence[Round], keep: set[int], reason: str) -> tuple[list[Item], LeftOut]:
    kept = [item for n, round_ in enumerate(rounds) if n in keep for item in round_]
    dropped = tuple(item.seq for n, r in enumerate(rounds) if n not in keep for item in r)
    return kept, LeftOut(reason, dropped)


def _free(rounds: Sequence[Round]) -> list[int]:
    """Indexes of the rounds trimming may drop, newest first."""
    return [n for n in reversed(range(len(rounds))) if not kept_always(rounds[n])]


def trim_target(total: int, budget: int, low_water: float | None) -> int:
    """How many tokens to trim down to when ``total`` exceeds ``budget``.

    Without ``low_water``: the budget. With it, the cut moves in steps of
    ``(1 - low_water) * budget`` tokens, counted from the oldest message: the target lands between
    about ``low_water * budget`` and ``budget``, and as a conversation grows the same old rounds
    stay dropped until it has grown by a whole step, so the prompt prefix stays byte-stable.
    """
    if low_water is None:
        return budget
    step = max(1, budget - math.floor(low_water * budget))
    return total - math.ceil((total - budget) / step) * step


def trim_rounds(
    rounds: Sequence[Round], budget: int, claimed: int = 0, low_water: float | None = None
) -> set[int]:
    """Indexes of the rounds kept within ``budget`` (``claimed`` tokens are already spent)."""
    free = _free(rounds)
    keep = set(range(len(rounds))) - set(free)
    total = claimed + _tokens(rounds)
    if total <= budget:
        return set(range(len(rounds)))
    used = claimed + _tokens([rounds[n] for n in keep])
    # The newest round must be sent (it is the turn being answered), unless it is kept anyway.
    newest = free[0] if free and free[0] == len(rounds) - 1 else None
    needed = used + (_tokens([rounds[newest]]) if newest is not None else 0)
    if needed > budget:
        raise BudgetTooSmall(needed, budget)
    target = trim_target(total, budget, low_water)
    for n in free:
        cost = _tokens([rounds[n]])
        if used + cost > target and n != newest:
            break
        keep.add(n)
        used += cost
    return keep


def continuation_tokens(snapshot: Snapshot) -> int:
    """Tokens of the user turn Anthropic's shape puts before a view that opens with an assistant
    turn (``anthropic_turns.CONTINUATION``); 0 for other targets."""
    return snapshot.count(CONTINUATION) if snapshot.target == "anthropic" else 0


def _budget(snapshot: Snapshot, max_tokens: int | None, reserve: int) -> int | None:
    if max_tokens is not None:
        return max_tokens
    return None if snapshot.budget is None else snapshot.budget - reserve


def token_limit(
    inner: Compiler,
    max_tokens: Annotated[int, Field(ge=1)] | None = None,
    reserve: Annotated[int, Field(ge=0)] = 4096,
    low_water: Annotated[float, Field(gt=0, lt=1)] | None = None,
) -> Compiler:
    """Keep the newest rounds that fit ``max_tokens`` (or the snapshot budget minus ``reserve``).

    Everything in the inner view counts, injected messages included, plus ``snapshot.claimed``
    and the turn the target adds when the view opens with an assistant turn (claimed whenever
    trimming, since which round ends up first is not known in advance).
    """

    def compile_token_limit(snapshot: Snapshot) -> Compiled:
        compiled = inner(snapshot)
        budget = _budget(snapshot, max_tokens, reserve)
        if budget is None:
            return compiled.then(compiled.items, warnings=["token_limit: no budget; kept all"])
        lead = continuation_tokens(snapshot)
        opening = lead if opens_with_assistant(i.message for i in compiled.items) else 0
        if snapshot.claimed + opening + compiled.tokens <= budget:
            return compiled  # the common case: no need to group rounds
        rounds = snapshot.rounds(compiled.items)
        keep = trim_rounds(rounds, budget, snapshot.claimed + lead, low_water)
        return compiled.then(*_select(rounds, keep, "token_limit"))

    return compile_token_limit


def _last_messages(rounds: Sequence[Round], free: list[int], limit: int) -> set[int]:
    keep: set[int] = set()
    used = 0
    for n in free:
        if used + len(rounds[n]) > limit and n != free[0]:
            break
        keep.add(n)
        used += len(rounds[n])
    return keep


def _too_big(size: int, messages: int) -> str:
    return (
        f"window: the newest API round has {size} messages, more than messages={messages}; "
        "it was kept whole"
    )


def window(
    inner: Compiler,
    messages: Annotated[int, Field(ge=1)] | None = None,
    rounds: Annotated[int, Field(ge=1)] | None = None,
) -> Compiler:
    """The last ``messages`` messages or the last ``rounds`` API rounds, never splitting a round.

    The newest round is always kept, even when it alone has more than ``messages`` messages.
    """
    if (messages is None) == (rounds is None):
        raise InvalidInput([((), "give exactly one of messages or rounds")])

    def compile_window(snapshot: Snapshot) -> Compiled:
        compiled = inner(snapshot)
        grouped = snapshot.rounds(compiled.items)
        free = _free(grouped)
        keep = set(range(len(grouped))) - set(free)
        if messages is None:
            return compiled.then(*_select(grouped, keep | set(free[:rounds]), "window"))
        keep |= _last_messages(grouped, free, messages)
        newest = len(grouped[free[0]]) if free else 0
        warnings = [] if newest <= messages else [_too_big(newest, messages)]
        return compiled.then(*_select(grouped, keep, "window"), warnings=warnings)

    return compile_window
