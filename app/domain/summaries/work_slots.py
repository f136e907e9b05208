"""The slot of a work line (app/domain/summaries/work.py) read back from a summary: what a
later line on the same file, command or call replaces."""

from __future__ import annotations


def work_slot(text: str) -> str | None:
    """The slot of a work line read back from a summary (``path: action -> ...``, ``$ command
    -> ...``), or None when ``text`` is no such line."""
    head, arrow, _ = text.partition(" -> ")
    if not arrow:
        return None
    if head.startswith("$ "):
        return f"command:{head}"
    path, colon, action = head.rpartition(": ")
    if colon and path and " " not in path and action:
        return f"file:{path}"
    return f"call:{head}"
