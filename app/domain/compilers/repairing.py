"""The repair step ``build`` puts right after every base compiler.

It repairs the base view for the snapshot's target (``validity.repair``: parts the target refuses
dropped or adjusted, calls and results paired within their round, duplicate ids renamed) and
recounts what changed, before any decorator runs. Decorators then count messages as the target
will receive them, and the rounds they keep or drop whole are the rounds the repairs pair calls
in, so trimming never orphans a call or a result and the compile's final repair has nothing left
to change in the stored history. Messages with nothing left to send are left out with reason
``invalid``; each change is a warning.

Given only the newest part of a long history (``Snapshot.elided``), it adds what the base
compiler and the repairs made of the older part, as a compile of the whole history would: its
left-outs, and its warnings pass by pass, the newer part's cited by their place in the whole view.
"""

from __future__ import annotations

from collections.abc import Sequence

from app.domain.compilers.base import (
    Compiled,
    Compiler,
    Elided,
    Item,
    LeftOut,
    NeedsHistory,
    Snapshot,
)
from app.domain.validity.repair import Unknowable, repair_passes

INVALID = "invalid"
# The order base compilers report their left-outs in (``builtins``).
BASE_REASONS = {"section": 0, "trace": 1}


def repaired(inner: Compiler) -> Compiler:
    """``inner``'s view repaired for ``snapshot.target`` (as it is without a target)."""

    def compile_repaired(snapshot: Snapshot) -> Compiled:
        compiled = inner(snapshot)
        if snapshot.target is None:
            return compiled
        items = compiled.items
        elided = snapshot.elided
        labels = None if elided is None else view_labels(items, elided)
        messages = [i.message for i in items]
        try:
            entries, passes, _ = repair_passes(
                messages,
                snapshot.target,
                snapshot.prior_call_ids,
                labels,
                None if elided is None else elided.earlier,
            )
        except Unknowable:
            raise NeedsHistory() from None
        kept = [snapshot.refit(items[n], message) for n, message in entries]
        sent = {n for n, _ in entries}
        gone = tuple(item.seq for n, item in enumerate(items) if n not in sent)
        if elided is None:
            warnings = [warning for found in passes for warning in found]
            return compiled.then(kept, LeftOut(INVALID, gone), warnings=warnings)
        older = sorted([*elided.base_left_out, *compiled.left_out], key=_base_rank)
        merged = [
            w
            for before, now in zip(elided.warnings, passes, strict=True)
            for w in before + tuple(now)
        ]
        base = Compiled(compiled.items, tuple(older), compiled.warnings, compiled.steps)
        return base.then(
            kept, LeftOut(INVALID, gone, elided.invalid), warnings=merged, pending=elided
        )

    return compile_repaired


def _base_rank(entry: LeftOut) -> int:
    return BASE_REASONS.get(entry.reason, len(BASE_REASONS))


def view_labels(items: Sequence[Item], elided: Elided) -> list[int]:
    """Where each item of a view given only in part stands in the whole view: the items below
    seq ``elided.upto`` (the rounds read again) first, as given; the newer ones after all the
    messages of the older part, which they follow in the view only when they are all of the
    section it ends with."""
    older = sum(1 for item in items if item.seq < elided.upto)
    newer = items[older:]
    if any(item.seq < elided.upto for item in newer):
        raise NeedsHistory()  # a newer message goes before an older one: not the view's tail
    last = elided.last_section
    if last is not None and any(item.section != last for item in newer):
        raise NeedsHistory()
    return [*range(older), *(elided.view_count + n for n in range(len(newer)))]
