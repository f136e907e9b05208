"""Checking an LLM summariser's answer has the ledger's structure (``prompts.SECTIONS``).

An answer is a sequence of sections: a known title on a line of its own, then its entries, each
a line starting ``- `` (an indented line is the previous entry's continuation, as models wrap
long entries). Blank lines are ignored, as is a block of constraints the answer
echoed (``constraints.BLOCK_TITLE`` up to a blank line: the service writes its own). Anything
else is refused with the reason: text before the first title, an unknown title, an entry
outside a section, or no entry at all. One pass over the lines, no regular expressions.
"""

from __future__ import annotations

from app.domain.summaries.constraints import BLOCK_TITLE
from app.domain.summaries.prompts import SECTIONS

SHOWN_CHARS = 60


class Unstructured(ValueError):
    """An answer without the ledger's sections (the message says where it goes wrong)."""


def check_sections(text: str) -> dict[str, int]:
    """The number of entries under each title of ``text``; ``Unstructured`` when it is not
    made of the ledger's sections."""
    counts: dict[str, int] = {}
    section: str | None = None
    entry = False
    skipping = False
    for raw in text.split("\n"):
        line = raw.strip()
        if skipping:
            skipping = bool(line)
            continue
        if not line:
            continue
        if line == BLOCK_TITLE:
            skipping = True
            continue
        if _title(line) in SECTIONS:
            section, entry = _title(line), False
            counts.setdefault(section, 0)
        elif section is None:
            raise Unstructured(f"text before the first section: {line[:SHOWN_CHARS]!r}")
        elif line.startswith("- ") or line == "-":
            counts[section] += 1
            entry = True
        elif line.endswith(":") and raw[:1] not in (" ", "\t"):
            raise Unstructured(f"an unknown section {line[:SHOWN_CHARS]!r}")
        elif not entry or raw[:1] not in (" ", "\t"):
            raise Unstructured(f"a line outside any entry: {line[:SHOWN_CHARS]!r}")
    if not sum(counts.values()):
        raise Unstructured("no entries under the sections " + ", ".join(SECTIONS))
    return counts


def _title(line: str) -> str:
    """A title line as written in ``SECTIONS``, forgiving Markdown emphasis and heading marks."""
    return line.lstrip("#").strip().strip("*").strip()
