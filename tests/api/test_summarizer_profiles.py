"""The summariser chosen per session and per request, on both databases: deployment profiles
(real local HTTP summarisers), a session's choice, a request's override, instructions and model
reaching the request, fallback to another profile, and the 422s for what a session may not say."""

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
from tests.api.test_compaction import POLICY, compact, session_with
from tests.conftest import LiveServer, row_counts


@dataclass(frozen=True)
class Deployment:
    """A ctxc server with three profiles and the summarisers behind them."""

    client: httpx.Client
    fast: StubServer  # openai-compatible, profile "fast"
    hook: StubServer  # webhook, profile "hook"
    broken: StubServer  # openai-compatible answering 500, profile "broken"
    database_url: str


def _chat(received: Received) -> Answer:
    return chat_completion(ledger(f"fast summary of {len(received.body)} bytes about src/pkg"))


def _hook(received: Received) -> Answer:
    return Answer(
        200, {"summary": ledger(f"{len(received.json()['messages'])} messages about src/pkg")}
    )


def _down(_: Received) -> Answer:
    return Answer(500, {"error": {"message": "overloaded"}})


@pytest.fixture(scope="module")
def deployment(database_url: str) -> Iterator[Deployment]:
    with StubServer(_chat) as fast, StubServer(_hook) as hook, StubServer(_down) as broken:
        profiles = {
            "fast": {
                "kind": "openai",
                "url": f"{fast.url}/v1",
                "model": "small-1",
                "api_key": "fast-key",
            },
            "hook": {
                "kind": "webhook",
                "url": f"{hook.url}/summarize",
                "webhook_secret": "hook-secret",
                "retries": 0,
            },
            "broken": {
                "kind": "openai",
                "url": f"{broken.url}/v1",
                "model": "m",
                "retries": 0,
                "fallback": "hook",
            },
        }
        settings = Settings(database_url=database_url, summarizer_profiles=json.dumps(profiles))
        with LiveServer(settings) as server, httpx.Client(base_url=server.url) as client:
            yield Deployment(client, fast, hook, broken, database_url)


def choose(**summarizer: Any) -> dict[str, Any]:
    return {**POLICY, "summarizer": summarizer}


def test_a_session_chooses_a_profile_with_its_model_and_instructions(
    deployment: Deployment,
) -> None:
    d = deployment
    asked = "Keep every ticket number like ABC-123 verbatim."
    sid = session_with(
        d.client, compaction=choose(profile="fast", model="large-2", instructions=asked)
    )
    before = len(d.fast.requests)
    done = compact(d.client, sid, kind="full")
    assert done.status_code == 201, done.text
    assert done.json()["summarizer"] == "openai large-2 [profile fast]"
    [request] = d.fast.requests[before:]
    body = request.json()
    assert body["model"] == "large-2"
    assert body["messages"][-1]["content"].endswith(  # the instruction turn, last
        f"Further instructions for this summary:\n{asked}"
    )
    assert request.headers["authorization"] == "Bearer fast-key"  # the deployment's credential
    stored = d.client.get(f"/v1/sessions/{sid}").json()["compaction"]["summarizer"]
    assert stored == {"profile": "fast", "model": "large-2", "instructions": asked}


def test_a_compact_request_overrides_the_sessions_summarizer(deployment: Deployment) -> None:
    d = deployment
    sid = session_with(d.client, compaction=choose(profile="fast", instructions="fast only"))
    fast, hooked = len(d.fast.requests), len(d.hook.requests)
    policy = {"summarizer": {"profile": "hook", "instructions": "Name the files."}}
    done = compact(d.client, sid, kind="full", policy=policy)
    assert done.status_code == 201, done.text
    assert done.json()["summarizer"] == "webhook [profile hook]"
    assert len(d.fast.requests) == fast  # the session's profile was not asked
    [request] = d.hook.requests[hooked:]
    sent = request.json()["instructions"]
    assert sent.endswith("Name the files.") and "fast only" not in sent  # replaced, whole


def test_a_compile_override_chooses_the_summarizer_of_its_compactions(
    deployment: Deployment,
) -> None:
    d = deployment
    sid = session_with(d.client, compaction=POLICY)
    hooked = len(d.hook.requests)
    override = {"summarizer": {"profile": "hook"}}
    compiled = d.client.post(f"/v1/sessions/{sid}/compile", json={"compaction": override})
    assert compiled.status_code == 200, compiled.text
    records = d.client.get(f"/v1/sessions/{sid}/compactions").json()["items"]
    assert records and {r["summarizer"] for r in records} == {"webhook [profile hook]"}
    assert len(d.hook.requests) - hooked == len(records)


def test_a_failing_profile_falls_back_to_its_fallback_profile(deployment: Deployment) -> None:
    d = deployment
    sid = session_with(d.client, compaction=choose(profile="broken"))
    tried, hooked = len(d.broken.requests), len(d.hook.requests)
    done = compact(d.client, sid, kind="full")
    assert done.status_code == 201, done.text
    written = done.json()["summarizer"]
    assert written.startswith("webhook [profile hook] (fallback: openai: HTTP 500"), written
    assert (len(d.broken.requests) - tried, len(d.hook.requests) - hooked) == (1, 1)
    # The session may name another fallback: here the built-in summariser.
    sid = session_with(d.client, compaction=choose(profile="broken", fallback="extractive"))
    done = compact(d.client, sid, kind="full")
    assert done.json()["summarizer"].startswith("extractive (fallback: openai: HTTP 500")
    assert len(d.hook.requests) - hooked == 1


@pytest.mark.parametrize(
    ("summarizer", "path"),
    [
        ({"profile": "nope"}, "body.compaction.summarizer.profile"),
        ({"profile": "fast", "fallback": "gone"}, "body.compaction.summarizer.fallback"),
        ({"profile": "fast", "api_key": "sk-mine"}, "body.compaction.summarizer.api_key"),
        ({"url": "http://elsewhere.example/v1"}, "body.compaction.summarizer.url"),
        ({"instructions": "x" * 2_001}, "body.compaction.summarizer.instructions"),
    ],
)
def test_a_session_may_not_name_an_unknown_profile_nor_carry_credentials(
    deployment: Deployment, summarizer: dict[str, Any], path: str
) -> None:
    d = deployment
    counts = row_counts(d.database_url)
    body = {"provider": "gpt-4o", "compaction": choose(**summarizer)}
    created = d.client.post("/v1/sessions", json=body)
    assert created.status_code == 422, created.text
    assert [e["path"] for e in created.json()["errors"]] == [path]
    assert "sk-mine" not in created.text
    assert row_counts(d.database_url) == counts
    sid = session_with(d.client)
    counts = row_counts(d.database_url)
    patched = d.client.patch(f"/v1/sessions/{sid}", json={"compaction": choose(**summarizer)})
    assert patched.status_code == 422, patched.text
    assert [e["path"] for e in patched.json()["errors"]] == [path]
    assert row_counts(d.database_url) == counts


def test_a_request_may_not_name_an_unknown_profile(deployment: Deployment) -> None:
    d = deployment
    sid = session_with(d.client, compaction=POLICY)
    counts = row_counts(d.database_url)
    bad = {"summarizer": {"profile": "nope"}}
    done = compact(d.client, sid, kind="full", policy=bad)
    assert done.status_code == 422, done.text
    assert [e["path"] for e in done.json()["errors"]] == ["body.policy.summarizer.profile"]
    compiled = d.client.post(f"/v1/sessions/{sid}/compile", json={"compaction": bad})
    assert compiled.status_code == 422, compiled.text
    assert [e["path"] for e in compiled.json()["errors"]] == ["body.compaction.summarizer.profile"]
    assert row_counts(d.database_url) == counts
