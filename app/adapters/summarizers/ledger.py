"""The built-in ledger summariser as a ``Summarizer``: the default, and every remote backend's
fallback."""

from __future__ import annotations

from collections.abc import Sequence

import anyio

from app.adapters.summarizers.base import Source, Summary
from app.domain.messages import Message
from app.domain.summaries import Reason
from app.domain.summaries.ledger import CountText, summarize_ledger


class LedgerSummarizer:
    """Summarises offline as a ledger within a budget (``max_tokens`` unless a call gives one),
    off the event loop; the summary's pointers are ``source.seqs``."""

    name = "ledger"

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
        history = tuple(messages)
        budget = self._max_tokens if max_tokens is None else max_tokens
        seqs = source.seqs if source is not None else ()
        ledger = await anyio.to_thread.run_sync(
            summarize_ledger, history, budget, self._count, seqs
        )
        return Summary(ledger.text, self.name, loss=ledger.loss)

    async def aclose(self) -> None:
        return None
