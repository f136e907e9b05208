"""A compaction's loss report: what its summary kept, merged, replaced and dropped.

A ledger summary is made of typed entries (a goal, a rule, a fact and its current value...), each
from messages of the history (their seqs: the pointers into the live history or the
compaction's archive, where what a summary left out stays reachable). Merging a summary with the
previous one sorts every entry into one of four outcomes:

- ``kept``: in the new summary as it was said (new, or carried over unchanged);
- ``merged``: in the new summary, folded with an entry saying the same of the same subject;
- ``replaced``: not in the new summary, because a later entry gave the same subject a new value;
- ``dropped``: not in the new summary, for want of room (ranked below what fitted).
"""

from __future__ import annotations

from dataclasses import dataclass, field

OUTCOMES = ("kept", "merged", "replaced", "dropped")
TEXT_CHARS = 120  # an entry's text in a report: its head


@dataclass(frozen=True)
class LossEntry:
    """One ledger entry in a loss report: its kind (goal, rule, fact, ...), the head of its text
    and the seqs of the messages it came from."""

    kind: str
    text: str
    seqs: tuple[int, ...] = ()

    def as_json(self) -> dict[str, object]:
        return {"kind": self.kind, "text": self.text[:TEXT_CHARS], "seqs": list(self.seqs)}


@dataclass(frozen=True)
class Loss:
    """Every entry a summary considered, by outcome."""

    kept: tuple[LossEntry, ...] = ()
    merged: tuple[LossEntry, ...] = ()
    replaced: tuple[LossEntry, ...] = ()
    dropped: tuple[LossEntry, ...] = ()
    notes: tuple[str, ...] = field(default=())

    def counts(self) -> dict[str, int]:
        """How many entries had each outcome (what ``compaction`` events carry)."""
        return {name: len(getattr(self, name)) for name in OUTCOMES}

    def as_json(self) -> dict[str, object]:
        """The report as stored on the compaction record."""
        out: dict[str, object] = {n: [e.as_json() for e in getattr(self, n)] for n in OUTCOMES}
        return {**out, "counts": self.counts(), "notes": list(self.notes)}
