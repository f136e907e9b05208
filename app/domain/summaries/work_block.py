"""The work block a remote summariser's prose follows: the ledger of the history's tool calls
and results alone (files with their latest action, commands with their outcome, open errors;
``work``), within a share of the summary's budget (``WORK_SHARE``), so what a coding agent
needs to carry on is kept whatever the model writes, deterministic and ahead of its prose."""

from __future__ import annotations

from collections.abc import Sequence

from app.domain.messages import Message, ToolCallPart, ToolResultPart
from app.domain.summaries.ledger import CountText, summarize_ledger

WORK_SHARE = 2  # the block takes at most 1/WORK_SHARE of the summary's budget


def work_block(
    messages: Sequence[Message], budget: int, count: CountText, seqs: Sequence[int] = ()
) -> str:
    """The work block of ``messages`` within ``budget // WORK_SHARE`` ("" when they made no
    tool call)."""
    kept = [
        m.model_copy(update={"content": work}) if len(work) < len(m.content) else m
        for m in messages
        if (work := tuple(p for p in m.content if isinstance(p, ToolCallPart | ToolResultPart)))
    ]
    shown = [s for m, s in zip(messages, seqs, strict=False) if _works(m)]
    if not kept:
        return ""
    return summarize_ledger(kept, budget // WORK_SHARE, count, shown).text


def _works(message: Message) -> bool:
    return any(isinstance(p, ToolCallPart | ToolResultPart) for p in message.content)
