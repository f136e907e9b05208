"""The Anthropic Messages summariser and the operator's webhook, against real local HTTP
servers: the request each sends, the HMAC signature a receiver can verify, and the fallback when
the receiver refuses it."""

from __future__ import annotations

import hashlib
import hmac
import time
from dataclasses import replace

import httpx

from app.adapters.summarizers import summarizer_from_settings
from app.adapters.summarizers.webhook import Webhook, sign
from app.domain.messages import Message
from app.settings import Settings
from tests.adapters.helpers import (
    COUNTER,
    HISTORY,
    POLICY,
    asked,
    ledger,
    prose,
    resilient,
    summarize,
)
from tests.adapters.stubs import Answer, Handler, Received, StubServer

SECRET = b"operator-secret"
TOLERANCE_SECONDS = 300


def test_the_anthropic_messages_api_writes_the_summary() -> None:
    answer = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-x",
        "content": [
            {"type": "text", "text": "Decisions:\n- Port default "},
            {"type": "text", "text": "fixed."},
        ],
        "stop_reason": "end_turn",
        "usage": {"input_tokens": 10, "output_tokens": 4, "cache_read_input_tokens": 0},
    }
    with StubServer(lambda _: Answer(200, answer)) as stub:
        settings = Settings(
            summarizer="anthropic",
            summarizer_url=stub.url,
            summarizer_model="claude-x",
            summarizer_api_key="sk-ant",
        )
        summary = summarize(summarizer_from_settings(settings, COUNTER), HISTORY, "reactive_micro")
    assert (prose(summary.text), summary.backend, summary.requests) == (
        ledger("Port default fixed."),
        "anthropic",
        1,
    )
    assert summary.usage is not None and summary.usage.prompt_tokens == 10
    [request] = stub.requests
    assert request.path == "/v1/messages"
    assert request.headers["x-api-key"] == "sk-ant"
    assert request.headers["anthropic-version"] == "2023-06-01"
    body = request.json()
    assert (body["model"], body["max_tokens"]) == (
        "claude-x",
        asked(settings.summarizer_max_tokens),
    )
    assert "oldest few rounds" in body["system"]
    [turn] = body["messages"]
    assert turn["role"] == "user" and "src/app.py" in turn["content"]


def receiver(secret: bytes) -> tuple[list[str], Handler]:
    """A webhook that checks the signature and the timestamp as a caller's receiver would."""
    refusals: list[str] = []

    def handle(request: Received) -> Answer:
        timestamp = request.headers.get("x-ctxc-timestamp", "")
        mac = hmac.new(secret, timestamp.encode() + b"." + request.body, hashlib.sha256)
        expected = f"sha256={mac.hexdigest()}"
        if not hmac.compare_digest(expected, request.headers.get("x-ctxc-signature", "")):
            refusals.append("signature")
            return Answer(401, {"error": "bad signature"})
        if abs(time.time() - int(timestamp)) > TOLERANCE_SECONDS:
            refusals.append("timestamp")
            return Answer(401, {"error": "stale request"})
        count = len(request.json()["messages"])
        return Answer(200, {"summary": ledger(f"{count} messages summarised")})

    return refusals, handle


def webhook(url: str, secret: bytes = SECRET, clock: float | None = None) -> Webhook:
    now = time.time if clock is None else (lambda: clock)
    return Webhook(httpx.AsyncClient(), f"{url}/hooks/summarize", secret, now)


def test_a_signed_webhook_receives_the_canonical_messages_and_answers_the_summary() -> None:
    refusals, handle = receiver(SECRET)
    with StubServer(handle) as stub:
        settings = Settings(
            summarizer="webhook",
            summarizer_url=f"{stub.url}/hooks/summarize",
            summarizer_webhook_secret=SECRET.decode(),
        )
        summary = summarize(summarizer_from_settings(settings, COUNTER), HISTORY, "reactive_full")
    assert refusals == []
    assert (prose(summary.text), summary.backend, summary.requests) == (
        ledger("6 messages summarised"),
        "webhook",
        1,
    )
    [request] = stub.requests
    assert request.path == "/hooks/summarize"
    body = request.json()
    assert (body["reason"], body["part"], body["max_tokens"]) == (
        "reactive_full",
        None,
        asked(2_000),
    )
    assert "context window is nearly full" in body["instructions"]
    assert [Message.model_validate(m) for m in body["messages"]] == HISTORY


def test_the_signature_is_an_hmac_of_the_timestamp_and_the_raw_body() -> None:
    mac = hmac.new(b"k", b"1700000000.{}", hashlib.sha256).hexdigest()
    assert sign(b"k", "1700000000", b"{}") == f"sha256={mac}"


def test_a_receiver_with_another_secret_refuses_and_the_extractive_summary_is_used() -> None:
    refusals, handle = receiver(b"not-the-operator-secret")
    with StubServer(handle) as stub:
        summary = summarize(resilient(webhook(stub.url)), HISTORY)
    assert refusals == ["signature"]  # a 401 is not retried
    assert (summary.backend, summary.summarizer_reason) == ("extractive", "fallback")
    assert summary.fallback_reason == 'webhook: HTTP 401: {"error": "bad signature"} (1 attempt)'
    assert "tests/test_app.py" in summary.text


def test_a_replayed_request_is_refused_by_its_timestamp() -> None:
    refusals, handle = receiver(SECRET)
    with StubServer(handle) as stub:
        summary = summarize(resilient(webhook(stub.url, clock=time.time() - 3_600)), HISTORY)
    assert refusals == ["timestamp"]
    assert summary.backend == "extractive"


def test_a_webhook_answer_without_a_summary_falls_back() -> None:
    with StubServer(lambda _: Answer(200, ["not", "an", "object"])) as stub:
        summary = summarize(resilient(webhook(stub.url), replace(POLICY, retries=0)), HISTORY)
    assert summary.fallback_reason == "webhook: unexpected answer: not a JSON object (1 attempt)"


def test_an_empty_history_is_not_sent_and_its_summary_says_so() -> None:
    calls: list[Received] = []

    def answer(request: Received) -> Answer:
        calls.append(request)
        return Answer(200, {"summary": ledger("x")})

    with StubServer(answer) as stub:
        summary = summarize(resilient(webhook(stub.url)), [])
    assert calls == []
    assert (summary.backend, summary.summarizer_reason) == ("extractive", "nothing_to_summarize")
    assert summary.fallback_reason is None  # nothing failed
