"""The OpenAI-compatible summariser against a real local HTTP server speaking the protocol:
success, retries, and the fallback to the extractive summary on a 500, a timeout, a refused
connection, a 4xx, a malformed answer and the overall deadline; chunking past the window."""

from __future__ import annotations

from dataclasses import replace

import httpx

from app.adapters.summarizers import summarizer_from_settings
from app.adapters.summarizers.openai import OpenAIChat
from app.domain.summaries.extractive import summarize_extractive
from app.settings import Settings
from tests.adapters.helpers import (
    COUNT,
    COUNTER,
    HISTORY,
    POLICY,
    asked,
    chat_completion,
    ledger,
    prose,
    resilient,
    summarize,
    work,
)
from tests.adapters.stubs import Answer, Received, StubServer
from tests.conftest import free_port
from tests.unit.compiler_builders import user


def openai(url: str, key: str | None = "sk-test") -> OpenAIChat:
    return OpenAIChat(httpx.AsyncClient(), f"{url}/v1", "small-model", key)


def test_the_endpoint_configured_in_the_settings_writes_the_summary() -> None:
    with StubServer(
        lambda _: chat_completion("  " + ledger("Fixed the port default.") + "\n")
    ) as stub:
        settings = Settings(
            summarizer="openai",
            summarizer_url=f"{stub.url}/v1",
            summarizer_model="small-model",
            summarizer_api_key="sk-test",
        )
        summary = summarize(summarizer_from_settings(settings, COUNTER), HISTORY)
    assert (prose(summary.text), summary.backend, summary.fallback_reason) == (
        ledger("Fixed the port default."),
        "openai",
        None,
    )
    [request] = stub.requests
    assert request.path == "/v1/chat/completions"
    assert request.headers["authorization"] == "Bearer sk-test"
    body = request.json()
    assert (body["model"], body["max_tokens"]) == (
        "small-model",
        asked(settings.summarizer_max_tokens),
    )
    system, prompt = body["messages"]
    assert system["role"] == "system" and "older part" in system["content"]
    assert prompt["role"] == "user"
    assert "[tool call call_2] bash" in prompt["content"]
    assert "src/app.py" in prompt["content"]


def test_a_summary_over_its_budget_is_refused_for_the_extractive_one_within_it() -> None:
    # The model is asked for at most the budget, and ignores it.
    wordy = ledger(" ".join(f"finding_{n} holds." for n in range(400)))
    with StubServer(lambda _: chat_completion(wordy)) as stub:
        summary = summarize(resilient(openai(stub.url)), HISTORY, "reactive_full", 120)
    assert stub.requests[0].json()["max_tokens"] == asked(120)
    assert summary.backend == "extractive"
    assert summary.fallback_reason == (
        f"openai: the summary has {COUNT(work(120) + wordy)} tokens, over its budget of 120"
    )
    assert summary.text == summarize_extractive(HISTORY, "reactive_full", 120, COUNT)
    assert COUNT(summary.text) <= 120


def test_a_budget_over_the_configured_max_tokens_asks_for_that_much() -> None:
    with StubServer(lambda _: chat_completion(ledger("short"))) as stub:
        summary = summarize(resilient(openai(stub.url)), HISTORY, "reactive_full", 5_000)
    assert stub.requests[0].json()["max_tokens"] == POLICY.max_tokens
    assert (prose(summary.text), summary.backend) == (ledger("short"), "openai")


def test_without_a_key_no_authorization_header_is_sent() -> None:
    with StubServer(lambda _: chat_completion(ledger("ok"))) as stub:
        summary = summarize(resilient(openai(stub.url, key=None)), HISTORY)
    assert summary.backend == "openai"
    assert "authorization" not in stub.requests[0].headers


def test_a_500_is_retried_then_the_extractive_summary_is_used() -> None:
    with StubServer(lambda _: Answer(500, {"error": {"message": "model crashed"}})) as stub:
        summary = summarize(resilient(openai(stub.url)), HISTORY, "reactive_full")
    assert len(stub.requests) == summary.requests == POLICY.retries + 1
    assert summary.backend == "extractive"
    assert summary.fallback_reason == (
        'openai: HTTP 500: {"error": {"message": "model crashed"}} (3 attempts)'
    )
    assert summary.text == summarize_extractive(HISTORY, "reactive_full", 500, COUNT)
    assert "tests/test_app.py" in summary.text


def test_a_500_then_an_answer_is_a_summary_after_one_retry() -> None:
    def flaky(_: Received) -> Answer:
        return (
            Answer(503, "busy")
            if len(stub.requests) == 1
            else chat_completion(ledger("second try"))
        )

    with StubServer(flaky) as stub:
        summary = summarize(resilient(openai(stub.url)), HISTORY)
    assert (prose(summary.text), summary.backend, summary.requests) == (
        ledger("second try"),
        "openai",
        2,
    )


def test_a_429_and_a_408_are_retried_honouring_retry_after() -> None:
    answers = [
        Answer(429, {}, {"retry-after": "0.01"}),
        Answer(408, {}),
        chat_completion(ledger("ok")),
    ]
    with StubServer(lambda _: answers[len(stub.requests) - 1]) as stub:
        summary = summarize(resilient(openai(stub.url)), HISTORY)
    assert (summary.backend, summary.requests) == ("openai", 3)


def test_a_timeout_is_retried_then_the_extractive_summary_is_used() -> None:
    policy = replace(POLICY, timeout=0.2, retries=1)
    with StubServer(lambda _: None) as stub:
        summary = summarize(resilient(openai(stub.url), policy), HISTORY)
    assert len(stub.requests) == summary.requests == 2
    assert summary.backend == "extractive"
    assert summary.fallback_reason == "openai: no answer within 0.2 s (2 attempts)"
    assert "src/app.py" in summary.text


def test_the_deadline_bounds_the_whole_summary_whatever_the_retries() -> None:
    policy = replace(POLICY, timeout=5.0, retries=5, deadline=0.3)
    with StubServer(lambda _: None) as stub:
        summary = summarize(resilient(openai(stub.url), policy), HISTORY)
    assert len(stub.requests) == 1
    assert summary.fallback_reason == "openai: no summary within the deadline of 0.3 s"


def test_a_refused_connection_is_retried_then_the_extractive_summary_is_used() -> None:
    summary = summarize(resilient(openai(f"http://127.0.0.1:{free_port()}")), HISTORY)
    assert summary.requests == 3
    assert summary.fallback_reason == "openai: connection failed (ConnectError) (3 attempts)"


def test_a_4xx_is_not_retried() -> None:
    with StubServer(lambda _: Answer(401, {"error": "bad key"})) as stub:
        summary = summarize(resilient(openai(stub.url)), HISTORY)
    assert len(stub.requests) == 1
    assert summary.fallback_reason == 'openai: HTTP 401: {"error": "bad key"} (1 attempt)'


def test_an_answer_without_a_summary_is_not_retried() -> None:
    for body in ({"choices": []}, b"not json", chat_completion("   ").body):
        with StubServer(lambda _, body=body: Answer(200, body)) as stub:
            summary = summarize(resilient(openai(stub.url)), HISTORY)
        assert len(stub.requests) == 1
        assert summary.backend == "extractive"
        assert summary.fallback_reason is not None
    assert summary.fallback_reason == "openai: the answer holds no summary text (1 attempt)"


def test_a_history_over_the_window_is_summarised_in_parts_then_merged() -> None:
    policy = replace(POLICY, window_tokens=1_216, max_tokens=64)
    log = "\n".join(f"step {n}: built module_{n}.py in {n % 7} ms" for n in range(300))
    history = [*HISTORY, user(log), user("And now the docs, please.")]

    with StubServer(lambda _: chat_completion(ledger(f"summary {len(stub.requests)}"))) as stub:
        summarizer = resilient(openai(stub.url), policy)
        budget = summarizer.input_budget("session_compaction")
        summary = summarize(summarizer, history)
    prompts = [r.json()["messages"][1]["content"] for r in stub.requests]
    n = len(prompts) - 1  # the last request merges the partial summaries
    assert n > 2
    assert prose(summary.text) == ledger(f"summary {n + 1}") and summary.requests == n + 1
    assert all(p.startswith(f"This is part {k} of {n} ") for k, p in enumerate(prompts[:n], 1))
    assert all(COUNT(p) <= budget + 64 for p in prompts)
    assert "[Summary of part 1 of" in prompts[-1] and f"summary {n}" in prompts[-1]


def test_an_empty_history_needs_no_request() -> None:
    with StubServer(lambda _: chat_completion("never")) as stub:
        summary = summarize(resilient(openai(stub.url)), [])
    assert stub.requests == []
    assert (summary.backend, summary.fallback_reason, summary.requests) == ("extractive", None, 0)
