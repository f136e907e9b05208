"""The ledger summariser: the built-in default, offline and deterministic.

A history becomes typed entries (``entries``); a previous summary among the messages is read
back entry by entry (``ledger_text``) and merged with what came after it, never re-summarised.
Merging, in history order: an entry saying exactly what a live one says is folded into it (its
pointers joined); an entry with the subject or state slot of a live one replaces it (the later
value wins, and it keeps the higher-ranked kind of the two: an update of a rule stays a rule).
The live entries are ranked (kind: rules, goals and open tasks, facts, preferences, errors,
decisions, tool calls and files, notes; then how many values they carry; then incumbents, those
carried over from the previous summary, before newcomers; then recency) and taken in that order
while they fit ``budget`` as ``count`` measures the rendered text (an entry too long for what is
left is passed over for shorter ones below it). The text is never over the budget.

Hysteresis: an incumbent may use the whole budget, a newcomer only the budget less a slack
(``slack``). So a summary leaves room that the next compactions' slightly smaller budgets (what
stays beside the summary grows by a few tokens) eat before an incumbent is dropped, and what is
kept moves in steps rather than losing an entry for good at every small shrink. Pointers and the
note are fitted after the entries, in what is left, and give way first. What was left out stays
reachable by the pointers in the last line. The loss report (``Loss``) lists every entry by
outcome.

Work is linear in the history: each statement is classified once, merged through dictionaries,
and counted once.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from app.domain.messages import Message
from app.domain.summaries.chat import chat_entries, chat_of, split_turn
from app.domain.summaries.entries import RANK, TITLES, Entry, message_entries
from app.domain.summaries.ledger_text import (
    NOTE_HEAD,
    NOTE_RANGES,
    Span,
    entry_line,
    note_for,
    read_summary,
    render,
    spans_of,
)
from app.domain.summaries.loss import Loss, LossEntry
from app.domain.summaries.work import Work

CountText = Callable[[str], int]
MAX_POINTERS = 3  # an entry's pointers: its latest sources
NOTE_SHARE = 64  # the shortest note is kept room for when it costs at most this share
MIN_SUBJECT_WORDS = 2  # a subject of fewer words (a bare value) replaces nothing
SLACK_TOKENS = 5  # newcomers leave at least this much of the budget to incumbents ...
SLACK_SHARE = 32  # ... or this share of it, whichever is more


@dataclass(frozen=True)
class Ledger:
    """A ledger summary's text and its loss report."""

    text: str
    loss: Loss


def summarize_ledger(
    messages: Sequence[Message],
    budget: int,
    count: CountText = len,
    seqs: Sequence[int] = (),
) -> Ledger:
    """The ledger of ``messages`` (``seqs``: theirs, when known) within ``budget``."""
    entries, earlier = gather(messages, seqs)
    merged = merge(entries)
    ranked = sorted(range(len(merged.live)), key=lambda n: _rank(merged.live[n], n))
    chosen, text = _fit(ranked, merged.live, earlier, budget, count)
    kept = set(chosen)
    live = list(enumerate(merged.live))
    loss = Loss(
        kept=_report(e for n, e in live if n in kept and n not in merged.folded),
        merged=_report(e for n, e in live if n in kept and n in merged.folded),
        replaced=_report(merged.replaced),
        dropped=_report(e for n, e in live if n not in kept),
    )
    return Ledger(text, loss)


def gather(messages: Sequence[Message], seqs: Sequence[int] = ()) -> tuple[list[Entry], list[Span]]:
    """Every entry of ``messages`` in history order, a previous summary's read back, and the
    spans a previous summary's note pointed at."""
    out: list[Entry] = []
    spans: list[Span] = []
    work = Work.of(messages)
    summaries = [m.text for m in messages if _is_summary(m)]
    lines = [line for text in summaries for line in text.splitlines()]
    chat = chat_of([m for m in messages if not _is_summary(m)], lines)
    for n, message in enumerate(messages):
        seq = seqs[n] if n < len(seqs) else None
        if _is_summary(message):
            read = read_summary(message.text, seq)
            out += read.entries
            spans += read.spans
        elif chat is not None and split_turn(message.text)[1]:
            out += chat_entries(message, seq, chat)
        else:
            out += message_entries(message, seq, work.entries)
    return out, spans


def _is_summary(message: Message) -> bool:
    return "summarized_seqs" in message.metadata or message.text.startswith("[Summary")


@dataclass
class Merged:
    """The live entries after merging (``None`` where one was replaced), the indexes of those
    that folded others in, and those replaced."""

    live: list[Entry]
    folded: set[int]
    replaced: list[Entry]


def merge(entries: Sequence[Entry]) -> Merged:
    """``entries`` merged in order: duplicates folded, earlier values replaced by later ones."""
    slots: list[Entry | None] = []
    folded: set[int] = set()
    replaced: list[Entry] = []
    by_text: dict[str, int] = {}
    by_subject: dict[str, int] = {}
    by_slot: dict[str, int] = {}
    for entry in entries:
        same = by_text.get(entry.text)
        twin = slots[same] if same is not None else None
        if same is not None and twin is not None:
            slots[same] = _folded(twin, entry)
            folded.add(same)
            continue
        kind, carried = entry.kind, entry.carried
        for key, index in ((entry.subject, by_subject), (entry.slot, by_slot)):
            at = index.get(key) if key and _keyed(key, index is by_subject) else None
            old = slots[at] if at is not None else None
            if at is not None and old is not None:
                replaced.append(old)
                kind = min(kind, old.kind, key=RANK.__getitem__)
                carried = carried or old.carried
                slots[at] = None
                folded.discard(at)
        entry = entry.with_kind(kind).with_carried(carried)
        n = len(slots)
        slots.append(entry)
        by_text[entry.text] = n
        if _keyed(entry.subject, True):
            by_subject[entry.subject] = n
        if entry.slot:
            by_slot[entry.slot] = n
    live: list[Entry] = []
    remap: dict[int, int] = {}
    for n, found in enumerate(slots):
        if found is not None:
            remap[n] = len(live)
            live.append(found)
    return Merged(live, {remap[n] for n in folded if n in remap}, replaced)


def _keyed(key: str, subject: bool) -> bool:
    return not subject or sum(w != "#" for w in key.split()) >= MIN_SUBJECT_WORDS


def _folded(old: Entry, new: Entry) -> Entry:
    seqs = tuple(dict.fromkeys((*old.seqs, *new.seqs)))[-MAX_POINTERS:]
    kind = min(old.kind, new.kind, key=RANK.__getitem__)
    return old.with_kind(kind).with_seqs(seqs).with_carried(old.carried or new.carried)


def _rank(entry: Entry, position: int) -> tuple[int, int, bool, int]:
    return RANK[entry.kind], -min(entry.values, 3), not entry.carried, -position


def slack(budget: int) -> int:
    """The room of ``budget`` newcomers leave to incumbents: what later, smaller budgets take
    before an incumbent is dropped."""
    return max(SLACK_TOKENS, budget // SLACK_SHARE)


def _fit(
    order: Sequence[int],
    live: Sequence[Entry],
    earlier: Sequence[Span],
    budget: int,
    count: CountText,
) -> tuple[list[int], str]:
    """The entries (their indexes in ``live``, taken in ``order``) that fit ``budget`` with the
    note (pointing also at the ``earlier`` summary's), and the text. Entries come first (but for
    the shortest note, when it costs at most 1/``NOTE_SHARE`` of the budget, less than the
    slack), newcomers only while the slack is left, then the entries' pointers in the same order,
    then the note, as long as fits."""
    least = note_for(spans_of([s for e in live for s in e.seqs], earlier), 1)
    noted = bool(least) and count(least) <= budget // NOTE_SHARE
    room = budget - count(least) if noted else budget
    spare = slack(budget)
    chosen: list[int] = []
    titled: set[str] = set()
    for n in order:
        entry = live[n]
        title = 0 if entry.kind in titled else count(f"{TITLES[entry.kind]}:\n")
        cost = count(entry_line(entry.with_seqs(())) + "\n") + title
        if cost <= room - (0 if entry.carried else spare):
            room -= cost
            chosen.append(n)
            titled.add(entry.kind)
    pointed: list[int] = []
    for n in chosen:
        bare = entry_line(live[n].with_seqs(()))
        extra = count(entry_line(live[n])) - count(bare) if live[n].seqs else 0
        if extra <= room:
            room -= extra
            pointed.append(n)
    text = _text(chosen, set(pointed), live, earlier, budget, count)
    # Counts are not quite additive: what is over gives way, pointers first, then entries.
    while (count(text) > budget or _unnoted(text, noted, chosen, live)) and chosen:
        if pointed:
            pointed.pop()
        else:
            chosen.pop()
        text = _text(chosen, set(pointed), live, earlier, budget, count)
    return chosen, text


def _unnoted(text: str, noted: bool, chosen: Sequence[int], live: Sequence[Entry]) -> bool:
    """The note was kept room for, entries were left out, and it is not there."""
    return noted and len(chosen) < len(live) and NOTE_HEAD not in text


def _text(
    chosen: Sequence[int],
    pointed: set[int],
    live: Sequence[Entry],
    earlier: Sequence[Span],
    budget: int,
    count: CountText,
) -> str:
    """The ledger of ``chosen`` (in history order; pointers on ``pointed``) with the longest
    note that fits."""
    taken = sorted(chosen)
    shown = [live[n] if n in pointed else live[n].with_seqs(()) for n in taken]
    body = render(shown, "")
    kept = set(taken)
    left = spans_of([s for n, e in enumerate(live) if n not in kept for s in e.seqs], earlier)
    if not left:
        return body
    for ranges in (NOTE_RANGES, 12, 6, 3, 1):
        text = render(shown, note_for(left, ranges))
        if count(text) <= budget:
            return text
    return body


def _report(entries: Iterable[Entry]) -> tuple[LossEntry, ...]:
    return tuple(LossEntry(e.kind, e.text, e.seqs) for e in entries)
