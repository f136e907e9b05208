"""The built-in ledger summariser as a ``Summarizer``: the default, and every remote backend's
fallback."""

from __future__ import annotations

from app.adapters.summarizers.base import Summary
from app.adapters.summarizers.extractive import Extractive
from app.domain.messages import Message
from app.domain.summaries import Reason
from app.domain.summaries.ledger import summarize_ledger


class LedgerSummarizer(Extractive):
    """Summarises offline as a ledger within a budget (``max_tokens`` unless a call gives one),
    off the event loop; the summary's pointers are ``source.seqs``."""

    name = "ledger"

    def write(
        self, history: tuple[Message, ...], reason: Reason, budget: int, seqs: tuple[int, ...]
    ) -> Summary:
        ledger = summarize_ledger(history, budget, self._count, seqs)
        return Summary(ledger.text, self.name, loss=ledger.loss)
