"""Digests: what a compile takes from the older part of a long history, kept between compiles
so that a compile reads only the newest part (``base.Elided``).

A session compile that trims sends the newest rounds that fit, and besides them only the rounds
trimming keeps anyway (system, pinned and summary messages) and the opening task. Yet its answer
says things of the whole history: what the base compiler left out (other sections, other
executions' traces), what the repairs changed and left out, with warnings citing each message by
its place in the view. A digest of the history below seq ``upto`` holds exactly that for one base
compiler, target and encoding, as a compile of the whole history would compute it, plus which
older rounds must still be read (``needed``) and the ``gap``: the other older rounds, with their
tokens. With it a compile reads the needed rows and the rows from ``upto`` on.

It is exact because ``upto`` opens a round that the repairs can read on its own (an assistant
turn, or a user turn without tool results): the repairs of everything before it do not depend on
what comes after (``repair_passes`` warns pass by pass in message order), and those after it
depend on what came before only through the tool call ids (``repair.Earlier``). A digest is
built by a compile that read the whole history and moved forward by later compiles; a compaction
rewrites the history and drops the session's digests.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence, Set
from dataclasses import dataclass, field, replace
from typing import Any

from app.domain.compilers.base import (
    Compiler,
    Elided,
    Item,
    LeftOut,
    NeedsHistory,
    Ranges,
    Snapshot,
    api_rounds,
    is_prompt,
    kept_always,
    left_out_by_reason,
    merged,
    seq_ranges,
)
from app.domain.compilers.repairing import view_labels
from app.domain.formats.targets import Target
from app.domain.messages import Message
from app.domain.validity.repair import (
    Earlier,
    Ids,
    Unknowable,
    fresh_base,
    repair_passes,
)
from app.domain.validity.untouched import boundary

PASSES = 4
NOTHING_EARLIER = Earlier()


@dataclass(frozen=True)
class Digest:
    """The older part of a history below seq ``upto``, as a compile of all of it sees it."""

    upto: int
    view_count: int
    base_left_out: tuple[tuple[str, Ranges], ...]
    invalid: Ranges
    gap: Ranges
    gap_tokens: int
    warnings: tuple[tuple[str, ...], ...]  # per repair pass
    needed: Ranges  # the rounds kept anyway and the opening task's, to read with the tail
    traces: frozenset[str]  # the executions trace messages below ``upto`` belong to
    execution_id: str | None  # the execution whose traces the view shows
    last_section: str | None  # of the last message below ``upto`` in the view
    # Per id an id below ``upto`` ends with ``__<n>``: the highest such n (renames take the next).
    suffixes: dict[str, int] = field(default_factory=dict)

    def serves(self, execution_id: str | None) -> bool:
        """Whether a compile for ``execution_id`` sees the same older messages (it shows the
        same traces below ``upto``)."""
        if execution_id == self.execution_id:
            return True
        return execution_id not in self.traces and self.execution_id not in self.traces

    def elided(self, earlier: Earlier) -> Elided:
        left = tuple(LeftOut(reason, (), ranges) for reason, ranges in self.base_left_out)
        return Elided(
            upto=self.upto,
            view_count=self.view_count,
            base_left_out=left,
            invalid=self.invalid,
            gap=self.gap,
            gap_tokens=self.gap_tokens,
            warnings=self.warnings,
            last_section=self.last_section,
            earlier=earlier,
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "upto": self.upto,
            "view_count": self.view_count,
            "base_left_out": [[reason, _listed(r)] for reason, r in self.base_left_out],
            "invalid": _listed(self.invalid),
            "gap": _listed(self.gap),
            "gap_tokens": self.gap_tokens,
            "warnings": [list(w) for w in self.warnings],
            "needed": _listed(self.needed),
            "traces": sorted(self.traces),
            "execution_id": self.execution_id,
            "last_section": self.last_section,
            "suffixes": self.suffixes,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Digest:
        return cls(
            upto=data["upto"],
            view_count=data["view_count"],
            base_left_out=tuple((r, _ranges(x)) for r, x in data["base_left_out"]),
            invalid=_ranges(data["invalid"]),
            gap=_ranges(data["gap"]),
            gap_tokens=data["gap_tokens"],
            warnings=tuple(tuple(w) for w in data["warnings"]),
            needed=_ranges(data["needed"]),
            traces=frozenset(data["traces"]),
            execution_id=data["execution_id"],
            last_section=data["last_section"],
            suffixes=dict(data["suffixes"]),
        )


def _listed(ranges: Ranges) -> list[list[int]]:
    return [[first, last] for first, last in ranges]


def _ranges(data: Sequence[Sequence[int]]) -> Ranges:
    return tuple((int(first), int(last)) for first, last in data)


def within(seq: int, ranges: Ranges) -> bool:
    return any(first <= seq <= last for first, last in ranges)


@dataclass(frozen=True)
class _View:
    """The base view of some items, repaired: what a digest is made of."""

    items: tuple[Item, ...]  # repaired, in view order
    last_section: str | None  # of the last message in the view from ``prior.upto`` on
    changed: frozenset[int]  # seqs the repairs changed
    invalid: tuple[int, ...]
    count: int  # base view items before the repairs
    left_out: tuple[LeftOut, ...]
    warnings: tuple[tuple[str, ...], ...]
    ids: Ids


def _view(
    snapshot: Snapshot, base: Compiler, target: Target, prior: Digest | None, earlier: Earlier
) -> _View:
    compiled = base(snapshot)
    items = compiled.items
    labels = None
    last = prior.last_section if prior is not None else None
    if prior is not None:
        labels = view_labels(items, prior.elided(NOTHING_EARLIER))
    newer = [i.section for i in items if prior is None or i.seq >= prior.upto]
    last = newer[-1] if newer else last
    messages = [i.message for i in items]
    entries, passes, ids = repair_passes(
        messages, target, frozenset(), labels, None if prior is None else earlier, want_ids=True
    )
    assert ids is not None
    repaired = tuple(snapshot.refit(items[n], message) for n, message in entries)
    changed = frozenset(items[n].seq for n, m in entries if m is not items[n].message)
    sent = {n for n, _ in entries}
    invalid = tuple(item.seq for n, item in enumerate(items) if n not in sent)
    return _View(
        repaired,
        last,
        changed,
        invalid,
        len(items),
        compiled.left_out,
        tuple(tuple(found) for found in passes),
        ids,
    )


def _opens_alone(message: Message, target: Target) -> bool:
    """Whether a round opening with ``message`` is repaired the same whatever came before it:
    an assistant turn, or a turn that closes rounds and answers no call."""
    kind = boundary(message, target)
    return kind == "start" or (kind == "close" and not message.tool_results)


def _needed(rounds: Sequence[Sequence[Item]]) -> list[int]:
    """Indexes of the rounds a compile reads besides the tail: those trimming keeps anyway and
    the opening task's (the first holding a prompt)."""
    found = [n for n, round_ in enumerate(rounds) if kept_always(round_)]
    task = next((n for n, r in enumerate(rounds) if any(is_prompt(i) for i in r)), None)
    return sorted({*found, *([] if task is None else [task])})


def extend(
    prior: Digest | None,
    items: Sequence[Item],
    base: Compiler,
    snapshot: Snapshot,
    keep_tokens: int,
    earlier: Earlier = NOTHING_EARLIER,
) -> tuple[Digest, Ids] | None:
    """A digest moved forward (or made, without ``prior``) so that at least ``keep_tokens``
    tokens of the view's rounds stay after it, with the ids of the part it added (what
    ``Earlier`` is made of); None when there is no such place, or when the older part cannot be
    summed up exactly.

    ``items``: every stored item from ``prior.upto`` on (from the start without ``prior``), and
    with a ``prior`` its needed rounds first. ``snapshot`` gives the execution, target and count.
    """
    target = snapshot.target
    assert target is not None
    try:
        whole = _view(
            replace(snapshot, items=tuple(items), elided=None), base, target, prior, earlier
        )
        upto = _split(whole, target, keep_tokens, 0 if prior is None else prior.upto)
        if upto is None:
            return None
        older = tuple(i for i in items if i.seq < upto)
        part = _view(replace(snapshot, items=older, elided=None), base, target, prior, earlier)
    except (Unknowable, NeedsHistory):
        return None
    digest = _digest(prior, part, upto, snapshot.execution_id, target, older)
    return None if digest is None else (digest, part.ids)


def _split(view: _View, target: Target, keep_tokens: int, after: int) -> int | None:
    """The seq the digest ends at: the newest place, with ``keep_tokens`` of rounds after it,
    where a round opens alone; past ``after``."""
    rounds = api_rounds(view.items, target)
    kept = 0
    for round_ in reversed(rounds):
        first = round_[0]
        if kept >= keep_tokens and first.seq > after and _opens_alone(first.message, target):
            return first.seq
        kept += sum(i.tokens for i in round_)
    return None


def _digest(
    prior: Digest | None,
    part: _View,
    upto: int,
    execution_id: str | None,
    target: Target,
    items: Sequence[Item],
) -> Digest | None:
    rounds = api_rounds(part.items, target)
    needed = _needed(rounds)
    for n in needed:
        round_ = rounds[n]
        if any(i.seq in part.changed for i in round_):
            return None  # read again, it would be repaired without what it was repaired with
        first = round_[0]
        opens_view = n == 0 and prior is None
        if not (opens_view or _opens_alone(first.message, target)):
            return None
    needed_seqs = [i.seq for n in needed for i in rounds[n]]
    if any(first <= s <= last for s in part.invalid for first, last in seq_ranges(needed_seqs)):
        return None  # a round to read again holds a message the repairs left out
    gap = [i for n, r in enumerate(rounds) if n not in set(needed) for i in r]
    if prior is not None and any(i.seq < prior.upto for i in gap):
        return None
    older = () if prior is None else prior.base_left_out
    by_reason = left_out_by_reason([*(LeftOut(r, (), x) for r, x in older), *part.left_out])
    traces = trace_executions(items)
    before = prior.warnings if prior is not None else ((),) * PASSES
    return Digest(
        upto=upto,
        view_count=part.count + (0 if prior is None else prior.view_count - _reread(prior)),
        base_left_out=tuple((reason, tuple(r)) for reason, r in by_reason.items()),
        invalid=tuple(merged([*seq_ranges(part.invalid), *(prior.invalid if prior else ())])),
        gap=tuple(merged([*seq_ranges(i.seq for i in gap), *(prior.gap if prior else ())])),
        gap_tokens=sum(i.tokens for i in gap) + (prior.gap_tokens if prior else 0),
        warnings=tuple(b + w for b, w in zip(before, part.warnings, strict=True)),
        needed=tuple(seq_ranges(needed_seqs)),
        traces=frozenset(traces) | (prior.traces if prior else frozenset()),
        execution_id=execution_id,
        last_section=part.last_section,
        suffixes=_suffixes(part.ids.taken, prior.suffixes if prior else {}),
    )


def trace_executions(items: Iterable[Item]) -> set[str]:
    """The executions of which ``items`` hold trace messages."""
    return {
        str(i.message.metadata["execution_id"])
        for i in items
        if i.message.metadata.get("is_trace")
        and isinstance(i.message.metadata.get("execution_id"), str)
    }


def _suffixes(ids: Iterable[str], before: dict[str, int]) -> dict[str, int]:
    """The highest ``__<n>`` each base carries among ``ids`` and ``before``."""
    out = dict(before)
    for cid in ids:
        base, sep, number = cid.rpartition("__")
        if sep and number.isdigit() and number.isascii():
            out[base] = max(out.get(base, 1), int(number))
    return out


def _reread(prior: Digest) -> int:
    """How many messages of the view were read again for ``prior``'s needed rounds (counted in
    its view already)."""
    return sum(last - first + 1 for first, last in prior.needed)


def _ids(message: Message) -> list[str]:
    return [c.id for c in message.tool_calls] + [r.call_id for r in message.tool_results]


def candidates(items: Sequence[Item], target: Target, digest: Digest) -> frozenset[str]:
    """The ids whose use below ``upto`` the repairs of ``items`` may ask about: their own, and
    the ids a rename of them may take."""
    return candidate_ids((cid for item in items for cid in _ids(item.message)), target, digest)


def candidate_ids(ids: Iterable[str], target: Target, digest: Digest) -> frozenset[str]:
    """``candidates`` of the tool call ids the items hold: a rename of an id takes the first
    of ``base``, ``base__2``, ``base__3``... that is free, so past the highest number the older
    part uses, one more per use of the base in the items."""
    return Candidates().more(ids, target, digest).asked


@dataclass(frozen=True)
class Candidates:
    """``candidate_ids`` of the ids a tail holds so far, and how many use each base: the ids a
    tail's newer messages add extend it (the same set as of all the ids at once)."""

    asked: frozenset[str] = frozenset()
    uses: dict[str, int] = field(default_factory=dict)  # never changed once made

    def more(self, ids: Iterable[str], target: Target, digest: Digest) -> Candidates:
        held = list(ids)
        added = Counter(fresh_base(cid, target) for cid in held)
        uses = dict(self.uses)
        out = {*held, *added}
        for base, count in added.items():
            before = uses.get(base, 0)
            top = digest.suffixes.get(base, 1) + before
            # Past the top the ids before named already (from 2 for a base new here).
            out.update(f"{base}__{n}" for n in range(top + 1 if before else 2, top + count + 1))
            uses[base] = before + count
        return Candidates(self.asked | out, uses)


def earlier(
    asked: frozenset[str], calls: Set[str], taken: Set[str], reread: Sequence[Item]
) -> Earlier:
    """What the repairs of a tail are told of the older part: of the ids ``asked`` about, those
    its rounds ``calls`` and those it holds (``taken``), found in the digest's ids. The calls of
    the rounds read again are left out: the repairs meet them again in order."""
    mine = {c.id for item in reread for c in item.message.tool_calls}
    return Earlier(calls=frozenset(calls - mine), ids=frozenset(taken), checked=asked)
