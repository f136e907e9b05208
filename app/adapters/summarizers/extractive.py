"""The built-in extractive summariser as a ``Summarizer`` (the default, and every fallback)."""

from __future__ import annotations

from collections.abc import Sequence

import anyio

from app.adapters.summarizers.base import Source, Summary
from app.domain.messages import Message
from app.domain.summaries import Reason
from app.domain.summaries.extractive import CountText, summarize_extractive


class Extractive:
    """Summarises offline within a budget (``max_tokens`` unless a call gives one), off the event
    loop."""

    name = "extractive"

    def __init__(self, count: CountText, max_tokens: int) -> None:
        self._count = count
        self._max_tokens = max_tokens

    async def summarize(
        self,
        messages: Sequence[Message],
        reason: Reason,
        max_tokens: int | None = None,
        source: Source | None = None,
    ) -> Summary:
        budget = self._max_tokens if max_tokens is None else max_tokens
        seqs = source.seqs if source is not None else ()
        return await anyio.to_thread.run_sync(self.write, tuple(messages), reason, budget, seqs)

    def write(
        self, history: tuple[Message, ...], reason: Reason, budget: int, seqs: tuple[int, ...]
    ) -> Summary:
        """The summary of ``history`` within ``budget`` (CPU work, run in a thread)."""
        return Summary(summarize_extractive(history, reason, budget, self._count), self.name)

    async def aclose(self) -> None:
        return None
