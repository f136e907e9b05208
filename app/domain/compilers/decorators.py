"""Trimming decorators: ``token_limit`` and ``window``.

Both work on API rounds (see ``api_rounds``) and keep or drop a round whole. Some rounds are
always kept and never count against a window: a round holding a system message (the system
prompt a history carries), a pinned message (``metadata.pinned`` truthy), a ``summary`` message,
or an injected message (ephemeral documents and context providers, seq 0). ``token_limit`` then
keeps the newest round, the user message it answers and the opening task (``priorities``),
each cut to head and tail where it does not fit whole; ``window`` keeps the opening task
besides (``keep_task``, the default). Of the other rounds both keep an order-preserving
suffix: walking back from the newest, they stop at the first round that does not fit, never
skipping a big round to keep older small ones (``token_limit`` may send that round with its tool
results previewed: ``reduced``).
Output keeps the inner compiler's order.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Annotated

from pydantic import Field

from app.domain.compilers.base import (
    Compiled,
    Compiler,
    Elided,
    Item,
    LeftOut,
    NeedsHistory,
    Snapshot,
    is_prompt,
    kept_always,
    opening_task,
)
from app.domain.compilers.newest import fit_newest
from app.domain.compilers.priorities import first_kept
from app.domain.compilers.reduced import (
    Trim,
    first_warning,
    fit_first,
    reduce_boundary,
    swap_round,
)
from app.domain.errors import DomainError, InvalidInput
from app.domain.validity.anthropic_turns import CONTINUATION, opens_with_assistant

Round = list[Item]


class BudgetTooSmall(DomainError):
    """Even the newest API round, with what must be kept, does not fit the token budget."""

    def __init__(self, needed: int, budget: int, detail: str = "", of: str = "") -> None:
        what = f" ({detail})" if detail else ""
        super().__init__(
            f"the messages that must be sent need {needed} tokens{what}; "
            f"the budget is {budget} tokens{of}"
        )
        self.needed = needed
        self.budget = budget


def _tokens(rounds: Sequence[Round]) -> int:
    return sum(item.tokens for round_ in rounds for item in round_)


def _select(
    rounds: Sequence[Round], keep: set[int], reason: str, elided: Elided | None = None
) -> tuple[list[Item], LeftOut]:
    """The kept rounds' items, and the rest left out for ``reason`` (with the ``elided`` gap)."""
    kept = [item for n, round_ in enumerate(rounds) if n in keep for item in round_]
    dropped = tuple(item.seq for n, r in enumerate(rounds) if n not in keep for item in r)
    return kept, LeftOut(reason, dropped, elided.gap if elided else ())


class _Walk:
    """The walk trimming takes over the rounds it may drop, newest first, when the older part
    of the view was elided: it must stop before reaching that part (``NeedsHistory``)."""

    def __init__(self, rounds: Sequence[Round], elided: Elided | None) -> None:
        self.rounds, self.elided = rounds, elided

    def visit(self, n: int) -> None:
        """About to weigh round ``n``: beyond the elided gap if it is older than the tail."""
        if self.elided is not None and self.rounds[n][0].seq < self.elided.upto:
            raise NeedsHistory()

    def done(self) -> None:
        """The walk kept every round it was given: the next would be the elided gap's."""
        if self.elided is not None:
            raise NeedsHistory()


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


def _needs(rounds: Sequence[Round], keep: set[int], newest: int | None, claimed: int) -> str:
    """What the rounds that must be sent are made of, for a ``BudgetTooSmall`` message."""
    kept = [i for n in keep for i in rounds[n]]
    system = sum(i.tokens for i in kept if i.message.role == "system")
    parts = [
        ("system messages", system),
        ("pinned, summary and injected messages", sum(i.tokens for i in kept) - system),
        ("the newest API round", _tokens([rounds[newest]]) if newest is not None else 0),
        ("the system prompt, tools, reply priming and other claimed tokens", claimed),
    ]
    return ", ".join(f"{name} {tokens}" for name, tokens in parts if tokens)


def trim_rounds(
    rounds: Sequence[Round],
    budget: int,
    claimed: int = 0,
    low_water: float | None = None,
    firsts: Sequence[int] = (),
    of: str = "",
    elided: Elided | None = None,
    rest: bool = True,
) -> Trim:
    """The rounds kept within ``budget`` (``claimed`` tokens are already spent): those always
    kept, the newest, the ``firsts`` rounds in order while each fits whole beside them (from the
    first that does not, none: ``Trim.first_left_out``), then the newest that fit.
    ``elided``: older rounds of the view not given, which must be dropped (``_Walk``); without
    ``rest``, no other round is kept (one kept first was cut to fit: they come after it)."""
    free = _free(rounds)
    keep = set(range(len(rounds))) - set(free)
    walk = _Walk(rounds, elided)
    total = claimed + _tokens(rounds) + (elided.gap_tokens if elided else 0)
    if total <= budget:
        walk.done()
        return Trim(set(range(len(rounds))))
    used = claimed + _tokens([rounds[n] for n in keep])
    # The newest round must be sent (it is the turn being answered), unless it is kept anyway.
    newest = free[0] if free and free[0] == len(rounds) - 1 else None
    needed = used + (_tokens([rounds[newest]]) if newest is not None else 0)
    if needed > budget:
        raise BudgetTooSmall(needed, budget, _needs(rounds, keep, newest, claimed), of)
    left_first, room = None, 0
    for n in [n for n in firsts if _set_aside(free, n, newest) is not None]:
        cost = _tokens([rounds[n]])
        if left_first is None and needed + cost <= budget:
            keep.add(n)
            used, needed = used + cost, needed + cost
        elif left_first is None:
            left_first, room = n, budget - needed
    if not rest:
        return Trim(keep | ({newest} if newest is not None else set()), left_first, room)
    target = trim_target(total, budget, low_water)
    for n in free:
        walk.visit(n)
        cost = _tokens([rounds[n]])
        if used + cost > target and n != newest:
            return Trim(keep, left_first, room, n, target - used)
        keep.add(n)
        used += cost
    walk.done()
    return Trim(keep, left_first, room)


def _set_aside(free: list[int], task: int | None, newest: int | None) -> int | None:
    """Take a round kept first (the opening task's, say) out of ``free`` (the rounds trimmed
    newest first), unless it is kept anyway or is the ``newest`` round: the round set aside, or
    None."""
    if task is None or task not in free or task == newest:
        return None
    free.remove(task)
    return task


@dataclass(frozen=True)
class _Limits:
    """What token_limit trims to: ``trim_rounds``'s arguments but the rounds."""

    budget: int
    claimed: int
    low_water: float | None
    of: str
    elided: Elided | None
    rest: bool = True  # False once a round kept first was cut: nothing after it is kept

    def trim(self, rounds: Sequence[Round], firsts: Sequence[int]) -> Trim:
        return trim_rounds(
            rounds,
            self.budget,
            self.claimed,
            self.low_water,
            firsts,
            self.of,
            self.elided,
            self.rest,
        )


def _trim_first(
    snapshot: Snapshot,
    compiled: Compiled,
    rounds: list[Round],
    limits: _Limits,
    keep_task: bool,
) -> tuple[Compiled, list[Round], Trim, list[int]]:
    """``compiled`` (grouped in ``rounds``) trimmed with the rounds kept first
    (``priorities.first_kept``): one that does not fit whole is sent reduced to the room left
    for it (``reduced.fit_first``), else left out (the rounds left out so are returned last)."""
    rounds, firsts = first_kept(rounds, keep_task, limits.elided)
    dropped: list[int] = []
    for _ in range(2 * len(firsts)):
        trim = limits.trim(rounds, firsts)
        n = trim.first_left_out
        if n is None:
            return compiled, rounds, trim, dropped
        fitted = fit_first(snapshot, rounds[n], trim.first_room)
        if fitted is None:
            firsts.remove(n)
            dropped.append(n)
            continue
        warning = first_warning(rounds[n], trim.first_room, fitted[1])
        compiled, rounds = swap_round(compiled, rounds, n, fitted, warning)
        limits = replace(limits, rest=False)
    return compiled, rounds, limits.trim(rounds, firsts), dropped


def _dropped_warnings(
    rounds: Sequence[Round], dropped: Sequence[int], keep_task: bool
) -> list[str]:
    task = opening_task(rounds) if keep_task else None
    return [
        _task_warning("token_limit", rounds[n]) if n == task else _prompt_warning(rounds[n])
        for n in dropped
    ]


def _prompt_warning(round_: Round) -> str:
    seq = next(i.seq for i in round_ if is_prompt(i))
    return (
        f"token_limit: the prompt the newest round answers (seq {seq}, {_tokens([round_])} "
        "tokens with its round) does not fit beside the messages that must be sent, even cut "
        "to head and tail; it was left out"
    )


def _task_warning(name: str, round_: Round) -> str:
    seq = next(i.seq for i in round_ if is_prompt(i))
    return (
        f"{name}: the opening task (seq {seq}, {_tokens([round_])} tokens with its round) does "
        "not fit beside the messages that must be sent; it was left out"
    )


def continuation_tokens(snapshot: Snapshot) -> int:
    """Tokens of the user turn Anthropic's and Gemini's shapes put before a view that opens with
    an assistant turn (``anthropic_turns.CONTINUATION``); 0 for other targets."""
    return snapshot.count(CONTINUATION) if snapshot.target in ("anthropic", "gemini") else 0


# Room left for the reply when token_limit trims to a context window: 4096 tokens, or a quarter
# of a smaller window (so an 8k local model keeps 6k of history, not half of its window).
DEFAULT_RESERVE = 4096


def default_reserve(context_window: int) -> int:
    """The reserve ``token_limit`` leaves for the reply in ``context_window`` when none is set."""
    return min(DEFAULT_RESERVE, context_window // 4)


def _budget(snapshot: Snapshot, max_tokens: int | None, reserve: int | None) -> tuple[int, str]:
    """The budget, with what it is made of (for messages); the snapshot has a budget."""
    if max_tokens is not None:
        return _estimated(snapshot, max_tokens, " (token_limit's max_tokens)")
    window = snapshot.budget
    assert window is not None
    given = reserve is not None
    reserve = default_reserve(window) if reserve is None else reserve
    if reserve >= window:
        raise InvalidInput(
            [
                (
                    ("compiler",),
                    (
                        f"token_limit's reserve ({reserve} tokens) leaves no budget in a context "
                        f"window of {window} tokens; give a smaller reserve"
                    ),
                )
            ]
        )
    default = "" if given else " by default"
    return _estimated(
        snapshot,
        window - reserve,
        (f" (the context window, {window}, minus token_limit's reserve{default}, {reserve})"),
    )


def _estimated(snapshot: Snapshot, budget: int, of: str) -> tuple[int, str]:
    """A budget of the provider's tokens as estimated tokens (the same without a calibration)."""
    found = snapshot.calibration
    if found is None:
        return budget, of
    return found.budget(budget), f"{of[:-1]}, as estimated tokens at {found.factor}x)"


def token_limit(
    inner: Compiler,
    max_tokens: Annotated[int, Field(ge=1)] | None = None,
    reserve: Annotated[int, Field(ge=0)] | None = None,
    low_water: Annotated[float, Field(gt=0, lt=1)] | None = None,
    keep_task: bool = True,
    reduce: bool = True,
) -> Compiler:
    """Keep the newest rounds that fit ``max_tokens`` (or the snapshot budget minus ``reserve``,
    by default 4096 or a quarter of a smaller window).

    Everything in the inner view counts, injected messages included, plus ``snapshot.claimed``
    and the turn the target adds when the view opens with an assistant turn (claimed whenever
    trimming, since which round ends up first is not known in advance). System, pinned, summary
    and injected messages are always kept; then the newest round, the user message it answers
    and (with ``keep_task``) the opening task, each of the last two cut to head and tail where
    it does not fit whole (``priorities``, ``reduced.fit_first``). When the newest round does not
    fit beside what must be sent, its tool results are previewed (``newest.fit_newest``). With
    ``reduce``, the older round the walk stops at is sent with its tool results previewed where
    that makes it fit the room left (``reduced.reduce_boundary``), rather than dropped.
    """

    def compile_token_limit(snapshot: Snapshot) -> Compiled:
        compiled = inner(snapshot)
        elided = compiled.pending
        if max_tokens is None and snapshot.budget is None:
            return compiled.then(compiled.items, warnings=["token_limit: no budget; kept all"])
        budget, of = _budget(snapshot, max_tokens, reserve)
        lead = continuation_tokens(snapshot)
        opening = lead if opens_with_assistant(i.message for i in compiled.items) else 0
        if elided is not None and snapshot.claimed + compiled.tokens + elided.gap_tokens <= budget:
            raise NeedsHistory()  # all of it may fit (with the older part, whatever opens it)
        if snapshot.claimed + opening + compiled.tokens <= budget and elided is None:
            return compiled  # the common case: no need to group rounds
        rounds = snapshot.rounds(compiled.items)
        limits = _Limits(budget, snapshot.claimed + lead, low_water, of, elided)
        try:
            first = _trim_first(snapshot, compiled, rounds, limits, keep_task)
        except BudgetTooSmall as err:  # the turn being answered: preview its results to fit
            fitted = fit_newest(snapshot, compiled, rounds, err.needed - err.budget)
            if fitted is None:
                raise
            first = _trim_first(snapshot, fitted, snapshot.rounds(fitted.items), limits, keep_task)
        compiled, rounds, trim, dropped = first
        if reduce:
            compiled, rounds, trim = reduce_boundary(snapshot, compiled, rounds, trim)
        warnings = _dropped_warnings(rounds, dropped, keep_task)
        kept, left = _select(rounds, trim.keep, "token_limit", elided)
        return compiled.then(kept, left, warnings=warnings, pending=None)

    return compile_token_limit


def _last_messages(rounds: Sequence[Round], free: list[int], limit: int, walk: _Walk) -> set[int]:
    keep: set[int] = set()
    used = 0
    for n in free:
        walk.visit(n)
        if used + len(rounds[n]) > limit and n != free[0]:
            break
        keep.add(n)
        used += len(rounds[n])
    else:
        walk.done()
    return keep


def _last_rounds(free: list[int], count: int, walk: _Walk) -> set[int]:
    for n in free[:count]:
        walk.visit(n)
    if len(free) < count:
        walk.done()
    return set(free[:count])


def _too_big(size: int, messages: int) -> str:
    return (
        f"window: the newest API round has {size} messages, more than messages={messages}; "
        "it was kept whole"
    )


def window(
    inner: Compiler,
    messages: Annotated[int, Field(ge=1)] | None = None,
    rounds: Annotated[int, Field(ge=1)] | None = None,
    keep_task: bool = True,
) -> Compiler:
    """The last ``messages`` messages or the last ``rounds`` API rounds, never splitting a round;
    system, pinned, summary and injected messages (and with ``keep_task`` the opening task) are
    kept besides and do not count.

    The newest round is always kept, even when it alone has more than ``messages`` messages.
    """
    if (messages is None) == (rounds is None):
        raise InvalidInput([((), "give exactly one of messages or rounds")])

    def compile_window(snapshot: Snapshot) -> Compiled:
        compiled = inner(snapshot)
        elided = compiled.pending
        grouped = snapshot.rounds(compiled.items)
        free = _free(grouped)
        keep = set(range(len(grouped))) - set(free)
        newest = free[0] if free else None
        task = _set_aside(free, opening_task(grouped) if keep_task else None, newest)
        keep |= set() if task is None else {task}
        walk = _Walk(grouped, elided)
        if messages is None:
            assert rounds is not None
            kept, left = _select(grouped, keep | _last_rounds(free, rounds, walk), "window", elided)
            return compiled.then(kept, left, pending=None)
        keep |= _last_messages(grouped, free, messages, walk)
        newest = len(grouped[free[0]]) if free else 0
        warnings = [] if newest <= messages else [_too_big(newest, messages)]
        kept, left = _select(grouped, keep, "window", elided)
        return compiled.then(kept, left, warnings=warnings, pending=None)

    return compile_window
