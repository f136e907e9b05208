"""Base compilers: which stored messages make up the view, and in which order (seeds/000).

Sections are read in inference order (summary, buffer, messages) unless a compiler is told
otherwise; within a section messages keep their seq order. Stored messages a base compiler does
not select are reported as left out: reason ``section`` (a section it does not read) or
``trace`` (a trace message of another execution).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Literal

from app.domain.compilers.base import Compiled, Compiler, Item, LeftOut, Snapshot
from app.domain.messages import DEFAULT_SECTION, INFERENCE_ORDER, Message


def section_order(present: Iterable[str]) -> list[str]:
    """Inference order first (summary, buffer, messages), then any other section by name."""
    others = sorted(set(present) - set(INFERENCE_ORDER))
    return [*INFERENCE_ORDER, *others]


def read_sections(items: Sequence[Item], sections: Sequence[str]) -> tuple[list[Item], LeftOut]:
    """The items of ``sections`` in that order (an empty list: the default section only)."""
    wanted = list(dict.fromkeys(sections)) or [DEFAULT_SECTION]
    rank = {name: i for i, name in enumerate(wanted)}
    picked = sorted((i for i in items if i.section in rank), key=lambda i: (rank[i.section], i.seq))
    skipped = tuple(i.seq for i in items if i.section not in rank)
    return picked, LeftOut("section", skipped)


def shows_trace(message: Message, execution_id: str | None) -> bool:
    """True unless the message is a trace (``is_trace`` truthy) of another execution."""
    if not message.metadata.get("is_trace"):
        return True
    return execution_id is not None and message.metadata.get("execution_id") == execution_id


def current_tool_trace(sections: Sequence[str] | None = None) -> Compiler:
    """Every non-trace message plus the trace messages of the current execution (the default).

    It reads summary, buffer and messages in that order and ignores other sections, unless
    ``sections`` names them (an empty list: the default section only).
    """
    order = INFERENCE_ORDER if sections is None else tuple(sections)

    def compile_current_tool_trace(snapshot: Snapshot) -> Compiled:
        picked, skipped = read_sections(snapshot.items, order)
        shown: list[Item] = []
        hidden: list[int] = []
        for item in picked:
            if shows_trace(item.message, snapshot.execution_id):
                shown.append(item)
            else:
                hidden.append(item.seq)
        return Compiled.of(shown, skipped, LeftOut("trace", tuple(hidden)))

    return compile_current_tool_trace


def all_sections(order: Literal["sections", "seq"] = "sections") -> Compiler:
    """Every message of every section, unfiltered: sections in inference order, then any other
    by name (each in seq order); ``order="seq"`` sends the whole store in seq order instead."""

    def compile_all_sections(snapshot: Snapshot) -> Compiled:
        if order == "seq":
            return Compiled(tuple(sorted(snapshot.items, key=lambda i: i.seq)))
        picked, _ = read_sections(snapshot.items, section_order(i.section for i in snapshot.items))
        return Compiled(tuple(picked))

    return compile_all_sections


def selected_sections(sections: Sequence[str] | None = None) -> Compiler:
    """The named sections in the given order; a missing one is skipped; an empty list means the
    default section only; no list means inference order (summary, buffer, messages)."""
    order = INFERENCE_ORDER if sections is None else tuple(sections)

    def compile_selected_sections(snapshot: Snapshot) -> Compiled:
        picked, skipped = read_sections(snapshot.items, order)
        return Compiled.of(picked, skipped)

    return compile_selected_sections
