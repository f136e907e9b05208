"""Narration: an agent saying what it is about to look at ("Let's explore the `src` directory",
"Let me look at big08.txt", "Now I'll view the file again"), not a choice made. A ledger keeps
it as a note, ranked last: the first thing dropped under the summary budget. Word checks only.
"""

from __future__ import annotations

OPENERS = (
    ("let's",),
    ("let", "me"),
    ("let", "us"),
    ("i'll",),
    ("i", "will"),
    ("i", "need", "to"),
    ("we", "need", "to"),
    ("i'm", "going", "to"),
    ("first", "i'll"),
    ("now", "i'll"),
)
FILLERS = frozenset(
    ["now", "next", "first", "then", "okay", "ok", "great", "so", "and", "also", "again"]
)
LOOKING = frozenset(
    [
        "look",
        "view",
        "explore",
        "check",
        "open",
        "see",
        "examine",
        "inspect",
        "search",
        "find",
        "run",
        "try",
        "start",
        "take",
        "verify",
        "investigate",
        "understand",
        "locate",
        "review",
        "navigate",
        "list",
        "print",
        "show",
        "search",
        "grep",
        "cat",
        "re-run",
        "rerun",
        "test",
        "confirm",
        "scroll",
        "go",
        "get",
        "begin",
        "continue",
        "dig",
        "analyze",
        "analyse",
    ]
)


CHOICES = ("instead", "decided", "chose", "because", "rather", "root cause")


def is_narration(text: str) -> bool:
    """``text``, or its last sentence when no other says a choice (``CHOICES``), opens with a
    narrating phrase (``OPENERS``, after fillers) and a looking verb."""
    last = text.rstrip(". ").rpartition(". ")[2]
    if last != text and not any(c in text.lower() for c in CHOICES) and _narrates(last):
        return True
    return _narrates(text)


def _narrates(text: str) -> bool:
    tokens = [t.strip(".,:;!-").lower().replace("\u2019", "'") for t in text.split()[:12]]
    tokens = [t for t in tokens if t]
    while tokens and tokens[0] in FILLERS:
        tokens = tokens[1:]
    for opener in OPENERS:
        if tuple(tokens[: len(opener)]) == opener:
            rest = [t for t in tokens[len(opener) :] if t not in FILLERS]
            return bool(rest) and rest[0] in LOOKING
    return False
