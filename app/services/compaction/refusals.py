"""Why a compaction wrote nothing: the exceptions that say so, each a 409 when a request asked
for the compaction, a warning when a compile was due it."""

from __future__ import annotations

from collections.abc import Sequence

from app.domain.compaction.economics import Economics
from app.domain.errors import Conflict


class NotCompacted(Conflict):
    """A compaction that wrote nothing: another took its messages first, or the summary would
    not be smaller than what it replaces."""


class ConstraintLost(NotCompacted):
    """A compaction refused because its summary would not carry every constraint it took
    verbatim (``checksums``: which, ``sha256:<12 hex>``)."""

    def __init__(self, message: str, checksums: Sequence[str]) -> None:
        super().__init__(message)
        self.checksums = tuple(checksums)


class Refused(NotCompacted):
    """A request-boundary compaction not applied: it would shed too little, or rewrite more of
    the prompt cache than it saves (``economics``: the figures)."""

    def __init__(self, detail: str, economics: Economics, too_little: bool = False) -> None:
        super().__init__(detail)
        self.economics, self.too_little = economics, too_little


class LeaseLost(NotCompacted):
    """The lease expired while the summariser ran and another took it over (and closed this
    compaction's start as abandoned)."""
