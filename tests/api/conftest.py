"""Fixtures of the API tests that several modules share."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from app.domain.validity.anthropic_rules import anthropic_problems
from app.domain.validity.openai_rules import openai_problems
from app.domain.validity.responses_rules import responses_problems
from app.settings import Settings
from tests.api.sidecar import Sidecar
from tests.conftest import METRICS_TOKEN, LiveServer, make_key
from tests.upstreams import Upstream


@pytest.fixture(scope="module")
def sidecar(database_url: str) -> Iterator[Sidecar]:
    """A `ctxc` server in keys mode forwarding to a local upstream: one per module and database."""
    with Upstream() as upstream:
        settings = Settings(
            database_url=database_url,
            auth="keys",
            openai_upstream=upstream.openai_base,
            anthropic_upstream=upstream.anthropic_base,
            upstream_timeout_seconds=3,
            metrics_token=METRICS_TOKEN,
        )
        key = make_key(database_url, f"sidecar-{uuid.uuid4().hex[:6]}")
        with LiveServer(settings) as server:
            yield Sidecar(server.url, key, upstream, database_url)


@pytest.fixture
def up(sidecar: Sidecar) -> Iterator[Upstream]:
    """The sidecar's upstream, its script and records cleared for the test."""
    sidecar.upstream.script.clear()
    sidecar.upstream.requests.clear()
    sidecar.upstream.cancelled.clear()
    yield sidecar.upstream
    sidecar.upstream.script.clear()
    while sidecar.clients:
        sidecar.clients.pop().close()
    # Whatever the test did, every request ctxc forwarded is one the provider accepts.
    for seen in sidecar.upstream.requests:
        if seen.path == "/v1/chat/completions":
            assert openai_problems(seen.body["messages"]) == [], seen.body
        elif seen.path == "/v1/messages":
            assert anthropic_problems(seen.body.get("system"), seen.body["messages"]) == []
        elif seen.path == "/v1/responses" and "previous_response_id" not in seen.body:
            items = seen.body["input"]
            items = [{"role": "user", "content": items}] if isinstance(items, str) else items
            assert responses_problems(seen.body.get("instructions"), items) == [], seen.body
