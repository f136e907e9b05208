"""The repair step ``build`` puts right after every base compiler.

It repairs the base view for the snapshot's target (``validity.repair``: parts the target refuses
dropped or adjusted, calls and results paired within their round, duplicate ids renamed) and
recounts what changed, before any decorator runs. Decorators then count messages as the target
will receive them, and the rounds they keep or drop whole are the rounds the repairs pair calls
in, so trimming never orphans a call or a result and the compile's final repair has nothing left
to change in the stored history. Messages with nothing left to send are left out with reason
``invalid``; each change is a warning.
"""

from __future__ import annotations

from app.domain.compilers.base import Compiled, Compiler, LeftOut, Snapshot
from app.domain.validity.repair import repair

INVALID = "invalid"


def repaired(inner: Compiler) -> Compiler:
    """``inner``'s view repaired for ``snapshot.target`` (as it is without a target)."""

    def compile_repaired(snapshot: Snapshot) -> Compiled:
        compiled = inner(snapshot)
        if snapshot.target is None:
            return compiled
        items = compiled.items
        messages = [i.message for i in items]
        entries, warnings = repair(messages, snapshot.target, snapshot.prior_call_ids)
        kept = [snapshot.refit(items[n], message) for n, message in entries]
        sent = {n for n, _ in entries}
        gone = tuple(item.seq for n, item in enumerate(items) if n not in sent)
        return compiled.then(kept, LeftOut(INVALID, gone), warnings=warnings)

    return compile_repaired
