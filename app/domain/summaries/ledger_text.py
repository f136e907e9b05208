"""A ledger summary as text: compact, stable, and read back by the next compaction.

::

    Rules:
    Never disclose the vault code kqzva-41 to any user. @14
    Budget cap is $850 total. Never exceed without explicit approval. @52
    Goals:
    Current task is migrating auth to OAuth. Next step is token refresh handling. @31,77
    Facts:
    The staging API base URL is https://qa.internal/v2. @40
    Left out, by seq: 3-9 11 40-52 +12 more

A section per kind (``TITLES``), in rank order, one line per entry, its pointers after `` @``:
the seqs of the messages it came from, in the live history or the compaction's archive (the
``ctxc_recall`` tool reads them). The last line, when entries were left out for want of room,
points at theirs (and at those an earlier summary left out), up to ``NOTE_RANGES`` ranges.
Reading a summary back skips its bracketed header lines and a leading constraints block
(``Constraints (verbatim, checked):`` and its ``- [sha256:...]`` lines up to a blank line: it is
re-derived elsewhere); lines ahead of the first section (an older summary's) are read as
statements.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from app.domain.summaries.chat import read_back
from app.domain.summaries.constraints import BLOCK_TITLE
from app.domain.summaries.entries import KINDS, TITLES, Entry, make_entry, statement_entry

NOTE_HEAD = "Left out, by seq:"
NOTE_RANGES = 24
_KIND_OF = {f"{title}:": kind for kind, title in TITLES.items()}
Span = tuple[int, int]


@dataclass
class Read:
    """What a summary holds: its entries and the spans of seqs its note points at."""

    entries: list[Entry] = field(default_factory=list)
    spans: list[Span] = field(default_factory=list)


def entry_line(entry: Entry) -> str:
    """One entry as a line of its section."""
    pointer = f" @{','.join(map(str, entry.seqs))}" if entry.seqs else ""
    return f"{entry.text}{pointer}"


def render(entries: Sequence[Entry], note: str) -> str:
    """The ledger of ``entries`` (each section in the order given) and the note."""
    by_kind: dict[str, list[str]] = {kind: [] for kind in KINDS}
    for entry in entries:
        by_kind[entry.kind].append(entry_line(entry))
    out = [line for kind in KINDS if by_kind[kind] for line in (f"{TITLES[kind]}:", *by_kind[kind])]
    return "\n".join([*out, note] if note else out)


def spans_of(seqs: Sequence[int], more: Sequence[Span] = ()) -> list[Span]:
    """``seqs`` and the spans ``more`` as sorted, disjoint spans."""
    spans: list[Span] = []
    for first, last in sorted([*((s, s) for s in seqs), *more]):
        if spans and first <= spans[-1][1] + 1:
            spans[-1] = (spans[-1][0], max(last, spans[-1][1]))
        else:
            spans.append((first, last))
    return spans


def note_for(spans: Sequence[Span], ranges: int = NOTE_RANGES) -> str:
    """The note pointing at ``spans`` (left out for want of room), at most ``ranges`` of them."""
    shown = " ".join(f"{a}-{b}" if b > a else str(a) for a, b in spans[:ranges])
    hidden = sum(b - a + 1 for a, b in spans[ranges:])
    more = f" +{hidden} more" if hidden else ""
    return f"{NOTE_HEAD} {shown}{more}" if spans else ""


def read_summary(text: str, seq: int | None) -> Read:
    """The entries of a summary: its ledger lines as they were (with their own pointers), any
    other line as a statement pointing at the summary (``seq``); and its note's spans."""
    read = Read()
    kind: str | None = None
    skipping = False
    for line in text.splitlines():
        stripped = line.strip()
        if skipping or stripped == BLOCK_TITLE:
            skipping = bool(stripped)
        elif stripped.startswith(NOTE_HEAD):
            read.spans += _note_spans(stripped[len(NOTE_HEAD) :])
        elif stripped in _KIND_OF:
            kind = _KIND_OF[stripped]
        elif kind is not None and stripped:
            text_part, seqs = _pointer(stripped)
            read.entries.append(read_back(make_entry(kind, text_part, seqs)).with_carried(True))
        elif stripped and not _bracketed(stripped):
            entry = statement_entry(stripped, () if seq is None else (seq,))
            if entry is not None:
                read.entries.append(entry.with_carried(True))
    return read


def _note_spans(text: str) -> list[Span]:
    spans: list[Span] = []
    for word in text.split():
        first, _, last = word.partition("-")
        if first.isdigit() and (not last or last.isdigit()):
            spans.append((int(first), int(last or first)))
    return spans


def _bracketed(line: str) -> bool:
    return line.startswith("[") and line.endswith("]")


def _pointer(line: str) -> tuple[str, tuple[int, ...]]:
    """An entry line's text and pointers."""
    head, sep, tail = line.rpartition(" @")
    parts = tail.split(",")
    if not sep or not all(p.isdigit() for p in parts):
        return line, ()
    return head, tuple(int(p) for p in parts)
