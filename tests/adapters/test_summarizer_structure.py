"""What LLM summarisers are asked for and checked on (the ledger's sections), the constraints
they are told are carried, and when a request sends the conversation as its cached prefix
(real local OpenAI-compatible servers)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import replace

import httpx

from app.adapters.summarizers.base import Source, Summarizer, Summary
from app.adapters.summarizers.openai import OpenAIChat
from app.domain.messages import Message
from app.domain.summaries.prompts import SECTIONS
from tests.adapters.helpers import POLICY, chat_completion, ledger, resilient
from tests.adapters.stubs import StubServer
from tests.unit.compiler_builders import user
from tests.unit.test_extractive_summary import build_failure

HISTORY = build_failure()
SOURCE = Source(target="openai", carried=2)


def openai(url: str) -> OpenAIChat:
    return OpenAIChat(httpx.AsyncClient(), f"{url}/v1", "small-model", None)


def run(summarizer: Summarizer, history: Sequence[Message], source: Source = SOURCE) -> Summary:
    async def go() -> Summary:
        try:
            return await summarizer.summarize(history, "session_compaction", 300, source)
        finally:
            await summarizer.aclose()

    return asyncio.run(go())


def test_an_answer_without_the_sections_falls_back_saying_why() -> None:
    with StubServer(lambda _: chat_completion("The port default was fixed.")) as stub:
        summary = run(resilient(openai(stub.url)), HISTORY)
    assert len(stub.requests) == 1  # not retried
    assert summary.backend == "extractive"
    assert summary.fallback_reason == (
        "openai: the answer is not the ledger's sections: text before the first section: "
        "'The port default was fixed.'"
    )


def test_the_session_shape_sends_the_messages_then_the_instruction_with_the_sections() -> None:
    with StubServer(lambda _: chat_completion(ledger("ok"))) as stub:
        summary = run(resilient(openai(stub.url)), HISTORY)
    assert summary.backend == "openai" and summary.usage is not None
    assert summary.usage.prompt_tokens == 10 and summary.usage.cached_tokens == 0
    *prefix, last = stub.requests[0].json()["messages"]
    assert [m["role"] for m in prefix][:2] == ["user", "assistant"]
    assert last["role"] == "user"
    assert all(title in last["content"] for title in SECTIONS)
    assert "2 constraints are carried verbatim ahead of your summary" in last["content"]


def test_a_history_in_parts_and_another_shape_get_the_transcript_request() -> None:
    policy = replace(POLICY, window_tokens=1_216, max_tokens=64)
    log = "\n".join(f"step {n}: built module_{n}.py in {n % 7} ms" for n in range(300))
    long = [*HISTORY, user(log)]
    with StubServer(lambda _: chat_completion(ledger("part"))) as stub:
        run(resilient(openai(stub.url), policy), long)
    assert len(stub.requests) > 2
    for request in stub.requests:
        system, prompt = request.json()["messages"]
        assert system["role"] == "system" and "<transcript>" in prompt["content"]
    with StubServer(lambda _: chat_completion(ledger("ok"))) as stub:
        run(resilient(openai(stub.url)), HISTORY, replace(SOURCE, target="anthropic"))
    system, prompt = stub.requests[0].json()["messages"]
    assert system["role"] == "system" and "<transcript>" in prompt["content"]
