"""Summariser requests that reuse the conversation's cached prefix, on both databases: real local
HTTP servers speaking OpenAI chat completions and Anthropic Messages record what ctxc sends. The
messages ahead of the instruction are, byte for byte, what a compile of the same session sends;
the instruction is the last user turn; Anthropic gets a cache breakpoint; the cached usage they
report is carried on the compaction's event. Another shape than the session's gets the
transcript request."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from app.settings import Settings
from tests.adapters.helpers import chat_completion, ledger
from tests.adapters.stubs import Answer, Received, StubServer
from tests.api.sse import stream
from tests.api.test_compaction import POLICY, QUIET, compact, work_history
from tests.conftest import LiveServer, new_session

SUMMARY = ledger("Fixed the flaky test in tests/test_sync.py (#1)")
SYSTEM = "You are a careful coding agent. Work in small steps."


def _openai(_: Received) -> Answer:
    answer = chat_completion(SUMMARY)
    answer.body["usage"] = {
        "prompt_tokens": 2_400,
        "completion_tokens": 30,
        "prompt_tokens_details": {"cached_tokens": 2_304},
    }
    return answer


def _anthropic(_: Received) -> Answer:
    return Answer(
        200,
        {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "model": "claude-x",
            "content": [{"type": "text", "text": SUMMARY}],
            "stop_reason": "end_turn",
            "usage": {
                "input_tokens": 40,
                "output_tokens": 30,
                "cache_read_input_tokens": 2_100,
                "cache_creation_input_tokens": 0,
            },
        },
    )


@dataclass(frozen=True)
class Deployment:
    client: httpx.Client
    openai: StubServer
    anthropic: StubServer


@pytest.fixture(scope="module")
def deployment(database_url: str) -> Iterator[Deployment]:
    with StubServer(_openai) as oa, StubServer(_anthropic) as an:
        profiles = {
            "gpt": {"kind": "openai", "url": f"{oa.url}/v1", "model": "small-1", "retries": 0},
            "claude": {
                "kind": "anthropic",
                "url": an.url,
                "model": "claude-x",
                "api_key": "sk-ant",
                "retries": 0,
            },
        }
        settings = Settings(database_url=database_url, summarizer_profiles=json.dumps(profiles))
        with LiveServer(settings) as server, httpx.Client(base_url=server.url) as client:
            yield Deployment(client, oa, an)


def session(client: httpx.Client, provider: str) -> str:
    """A session compiled for ``provider`` holding a system prompt and a coding session."""
    sid = new_session(client, provider=provider, compaction=QUIET)
    body = {"messages": [{"role": "system", "content": SYSTEM}, *work_history(12)]}
    posted = client.post(f"/v1/sessions/{sid}/messages", json=body)
    assert posted.status_code == 201, posted.text
    return sid


def compiled(client: httpx.Client, sid: str) -> dict[str, Any]:
    answer = client.post(f"/v1/sessions/{sid}/compile", json={})
    assert answer.status_code == 200, answer.text
    assert answer.json()["compactions"] == []
    body: dict[str, Any] = answer.json()
    return body


def compacted(d: Deployment, sid: str, profile: str) -> dict[str, Any]:
    with stream(d.client, sid) as events:
        done = compact(
            d.client, sid, kind="full", policy={**POLICY, "summarizer": {"profile": profile}}
        )
        [event] = events.read(1)
    assert done.status_code == 201, done.text
    assert event.data["outcome"] == "compacted"
    data: dict[str, Any] = event.data
    return data


def test_an_openai_summariser_reads_the_sessions_cached_prefix(deployment: Deployment) -> None:
    d = deployment
    sid = session(d.client, "gpt-4o")
    sent = compiled(d.client, sid)["messages"]
    before = len(d.openai.requests)
    event = compacted(d, sid, "gpt")
    [request] = d.openai.requests[before:]
    messages = request.json()["messages"]
    *prefix, instruction = messages
    # The whole prompt the agent was sent, the same bytes in order: its cached prefix is read.
    assert len(prefix) > 10 and json.dumps(prefix) == json.dumps(sent)
    assert prefix[0] == {"role": "system", "content": SYSTEM}
    assert instruction["role"] == "user"
    said = instruction["content"].split()
    assert said[:3] == ["Summarise", "the", "first"] and said[4:6] == ["of", "the"]
    assert 0 < int(said[3]) < int(said[6]) == len(sent) - 1  # the system prompt aside
    assert "Constraints and rules:" in instruction["content"]
    assert event["summarizer_usage"] == {
        "prompt_tokens": 2_400,
        "cached_tokens": 2_304,
        "cache_write_tokens": 0,
    }


def test_an_anthropic_summariser_sets_a_breakpoint_on_the_cached_prefix(
    deployment: Deployment,
) -> None:
    d = deployment
    sid = session(d.client, "claude-sonnet-4-5")
    compile_body = compiled(d.client, sid)
    before = len(d.anthropic.requests)
    event = compacted(d, sid, "claude")
    [request] = d.anthropic.requests[before:]
    body = request.json()
    assert body["system"] == compile_body["system"]
    *prefix, instruction = body["messages"]
    sent = compile_body["messages"]
    assert len(prefix) == len(sent) and json.dumps(prefix[:-1]) == json.dumps(sent[:-1])
    marked = prefix[-1]["content"]
    assert marked[-1]["cache_control"] == {"type": "ephemeral"}
    unmarked = [*marked[:-1], {k: v for k, v in marked[-1].items() if k != "cache_control"}]
    last = sent[-1]["content"]
    assert unmarked == ([{"type": "text", "text": last}] if isinstance(last, str) else last)
    assert instruction["role"] == "user"
    assert instruction["content"].startswith("Summarise the first ")
    assert event["summarizer_usage"] == {
        "prompt_tokens": 2_140,
        "cached_tokens": 2_100,
        "cache_write_tokens": 0,
    }


def test_another_shape_than_the_sessions_gets_the_transcript_request(
    deployment: Deployment,
) -> None:
    d = deployment
    sid = session(d.client, "gpt-4o")
    before = len(d.anthropic.requests)
    compacted(d, sid, "claude")
    [request] = d.anthropic.requests[before:]
    body = request.json()
    [turn] = body["messages"]
    assert "<transcript>" in turn["content"] and "Summarise the conversation above" not in str(body)
    assert "Goals:" in body["system"] and "cache_control" not in json.dumps(body)
