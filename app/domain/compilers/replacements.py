"""What ``redact`` steps replaced, and the warning that says it (of the messages sent)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Container
from dataclasses import dataclass


def replacements_warning(counts: Counter[str]) -> str | None:
    """``redact``'s warning: how many secrets each pattern replaced (None: none)."""
    if not counts:
        return None
    detail = ", ".join(f"{name}: {n}" for name, n in sorted(counts.items()))
    return f"redact: {counts.total()} replacements ({detail})"


@dataclass(frozen=True)
class Replaced:
    """What a ``redact`` step replaced, message by message, and the place of its warning among
    the compile's warnings. The compile words that warning again of the messages it sends:
    trimming after the step may leave some out, and a compile given only the tail of a history
    (``Elided``) must say what one given all of it says."""

    at: int
    found: tuple[tuple[int, str, int], ...]  # (seq, pattern name, replacements)

    def warning(self, sent: Container[int]) -> str | None:
        """The warning of the messages at ``sent`` (and injected ones)."""
        counts: Counter[str] = Counter()
        for seq, name, n in self.found:
            if seq in sent or not seq:
                counts[name] += n
        return replacements_warning(counts)
