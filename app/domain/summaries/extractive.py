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

What each section holds is ``facts``'s business. ``budget`` bounds the summary as ``count``
measures it (characters by default; pass a token counter for tokens). The header and the
reference lines are always whole: every file path, URL and identifier of the input is in the
summary at any budget, so a summary is over the budget only when those alone are. Prose lines
fill the rest, taken in turns from each section (goals, errors, decisions, tool calls) and,
within a section, from both ends inwards (the first and the latest goal go last); the lines kept
stay in history order.
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
    """The extractive summary of ``messages``, within ``budget`` but for its references."""
    facts = gather_facts(messages)
    header = f"[ctxc extractive summary of {len(messages)} messages; reason: {reason}]"
    references = _reference_lines(facts.references)
    sections = _sections(facts)
    total = sum(len(lines) for _, lines in sections)
    fixed = "\n".join([header, _left_out(total), *references])
    picks = _choose(sections, budget - count(fixed), count)
    text = _render(header, sections, picks, references, total)
    while picks and count(text) > budget:  # token counts of joined lines are not additive
        picks.pop()
        text = _render(header, sections, picks, references, total)
    return text


def _sections(facts: Facts) -> list[Section]:
    return [
        ("Goals and constraints", facts.goals),
        ("Errors", facts.errors),
        ("Decisions", facts.decisions),
        ("Tool calls", facts.ledger),
    ]


def _reference_lines(references: References) -> list[str]:
    kinds = (("Files", references.paths), ("URLs", references.urls),
             ("Identifiers", references.identifiers))  # fmt: skip
    return [f"{label}: {', '.join(values)}" for label, values in kinds if values]


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
    references: Sequence[str],
    total: int,
) -> str:
    kept = set(picks)
    out = [header]
    for s, (title, lines) in enumerate(sections):
        shown = [f"- {line}" for i, line in enumerate(lines) if (s, i) in kept]
        out += [f"{title}:", *shown] if shown else []
    if len(kept) < total:
        out.append(_left_out(total - len(kept)))
    return "\n".join(out + list(references))
