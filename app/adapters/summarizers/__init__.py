"""Summarisers behind one interface: ``await summarizer.summarize(messages, reason)``.

``ledger`` is the built-in default (offline, deterministic), ``extractive`` the older built-in
one. ``openai``, ``anthropic`` and ``webhook`` call out, through ``Resilient``: time limits,
retries, chunking to the model's window and, when they fail, the ledger summary instead (or the
fallback profile's), so a summary is always produced.
"""

from app.adapters.summarizers.base import Summarizer, Summary
from app.adapters.summarizers.factory import summarizer_from_settings

__all__ = ["Summarizer", "Summary", "summarizer_from_settings"]
