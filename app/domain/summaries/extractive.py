"""The deterministic extractive summariser: the default backend, offline and repeatable.

The summary is plain text::

    [ctxc extractive summary of 42 messages; reason: session_compaction]
    Goals and constraints:
    - Fix the failing build without touching the CI config.
    Errors:
    - bash [call_7]: FAILED tests/test_app.py::test_boot - KeyError: 'port'
    Decisions:
    - I'll read the port from CTXC_PORT instead.
    Tool calls:
    - read_file(path=src/app.py) [call_3] -> ok: import os (+120 more lines)
    [4 lines of prose left out to fit the budget]
    Files: src/app.py, tests/test_app.py
    URLs: https://docs.python.org/3/library/os.html
    Identifiers: call_3, read_file, CTXC_PORT, KeyError, test_boot
    [12 references left out to fit the budget; the compaction's archive holds them]

What each section holds is ``facts``'s business. ``budget`` bounds the summary as ``count``
measures it (characters by default; pass a token counter for tokens): a summary is over it only
when its header and notes alone are. References (file paths, URLs, identifiers) come first: all of
them when the prose leaves room, else at least half the room, the best ranked first (mentioned
most often, then paths, URLs, identifiers, then most recently; ``References.ranked``), and a
note says how many were left out (the compaction's archive holds them). Prose lines fill the
rest, taken in turns from each section (goals, errors, decisions, tool calls) and, within a
section, from both ends inwards (the first and the latest goal go last); the lines kept stay in
history order. Room the prose leaves goes to more references.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence

from app.domain.messages import Message
from app.domain.summaries import Reason
from app.domain.summaries.facts import Facts, gather_facts
from app.domain.summaries.references import References

CountText = Callable[[str], int]
Section = tuple[str, tuple[str, ...]]
Pick = tuple[int, int]  # (section, line)


def summarize_extractive(
    messages: Sequence[Message], reason: Reason, budget: int, count: CountText = len
) -> str:
    """The extractive summary of ``messages`` within ``budget`` (but for its header and notes)."""
    facts = gather_facts(messages)
    header = f"[ctxc extractive summary of {len(messages)} messages; reason: {reason}]"
    sections = _sections(facts)
    total = sum(len(lines) for _, lines in sections)
    ranked = facts.references.ranked
    notes = [header, _left_out(total), *_notes(facts.references)]
    room = budget - count("\n".join(notes))
    costs = [count(f"{value}, ") for value in ranked]
    prose = sum(count(f"- {line}\n") for _, lines in sections for line in lines)
    prose += sum(count(f"{title}:\n") for title, lines in sections if lines)
    kept = _fitting(costs, max(room // 2, room - prose))
    picks = _choose(sections, room - sum(costs[:kept]), count)
    kept = _fitting(costs, room - _cost(sections, picks, count))
    text = _render(header, sections, picks, facts.references, kept, total)
    while (over := count(text) - budget) > 0 and (picks or kept):  # counts are not additive
        if kept:
            while kept and over > 0:
                kept -= 1
                over -= costs[kept]
        else:
            picks.pop()
        text = _render(header, sections, picks, facts.references, kept, total)
    return text


def _notes(references: References) -> list[str]:
    """What the reference lines cost whatever is in them."""
    if not references.ranked:
        return []
    kinds = (
        ("Files: ", references.paths),
        ("URLs: ", references.urls),
        ("Identifiers: ", references.identifiers),
    )
    return [label for label, values in kinds if values] + [_refs_left_out(len(references.ranked))]


def _fitting(costs: Sequence[int], room: int) -> int:
    """How many of the first ``costs`` fit in ``room``."""
    kept = 0
    for cost in costs:
        if cost > room:
            break
        room -= cost
        kept += 1
    return kept


def _cost(sections: Sequence[Section], picks: Sequence[Pick], count: CountText) -> int:
    titles = {s for s, _ in picks}
    lines = sum(count(f"- {sections[s][1][i]}\n") for s, i in picks)
    return lines + sum(count(f"{sections[s][0]}:\n") for s in titles)


def _sections(facts: Facts) -> list[Section]:
    return [
        ("Goals and constraints", facts.goals),
        ("Errors", facts.errors),
        ("Decisions", facts.decisions),
        ("Tool calls", facts.ledger),
    ]


def _reference_lines(references: References, kept: int) -> list[str]:
    """The first ``kept`` ranked references, by kind, each kind in order of first mention."""
    chosen = set(references.ranked[:kept])
    kinds = (
        ("Files", references.paths),
        ("URLs", references.urls),
        ("Identifiers", references.identifiers),
    )
    lines = [(label, [v for v in values if v in chosen]) for label, values in kinds]
    out = [f"{label}: {', '.join(values)}" for label, values in lines if values]
    left = len(references.ranked) - kept
    return out + ([_refs_left_out(left)] if left else [])


def _refs_left_out(references: int) -> str:
    return (
        f"[{references} references left out to fit the budget; the compaction's archive holds them]"
    )


def _left_out(lines: int) -> str:
    return f"[{lines} lines of prose left out to fit the budget]"


def _choose(sections: Sequence[Section], room: int, count: CountText) -> list[Pick]:
    """The lines that fit in ``room``, in the order they were chosen."""
    picks: list[Pick] = []
    started: set[int] = set()
    for s, i in _turns(sections):
        if room <= 0:
            break
        title, lines = sections[s]
        cost = count(f"- {lines[i]}\n") + (0 if s in started else count(f"{title}:\n"))
        if cost <= room:
            room -= cost
            picks.append((s, i))
            started.add(s)
    return picks


def _turns(sections: Sequence[Section]) -> Iterator[Pick]:
    """One line of each section in turn; within a section, from both ends inwards."""
    orders = [_outside_in(len(lines)) for _, lines in sections]
    for k in range(max(map(len, orders), default=0)):
        for s, order in enumerate(orders):
            if k < len(order):
                yield s, order[k]


def _outside_in(n: int) -> list[int]:
    order: list[int] = []
    low, high = 0, n - 1
    while low <= high:
        order += [low] if low == high else [low, high]
        low, high = low + 1, high - 1
    return order


def _render(
    header: str,
    sections: Sequence[Section],
    picks: Sequence[Pick],
    references: References,
    refs: int,
    total: int,
) -> str:
    kept = set(picks)
    out = [header]
    for s, (title, lines) in enumerate(sections):
        shown = [f"- {line}" for i, line in enumerate(lines) if (s, i) in kept]
        out += [f"{title}:", *shown] if shown else []
    if len(kept) < total:
        out.append(_left_out(total - len(kept)))
    return "\n".join(out + _reference_lines(references, refs))
