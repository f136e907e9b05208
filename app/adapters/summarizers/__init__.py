"""Summarisers behind one interface: ``await summarizer.summarize(messages, reason)``.

``extractive`` is the built-in default (offline, deterministic). ``openai``, ``anthropic`` and
``webhook`` call out, through ``Resilient``: time limits, retries, chunking to the model's window
and, when they fail, the extractive summary instead, so a summary is always produced.
"""

from app.adapters.summarizers.base import Summarizer, Summary
from app.adapters.summarizers.factory import summarizer_from_settings

__all__ = ["Summarizer", "Summary", "summarizer_from_settings"]
