"""A tenant's hostile redaction cannot stall the replica: `/healthz` and other tenants' requests
answer while it runs, and it finishes or is refused with a 422 naming the pattern."""

from __future__ import annotations

import threading
import time
from typing import Any

import httpx
import pytest

from tests.conftest import Api, new_session

SIZE = 250_000  # within the test server's 256 KiB body limit
DOTTED = ("a." * SIZE)[:SIZE]  # issue 19: 41-51 s under the old URL password pattern
REDACT = {"decorators": ["redact", {"name": "token_limit", "params": {"reserve": 0}}]}


def custom(*patterns: str) -> dict[str, Any]:
    return {
        "decorators": [
            {"name": "redact", "params": {"patterns": list(patterns)}},
            {"name": "token_limit", "params": {"reserve": 0}},
        ]
    }


def posted(text: str, compiler: dict[str, Any]) -> dict[str, Any]:
    return {
        "messages": [{"role": "user", "content": text}],
        "compiler": compiler,
        "context_window": 1_000_000,
    }


@pytest.mark.timeout(240)
def test_healthz_and_other_tenants_answer_during_a_redaction_attack(api: Api) -> None:
    with api.client(api.key_b) as hostile:
        sid = new_session(hostile, compiler=REDACT, context_window=1_000_000)
        stored = hostile.post(
            f"/v1/sessions/{sid}/messages", json={"messages": [{"role": "user", "content": DOTTED}]}
        )
        assert stored.status_code == 201, stored.text
    attacks = {
        "dotted": ("/v1/compile", posted(DOTTED, REDACT)),
        "nested": ("/v1/compile", posted("a" * SIZE + "!", custom("(a+)+$"))),
        "greedy": ("/v1/compile", posted("a" * SIZE, custom("sk-x", "a*b|a"))),
        "session": (f"/v1/sessions/{sid}/compile", {}),
    }
    answers: dict[str, httpx.Response] = {}

    def attack() -> None:
        with api.client(api.key_b) as hostile:
            for name, (path, body) in attacks.items():
                answers[name] = hostile.post(path, json=body)

    thread = threading.Thread(target=attack)
    thread.start()
    probes = 0
    # A client timeout of 2 s: a liveness bound, not a benchmark (a stalled loop never answers).
    with httpx.Client(base_url=api.url, timeout=2) as probe, api.client() as other:
        other.timeout = httpx.Timeout(2)
        while thread.is_alive() or probes < 3:
            assert probe.get("/healthz").status_code == 200
            assert other.get("/v1/sessions", params={"limit": 1}).status_code == 200
            probes += 1
            time.sleep(0.02)
    thread.join()
    for name in ("dotted", "nested", "session"):
        assert answers[name].status_code == 200, (name, answers[name].text[:300])
    refused = answers["greedy"]
    assert refused.status_code == 422
    assert refused.headers["content-type"] == "application/problem+json"
    [error] = refused.json()["errors"]
    assert error["path"] == "body.compiler.decorators[0].params.patterns[1]"
    assert "'a*b|a'" in error["message"]


@pytest.mark.parametrize(
    ("pattern", "why"),
    [("secret(?=\\d)", "invalid perl operator"), ("(a)\\1", "invalid escape sequence")],
)
def test_a_pattern_re2_cannot_run_is_refused_when_a_session_stores_it_or_a_request_sends_it(
    client: httpx.Client, pattern: str, why: str
) -> None:
    compiler = custom("ok", pattern)
    stored = client.post("/v1/sessions", json={"compiler": compiler})
    sent = client.post("/v1/compile", json=posted("hello", compiler))
    for answer in (stored, sent):
        assert answer.status_code == 422
        assert answer.headers["content-type"] == "application/problem+json"
        [error] = answer.json()["errors"]
        assert error["path"] == "body.compiler.decorators[0].params.patterns[1]"
        assert why in error["message"] and "RE2" in error["message"]
