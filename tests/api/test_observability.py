"""Metrics, request ids and logs, read from a live server after real requests."""

from __future__ import annotations

import asyncio
import json
import logging
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families
from starlette.types import Receive, Scope, Send

from app.api.middleware import CatchAll, RequestId
from app.logs import JsonFormatter, RequestIdFilter
from app.settings import Settings
from tests.adapters.stubs import Answer, StubServer
from tests.api.test_compaction import POLICY, session_with
from tests.api.test_cursor import started
from tests.api.test_messages import openai_history
from tests.conftest import Api, LiveServer, new_session
from tests.conftest import scrape as scrape_metrics

Labels = tuple[tuple[str, str], ...]


def scrape(client: httpx.Client) -> dict[tuple[str, Labels], float]:
    """Every sample of /metrics, by name and labels."""
    response = scrape_metrics(client)
    assert response.status_code == 200
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(response.text)
        for s in family.samples
    }


def delta(
    before: dict[tuple[str, Labels], float],
    after: dict[tuple[str, Labels], float],
    name: str,
    **labels: str,
) -> float:
    key = (name, tuple(sorted(labels.items())))
    return after.get(key, 0.0) - before.get(key, 0.0)


class Lines(logging.Handler):
    """The JSON log lines the service would write, kept as dicts."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.setFormatter(JsonFormatter())
        self.addFilter(RequestIdFilter())
        self.lines: list[dict[str, object]] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(json.loads(self.format(record)))


@contextmanager
def log_lines() -> Iterator[Lines]:
    handler, root = Lines(), logging.getLogger()
    level = root.level
    root.addHandler(handler)
    root.setLevel(logging.INFO)
    try:
        yield handler
    finally:
        root.removeHandler(handler)
        root.setLevel(level)


# Metrics


def unique_history(n: int) -> list[dict[str, object]]:
    """A history no other test posts (the compile caches live as long as the server)."""
    return [{"role": "user", "content": f"run {uuid.uuid4()}"}, *openai_history(n)[1:]]


def test_compiles_are_counted_by_source_mode_and_outcome(client: httpx.Client) -> None:
    before = scrape(client)
    body = {"messages": unique_history(6), "provider": "gpt-4o"}
    for _ in range(2):  # the second is remembered
        assert client.post("/v1/compile", json=body).status_code == 200
    sid, _ = started(client)  # a full session compile, acknowledged
    assert client.post(f"/v1/sessions/{sid}/compile", json={}).json()["mode"] == "delta"
    too_small = {
        "context_window": 10,
        "compiler": {
            "base": "all_sections",
            "decorators": [{"name": "token_limit", "params": {"reserve": 0}}],
        },
    }
    assert client.post(f"/v1/sessions/{sid}/compile", json=too_small).status_code == 422
    after = scrape(client)
    compiles = "ctxc_compiles_total"
    assert delta(before, after, compiles, source="stateless", mode="full", outcome="ok") == 2
    assert delta(before, after, compiles, source="session", mode="full", outcome="ok") == 1
    assert delta(before, after, compiles, source="session", mode="delta", outcome="ok") == 1
    failed = delta(
        before, after, compiles, source="session", mode="unknown", outcome="budget-too-small"
    )
    assert failed == 1
    lookups = "ctxc_cache_lookups_total"
    assert delta(before, after, lookups, cache="answers", result="hit") == 1
    assert delta(before, after, lookups, cache="answers", result="miss") == 1
    # The history's first message is new; the others may have been posted by other tests.
    assert delta(before, after, lookups, cache="messages", result="miss") >= 1
    assert after[("ctxc_cache_bytes", (("cache", "answers"),))] > 0


def test_the_message_cache_counts_hits_of_a_growing_history(client: httpx.Client) -> None:
    history = unique_history(6)
    client.post("/v1/compile", json={"messages": history})
    history += [
        {"role": "assistant", "content": f"done {uuid.uuid4()}"},
        {"role": "user", "content": f"and {uuid.uuid4()}"},
    ]
    before = scrape(client)
    assert client.post("/v1/compile", json={"messages": history}).status_code == 200
    after = scrape(client)
    assert delta(before, after, "ctxc_cache_lookups_total", cache="messages", result="hit") == 6
    assert delta(before, after, "ctxc_cache_lookups_total", cache="messages", result="miss") == 2


def test_compactions_and_summaries_are_counted_and_timed(client: httpx.Client) -> None:
    sid = session_with(client)
    before = scrape(client)
    response = client.post(f"/v1/sessions/{sid}/compact", json={"kind": "full"})
    assert response.status_code == 201, response.text
    reason = response.json()["reason"]
    policy_sid = session_with(client, compaction=POLICY)
    compiled = client.post(f"/v1/sessions/{policy_sid}/compile", json={}).json()
    assert [c["kind"] for c in compiled["compactions"]] == ["session"]
    after = scrape(client)
    compactions = "ctxc_compactions_total"
    assert delta(before, after, compactions, kind="full", reason=reason, trigger="request") == 1
    boundary = delta(
        before, after, compactions, kind="session", reason="session_compaction", trigger="compile"
    )
    assert boundary == 1
    assert delta(before, after, "ctxc_summaries_total", backend="ledger", outcome="ok") == 2
    timed = delta(before, after, "ctxc_summary_duration_seconds_count", backend="ledger")
    assert timed == 2


def test_no_label_names_a_session_or_a_tenant(api: Api, client: httpx.Client) -> None:
    sid = new_session(client, id="observability-secret-session")
    client.post(f"/v1/sessions/{sid}/compile", json={})
    client.get(f"/v1/sessions/{sid}")
    text = scrape_metrics(client).text
    assert "observability-secret-session" not in text and "tenant-a" not in text
    routes = {s[1] for s in scrape(client) if s[0] == "ctxc_http_requests_total"}
    assert (("method", "GET"), ("route", "/v1/sessions/{session_id}"), ("status", "200")) in routes


def test_a_failing_summariser_is_a_fallback_logged_under_the_request_id(database_url: str) -> None:
    def down(_: object) -> Answer:
        return Answer(503, {"error": {"message": "overloaded"}})

    with StubServer(down) as model:
        settings = Settings(
            database_url=database_url,
            summarizer="openai",
            summarizer_url=f"{model.url}/v1",
            summarizer_model="m",
            summarizer_retries=0,
        )
        with LiveServer(settings) as server, httpx.Client(base_url=server.url) as client:
            sid = session_with(client)
            before = scrape(client)
            with log_lines() as logs:
                response = client.post(
                    f"/v1/sessions/{sid}/compact",
                    json={"kind": "full"},
                    headers={"X-Request-ID": "compact-42"},
                )
            after = scrape(client)
    assert response.status_code == 201, response.text
    assert response.headers["x-request-id"] == "compact-42"
    assert delta(before, after, "ctxc_summaries_total", backend="openai", outcome="fallback") == 1
    assert delta(before, after, "ctxc_summarizer_requests_total", backend="openai") == 1
    mine = [line for line in logs.lines if line.get("request_id") == "compact-42"]
    assert {line["logger"] for line in mine} >= {"ctxc.summarizer", "ctxc.access"}
    assert all("request_id" not in line or line["request_id"] == "compact-42" for line in mine)


# Request ids


def test_every_answer_has_a_request_id_and_a_sane_one_is_kept(client: httpx.Client) -> None:
    generated = client.get("/healthz").headers["x-request-id"]
    assert len(generated) == 32 and int(generated, 16) >= 0
    assert client.get("/healthz").headers["x-request-id"] != generated
    kept = "01J9Z3-trace.id:7_x"
    assert client.get("/healthz", headers={"X-Request-ID": kept}).headers["x-request-id"] == kept
    for bad in ("x" * 129, "two words", "line\\nbreak", "<script>", ""):
        answer = client.get("/healthz", headers={"X-Request-ID": bad})
        assert answer.headers["x-request-id"] != bad
        assert len(answer.headers["x-request-id"]) == 32


def test_error_answers_carry_the_request_id(client: httpx.Client) -> None:
    missing = client.get("/v1/sessions/no-such-session", headers={"X-Request-ID": "req-404"})
    assert missing.status_code == 404 and missing.headers["x-request-id"] == "req-404"
    headers = {"X-Request-ID": "req-413", "content-type": "application/json"}
    big = client.post("/v1/sessions", content=b"x" * (300 * 1024), headers=headers)
    assert big.status_code == 413 and big.headers["x-request-id"] == "req-413"


def test_the_access_log_line_carries_the_request_id(client: httpx.Client) -> None:
    with log_lines() as logs:
        client.get("/v1/providers", headers={"X-Request-ID": "req-access"})
        # The server (a thread of this process) writes the line once the answer is sent: the
        # client may read the answer first.
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and not any(
            x.get("request_id") == "req-access" for x in logs.lines
        ):
            time.sleep(0.01)
    [line] = [x for x in logs.lines if x.get("request_id") == "req-access"]
    assert line["logger"] == "ctxc.access" and line["route"] == "/v1/providers"


async def broken(scope: Scope, receive: Receive, send: Send) -> None:
    logging.getLogger("ctxc").info("about to fail")
    raise RuntimeError("secret internals")


def test_an_unexpected_error_is_logged_and_answered_with_its_request_id() -> None:
    async def get() -> httpx.Response:
        transport = httpx.ASGITransport(app=RequestId(CatchAll(broken)))
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
            return await client.get("/x", headers={"X-Request-ID": "req-500"})

    with log_lines() as logs:
        response = asyncio.run(get())
    assert response.status_code == 500 and response.headers["x-request-id"] == "req-500"
    assert response.json()["request_id"] == "req-500" and "secret" not in response.text
    info, error = [line for line in logs.lines if line["logger"] != "httpx"]
    assert info["msg"] == "about to fail" and info["request_id"] == "req-500"
    assert error["level"] == "error" and error["request_id"] == "req-500"
    assert "secret internals" in str(error["exc"])


# Readiness


def test_readiness_checks_log_nothing_but_the_access_line(client: httpx.Client) -> None:
    with log_lines() as logs:
        for _ in range(3):
            assert client.get("/readyz").status_code == 200
    server = [line["logger"] for line in logs.lines if line["logger"] != "httpx"]  # the client's
    assert server == ["ctxc.access"] * 3


@pytest.mark.parametrize("anything", [None])
def test_outside_a_request_log_lines_have_no_request_id(anything: None) -> None:
    with log_lines() as logs:
        logging.getLogger("ctxc").warning("at start-up")
    [line] = logs.lines
    assert "request_id" not in line


def test_in_keys_mode_metrics_need_the_scraper_token_not_a_tenant_key(
    api: Api, client: httpx.Client
) -> None:
    assert httpx.get(f"{api.url}/metrics").status_code == 401
    assert client.get("/metrics").status_code == 401  # a tenant's key is no scraper's token
    assert scrape_metrics(client).status_code == 200


def test_in_keys_mode_without_a_token_metrics_are_off(database_url: str) -> None:
    settings = Settings(database_url=database_url, auth="keys")
    with LiveServer(settings) as server:
        answer = httpx.get(f"{server.url}/metrics", headers={"Authorization": "Bearer x"})
    assert answer.status_code == 404 and "CTXC_METRICS_TOKEN" in answer.json()["detail"]
