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

# Why a compaction's summary was not written by the summariser its policy names, or why the
# compaction wrote none (a compaction record's and event's ``summarizer_reason``; null: the
# named summariser wrote it): the named one failed and its fallback wrote it (``fallback``,
# the record's ``summarizer`` saying why), the policy names a profile this deployment does not
# have and the default one wrote it (``summarizer_unavailable``), there was no message to
# summarise (``nothing_to_summarize``), or the compaction rewrites messages in place and calls
# no summariser (``not_summarized``: tool payloads, an opening task cut).
SummarizerReason = Literal[
    "fallback", "summarizer_unavailable", "nothing_to_summarize", "not_summarized"
]
SUMMARIZER_REASONS: tuple[SummarizerReason, ...] = (
    "fallback",
    "summarizer_unavailable",
    "nothing_to_summarize",
    "not_summarized",
)
