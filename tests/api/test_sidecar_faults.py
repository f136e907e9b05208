"""The sidecar when things go wrong: upstream errors, a prompt too long, timeouts, agents that go
away, ctxc's own refusals, other calls forwarded, credentials kept out of storage and logs."""

from __future__ import annotations

import asyncio
import json
import logging
import time
import uuid
from typing import Any

import anthropic
import httpx
import openai
import pytest
from sqlalchemy import select

from app.storage.db import create_engine
from app.storage.models import Base
from tests.api.sidecar import (
    Sidecar,
    anthropic_loop,
    openai_loop,
    stored,
)
from tests.conftest import row_counts
from tests.upstreams import Delay, Error, Stall, Upstream


def test_upstream_error_passes_through_and_stores_nothing(sidecar: Sidecar, up: Upstream) -> None:
    session = f"agent-{uuid.uuid4().hex[:8]}"
    client = sidecar.openai(session)
    history: list[Any] = [{"role": "user", "content": "hi"}]
    history.append(
        client.chat.completions.create(model="gpt-4o", messages=history).choices[0].message
    )
    history.append({"role": "user", "content": "more"})
    before = row_counts(sidecar.database_url)
    up.script.append(Error("rate_limit"))
    with pytest.raises(openai.RateLimitError) as caught:
        client.chat.completions.create(model="gpt-4o", messages=history)
    assert caught.value.response.headers.get("retry-after")
    # Only the compile is recorded (with the failure on it, as an acknowledgement says it).
    assert row_counts(sidecar.database_url) == before | {"compiles": before["compiles"] + 1}
    # The retry finds the session as it was: it stores the new message and the reply.
    client.chat.completions.create(model="gpt-4o", messages=history)
    assert [m["role"] for m in stored(sidecar, session)] == [
        "user",
        "assistant",
        "user",
        "assistant",
    ]


def test_ctxc_refusals_in_the_provider_shape(sidecar: Sidecar, up: Upstream) -> None:
    bad = sidecar.openai()
    bad = bad.with_options(default_headers={"X-Ctxc-Api-Key": "nope"})
    with pytest.raises(openai.AuthenticationError):
        bad.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "hi"}])
    with pytest.raises(anthropic.BadRequestError) as caught:
        sidecar.anthropic("s-" + uuid.uuid4().hex[:6]).messages.create(
            model="claude-haiku-4-5",
            max_tokens=10,
            messages=[{"role": "robot", "content": "hi"}],  # type: ignore[typeddict-item]
        )
    assert "messages" in json.dumps(caught.value.body)
    assert not up.requests


def test_prompt_too_long_compacts_and_retries_once(sidecar: Sidecar, up: Upstream) -> None:
    session = f"retry-{uuid.uuid4().hex[:6]}"
    history = openai_loop(sidecar, session, turns=6, window=100_000)
    up.requests.clear()
    # The upstream counts more than ctxc's budget allows for: it refuses the first attempt.
    up.window = 1_500
    try:
        history.append({"role": "user", "content": "Now summarise what you saw."})
        raw = sidecar.openai(
            session, **{"X-Ctxc-Context-Window": "100000"}
        ).chat.completions.with_raw_response.create(model="gpt-4o", messages=history)
    finally:
        up.window = 1_000_000
    assert raw.parse().choices[0].message.content
    assert raw.headers["x-ctxc-retried"] == "prompt_too_long"
    assert len(up.requests) == 2
    assert len(json.dumps(up.requests[1].body)) < len(json.dumps(up.requests[0].body))
    with sidecar.ctxc() as c:
        compactions = c.get(f"/v1/sessions/{session}/compactions").json()["items"]
    assert [r["reason"] for r in compactions] == ["reactive_full"]


def test_a_second_overflow_reaches_the_agent_as_the_upstream_sent_it(
    sidecar: Sidecar, up: Upstream
) -> None:
    up.script.extend([Error("overflow"), Error("overflow")])
    with pytest.raises(openai.BadRequestError) as caught:
        sidecar.openai(f"twice-{uuid.uuid4().hex[:6]}").chat.completions.create(
            model="gpt-4o", messages=[{"role": "user", "content": "hi"}]
        )
    assert caught.value.code == "context_length_exceeded"
    assert len(up.requests) == 2


def test_an_agent_gone_mid_stream_cancels_the_upstream_and_stores_nothing(
    sidecar: Sidecar, up: Upstream
) -> None:
    session = f"gone-{uuid.uuid4().hex[:6]}"
    client = sidecar.openai(session)
    client.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "hi"}])
    before = row_counts(sidecar.database_url)
    up.script.append(Stall(after_chunks=2, seconds=30))
    with client.chat.completions.create(
        model="gpt-4o",
        stream=True,
        messages=[{"role": "user", "content": "hi again, differently"}],
    ) as stream:
        next(iter(stream))
    # The upstream saw its client (ctxc) go away.
    deadline = time.monotonic() + 10
    while not up.cancelled and time.monotonic() < deadline:
        time.sleep(0.05)
    assert up.cancelled
    after = row_counts(sidecar.database_url)
    # Another first message: another conversation, beside the first (``<id>:thread-1``, made
    # on arrival): nothing of the cut turn was stored, and the first is as it was.
    assert after["messages"] == before["messages"]
    assert [m["role"] for m in stored(sidecar, session)] == ["user", "assistant"]
    assert stored(sidecar, f"{session}:thread-1") == []


def test_an_upstream_that_does_not_answer_in_time_is_a_504(sidecar: Sidecar, up: Upstream) -> None:
    session = f"slow-{uuid.uuid4().hex[:6]}"
    up.script.append(Delay(seconds=5))
    with pytest.raises(openai.InternalServerError) as caught:
        sidecar.openai(session).chat.completions.create(
            model="gpt-4o", messages=[{"role": "user", "content": "hi"}]
        )
    assert caught.value.status_code == 504
    assert stored(sidecar, session) == []


def test_an_agent_that_gives_up_waiting_cancels_the_upstream(
    sidecar: Sidecar, up: Upstream
) -> None:
    session = f"impatient-{uuid.uuid4().hex[:6]}"
    up.script.append(Delay(seconds=4))
    impatient = sidecar.openai(session).with_options(timeout=1.0)
    with pytest.raises(openai.APITimeoutError):
        impatient.chat.completions.create(
            model="gpt-4o", messages=[{"role": "user", "content": "hi"}]
        )
    assert up.wait_cancelled(1, timeout=10)
    assert stored(sidecar, session) == []


def test_other_provider_calls_are_forwarded_as_they_are(sidecar: Sidecar, up: Upstream) -> None:
    assert [m.id for m in sidecar.openai().models.list()] == ["gpt-4o"]
    assert [m.id for m in sidecar.anthropic().models.list()] == ["gpt-4o"]
    assert [r.path for r in up.requests] == ["/v1/models", "/v1/models"]
    # The provider's credentials go on; ctxc's own key does not.
    assert up.requests[0].headers["authorization"] == "Bearer sk-upstream"
    assert all("x-ctxc-api-key" not in r.headers for r in up.requests)
    # Only for a tenant of this ctxc: it is not an open proxy.
    with httpx.Client() as plain:
        refused = plain.get(
            f"{sidecar.url}/openai/v1/models", headers={"Authorization": "Bearer sk-upstream"}
        )
    assert refused.status_code == 401 and refused.json()["error"]["message"]
    assert len(up.requests) == 2


def _all_rows_text(database_url: str) -> str:
    async def run() -> str:
        engine = create_engine(database_url)
        try:
            async with engine.connect() as conn:
                rows = []
                for table in Base.metadata.sorted_tables:
                    rows += [str(tuple(r)) for r in await conn.execute(select(table))]
                return "\n".join(rows)
        finally:
            await engine.dispose()

    return asyncio.run(run())


def test_provider_credentials_are_never_stored_or_logged(
    sidecar: Sidecar, up: Upstream, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    session = f"creds-{uuid.uuid4().hex[:6]}"
    openai_loop(sidecar, session, turns=2, window=100_000)
    anthropic_loop(sidecar, f"{session}-a", turns=1, window=100_000)
    assert {r.headers.get("authorization") for r in up.requests} == {
        "Bearer sk-upstream",
        "Bearer sk-ant-upstream",
    }
    text = _all_rows_text(sidecar.database_url)
    assert session in text  # the rows were read
    assert "sk-upstream" not in text and "sk-ant-upstream" not in text
    assert "sk-upstream" not in caplog.text and "sk-ant-upstream" not in caplog.text


# What Claude Code and Codex CLI send beside the provider's own headers (issue: dropped before).
AGENT_HEADERS = {
    "x-app": "cli",
    "x-claude-code-session-id": "3f2c-session",
    "anthropic-dangerous-direct-browser-access": "true",
    "x-stainless-lang": "js",
    "x-stainless-retry-count": "0",
    "originator": "codex_cli_rs",
    "session-id": "0199-thread",
    "x-client-request-id": "0199-request",
    "x-codex-beta-features": "unified_exec",
    "accept": "text/event-stream",
}


@pytest.mark.parametrize("managed", [True, False])
def test_every_end_to_end_header_and_the_query_reach_the_upstream(
    sidecar: Sidecar, up: Upstream, managed: bool
) -> None:
    session = {"X-Ctxc-Session": f"pass-{uuid.uuid4().hex[:6]}"} if managed else {}
    headers = {
        **AGENT_HEADERS,
        **session,
        "x-api-key": "sk-ant-upstream",
        "anthropic-version": "2023-06-01",
        "X-Ctxc-Api-Key": sidecar.key,
        "Connection": "keep-alive",
    }
    body = {
        "model": "claude-haiku-4-5",
        "max_tokens": 64,
        "messages": [{"role": "user", "content": "hi"}],
    }
    with httpx.Client(timeout=30) as client:
        answer = client.post(
            f"{sidecar.url}/anthropic/v1/messages?beta=true", json=body, headers=headers
        )
    assert answer.status_code == 200, answer.text
    [seen] = up.requests
    assert seen.path == "/v1/messages" and seen.query == "beta=true"
    assert {k: seen.headers.get(k) for k in AGENT_HEADERS} == AGENT_HEADERS
    assert seen.headers["x-api-key"] == "sk-ant-upstream"
    # Not ctxc's own headers, nor those of the agent's connection to ctxc.
    assert not [k for k in seen.headers if k.startswith("x-ctxc-")]
    assert seen.headers["host"] != httpx.URL(sidecar.url).netloc.decode()
    # The upstream's answer headers come back, beside ctxc's.
    assert answer.headers["request-id"].startswith("req_upstream")
    assert ("x-ctxc-session" in answer.headers) is managed


def test_a_forwarded_call_keeps_its_headers_and_query(sidecar: Sidecar, up: Upstream) -> None:
    headers = {
        **AGENT_HEADERS,
        "Authorization": "Bearer sk-upstream",
        "X-Ctxc-Api-Key": sidecar.key,
    }
    with httpx.Client(timeout=30) as client:
        answer = client.get(f"{sidecar.url}/openai/v1/models?limit=5&after=a", headers=headers)
    assert answer.status_code == 200, answer.text
    [seen] = up.requests
    assert seen.query == "limit=5&after=a"
    assert {k: seen.headers.get(k) for k in AGENT_HEADERS} == AGENT_HEADERS
    assert not [k for k in seen.headers if k.startswith("x-ctxc-")]


def test_a_head_request_is_forwarded_too(sidecar: Sidecar, up: Upstream) -> None:
    # Claude Code checks its base URL with `HEAD /api/hello` before its first request.
    with httpx.Client(timeout=30) as client:
        answer = client.head(
            f"{sidecar.url}/anthropic/api/hello", headers={"X-Ctxc-Api-Key": sidecar.key}
        )
    assert answer.status_code == 404  # the upstream's own answer, not ctxc's 405
    assert "x-ctxc-session" not in answer.headers
