"""What trimming keeps first, under any budget: after the rounds always kept (system, pinned,
summary and injected messages) and the newest round, the user message that round answers, then
the opening task, then the rest newest first (``decorators.token_limit``).

The prompt the newest round answers usually closes an older round (an assistant turn, its tool
results, then the user's next words): it is made a round of its own (``split_answered``) so it
can be kept without the older assistant turn. A prompt holding tool results too (Anthropic's
user turn) cannot be split off: its whole round is kept with it.
"""

from __future__ import annotations

from collections.abc import Sequence

from app.domain.compilers.base import (
    Elided,
    Item,
    NeedsHistory,
    is_prompt,
    kept_always,
    opening_task,
)

Round = list[Item]


def split_answered(rounds: Sequence[Round]) -> tuple[list[Round], int | None]:
    """``rounds`` with the prompt the newest round answers made a round of its own where that
    keeps calls and results paired, and the index of the round holding it (None: the newest
    round holds its prompt itself, there is none, or its round is kept anyway)."""
    out = list(rounds)
    if not out or any(is_prompt(i) for i in out[-1]):
        return out, None
    for n in reversed(range(len(out) - 1)):
        round_ = out[n]
        at = [k for k, item in enumerate(round_) if is_prompt(item)]
        if not at:
            continue
        if kept_always(round_):
            return out, None
        k = at[-1]
        if 0 < k == len(round_) - 1 and not round_[k].message.tool_results:
            return [*out[:n], round_[:k], [round_[k]], *out[n + 1 :]], n + 1
        return out, n
    return out, None


def first_kept(
    rounds: Sequence[Round], keep_task: bool, elided: Elided | None = None
) -> tuple[list[Round], list[int]]:
    """``rounds`` (``split_answered``) and the rounds kept first where the budget allows, in
    priority order: the prompt the newest round answers, then the opening task. ``elided``: the
    older part of the view was not given; ``NeedsHistory`` when that prompt may be in it."""
    out, answered = split_answered(rounds)
    if _maybe_elided(out, answered, elided):
        raise NeedsHistory()
    task = opening_task(out) if keep_task else None
    firsts = [n for n in (answered, task) if n is not None]
    return out, list(dict.fromkeys(firsts))


def _maybe_elided(rounds: Sequence[Round], answered: int | None, elided: Elided | None) -> bool:
    """Whether the prompt the newest round answers may be in the rounds of the view not given
    (the gap): none of the given rounds newer than the gap holds it."""
    if elided is None or not elided.gap or not rounds or any(is_prompt(i) for i in rounds[-1]):
        return False
    return answered is None or rounds[answered][0].seq < elided.upto
