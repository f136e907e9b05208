"""Builders for summariser adapter tests."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from app.adapters.summarizers import Summarizer, Summary
from app.adapters.summarizers.base import Backend
from app.adapters.summarizers.extractive import Extractive
from app.adapters.summarizers.resilient import Policy, Resilient
from app.adapters.tokenizers import load_counter
from app.domain.messages import Message
from app.domain.summaries import Reason
from app.domain.summaries.work_block import work_block
from tests.adapters.stubs import Answer
from tests.unit.test_extractive_summary import build_failure

COUNTER = load_counter()
COUNT = COUNTER.encoder("o200k_base").count
# The history the remote summariser tests send: a failure being fixed, with tool calls.
HISTORY = build_failure()
# Short limits keep the tests fast; the backoff is short too, never zero.
POLICY = Policy(
    timeout=2.0,
    retries=2,
    deadline=30.0,
    window_tokens=32_000,
    max_tokens=500,
    backoff=0.01,
    max_backoff=0.05,
)


def resilient(backend: Backend, policy: Policy = POLICY) -> Resilient:
    return Resilient(backend, Extractive(COUNT, policy.max_tokens), COUNT, policy)


def summarize(
    summarizer: Summarizer,
    history: Sequence[Message],
    reason: Reason = "session_compaction",
    max_tokens: int | None = None,
) -> Summary:
    """Run one summary (within ``max_tokens``) on a fresh event loop, then close the summariser."""

    async def run() -> Summary:
        try:
            return await summarizer.summarize(history, reason, max_tokens)
        finally:
            await summarizer.aclose()

    return asyncio.run(run())


def ledger(text: str) -> str:
    """``text`` as the one entry of a summary with the ledger's sections (what LLM summarisers
    are asked for, and checked on)."""
    return f"Decisions:\n- {text}"


def chat_completion(text: str) -> Answer:
    """An OpenAI chat completion answer."""
    body: dict[str, Any] = {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "model": "summarizer",
        "choices": [
            {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": text}}
        ],
        "usage": {"prompt_tokens": 10, "completion_tokens": 3, "total_tokens": 13},
    }
    return Answer(200, body)


def work(budget: int) -> str:
    """The work block a remote summary of ``HISTORY`` within ``budget`` opens with."""
    return work_block(HISTORY, budget, COUNT) + "\n\n"


def asked(budget: int) -> int:
    """What the model is asked for: the budget less the work block."""
    return budget - COUNT(work(budget))


def prose(text: str) -> str:
    """A remote summary's text after the work block that opens it (the history's tool calls)."""
    assert text.startswith("Tool calls and files:\n")
    return text.split("\n\n", 1)[1]
