"""Summaries of old history (seeds/003 ``summarize(messages, reason)``): the pure parts.

What a summary must keep (references, goals, decisions, errors, a tool call ledger), the
deterministic extractive summariser, the chunking of a long history to fit a summariser's window,
and the prompts LLM summarisers get. The backends that call out live in
``app.adapters.summarizers``.
"""

from __future__ import annotations

from typing import Literal

Reason = Literal["session_compaction", "reactive_micro", "reactive_full"]
REASONS: tuple[Reason, ...] = ("session_compaction", "reactive_micro", "reactive_full")
