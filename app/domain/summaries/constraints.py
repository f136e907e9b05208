"""Constraints: text a compaction must carry into its summary verbatim, or not compact at all.

A caller marks a message whole (``metadata.constraint: true``: its text) or fragments of it
(``metadata.constraints: ["exact fragment", ...]``, each occurring in its text). When a
compaction takes such messages, or a previous summary carrying constraints, the summary opens
with a block the service writes, not the summariser::

    Constraints (verbatim, checked):
    - [sha256:<first 12 hex of the text's sha256>] <text>

followed by a blank line. A text's backslashes and line breaks are written ``\\\\``, ``\\n`` and
``\\r`` so that each constraint stays one line (and the block ends at the first blank line);
reading the line undoes exactly that. A chained compaction reads the previous block back and
checks every checksum against the text read: a mismatch means the constraint was altered, and
the compaction is refused (``Lost``).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from app.domain.errors import Path
from app.domain.messages import Message

BLOCK_TITLE = "Constraints (verbatim, checked):"
MAX_FRAGMENTS = 32
MAX_FRAGMENT_CHARS = 4_000
CHECKSUM_HEX = 12
_PREFIX = "- [sha256:"
_ESCAPES = {"\\": "\\\\", "\n": "\\n", "\r": "\\r"}
_UNESCAPES = {"\\": "\\", "n": "\n", "r": "\r"}


@dataclass(frozen=True)
class Constraint:
    """One constraint's text and its checksum."""

    text: str

    @property
    def checksum(self) -> str:
        return checksum(self.text)

    def line(self) -> str:
        return f"- [{self.checksum}] {escape(self.text)}"


class Lost(Exception):
    """A constraint that cannot be carried (``checksums`` names which, ``sha256:...``)."""

    def __init__(self, message: str, checksums: Sequence[str]) -> None:
        super().__init__(message)
        self.checksums = tuple(checksums)


def checksum(text: str) -> str:
    """``sha256:`` and the first 12 hex digits of the SHA-256 of ``text`` (UTF-8)."""
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()[:CHECKSUM_HEX]


def escape(text: str) -> str:
    return "".join(_ESCAPES.get(c, c) for c in text)


def unescape(text: str) -> str:
    """``escape`` undone; a backslash before anything else stays as it is."""
    out: list[str] = []
    i = 0
    while i < len(text):
        c = text[i]
        if c == "\\" and i + 1 < len(text) and text[i + 1] in _UNESCAPES:
            out.append(_UNESCAPES[text[i + 1]])
            i += 2
            continue
        out.append(c)
        i += 1
    return "".join(out)


def marking_problems(message: Message) -> list[tuple[Path, str]]:
    """What is wrong with ``message``'s constraint marks, located under its ``metadata``."""
    meta = message.metadata
    problems: list[tuple[Path, str]] = []
    whole = meta.get("constraint")
    if whole is not None and not isinstance(whole, bool):
        problems.append((("metadata", "constraint"), "must be true or false"))
    if whole is True and not message.text.strip():
        problems.append((("metadata", "constraint"), "the message has no text to keep"))
    fragments = meta.get("constraints")
    if fragments is None:
        return problems
    if not isinstance(fragments, list):
        return [*problems, (("metadata", "constraints"), "must be a list of strings")]
    if len(fragments) > MAX_FRAGMENTS:
        where: Path = ("metadata", "constraints")
        return [*problems, (where, f"at most {MAX_FRAGMENTS} constraints per message")]
    text = message.text
    for j, fragment in enumerate(fragments):
        at: Path = ("metadata", "constraints", j)
        if not isinstance(fragment, str) or not fragment.strip():
            problems.append((at, "must be a non-empty string"))
        elif len(fragment) > MAX_FRAGMENT_CHARS:
            problems.append((at, f"at most {MAX_FRAGMENT_CHARS} characters"))
        elif fragment not in text:
            problems.append((at, "does not occur in the message's text"))
    return problems


def marked(message: Message) -> list[Constraint]:
    """The constraints ``message`` is marked with: its text when whole, else its fragments."""
    meta = message.metadata
    if meta.get("constraint") is True and message.text.strip():
        return [Constraint(message.text)]
    fragments = meta.get("constraints")
    if not isinstance(fragments, list):
        return []
    return [Constraint(f) for f in fragments if isinstance(f, str) and f and f in message.text]


def carried(text: str) -> list[Constraint]:
    """The constraints of a summary's block (``text`` from its first line after any header),
    each checked against its checksum; ``Lost`` naming those altered."""
    if not text.startswith(BLOCK_TITLE + "\n"):  # the block opens the summary, or is none
        return []
    found: list[Constraint] = []
    altered: list[str] = []
    for line in text.split("\n")[1:]:
        if not line.strip():
            break
        if not line.startswith(_PREFIX) or "] " not in line:
            altered.append(line[:40])
            continue
        claimed, _, body = line[len("- [") :].partition("] ")
        constraint = Constraint(unescape(body))
        if constraint.checksum != claimed:
            altered.append(claimed)
        else:
            found.append(constraint)
    if altered:
        raise Lost(f"constraint {', '.join(altered)} no longer matches its checksum", altered)
    return found


def gather(messages: Iterable[Message], summary_header: str) -> list[Constraint]:
    """Every constraint ``messages`` hold, once each, in order: those carried by earlier
    summaries (text starting with ``summary_header``) and those marked."""
    seen: dict[str, Constraint] = {}
    for message in messages:
        text = message.text
        found = carried(text[len(summary_header) :]) if text.startswith(summary_header) else []
        for constraint in [*found, *marked(message)]:
            seen.setdefault(constraint.checksum, constraint)
    return list(seen.values())


def block(constraints: Sequence[Constraint]) -> str:
    """The block that opens a summary carrying ``constraints`` ("" when none)."""
    if not constraints:
        return ""
    return "\n".join([BLOCK_TITLE, *(c.line() for c in constraints)]) + "\n\n"


def missing(text: str, constraints: Sequence[Constraint]) -> list[str]:
    """The checksums of ``constraints`` a summary's ``text`` (after its header) does not carry
    verbatim in its block."""
    have = {c.checksum for c in carried(text)}
    return [c.checksum for c in constraints if c.checksum not in have]
