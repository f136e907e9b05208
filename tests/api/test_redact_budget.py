"""One tenant's hostile redactions near the body limit cannot tie up the replica: each is refused
with a 422 naming a pattern or finishes, while `/healthz` and another tenant's compiles answer.

Redaction has one budget of work for the whole compile (every text and pattern) and a deadline,
and a tenant's CPU-heavy work holds at most `CTXC_TENANT_CPU_CONCURRENCY` worker threads.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from app.settings import Settings
from tests.conftest import Api, LiveServer, make_key

BIG = 2 * 1024 * 1024
MAX_BODY = 4 * 1024 * 1024


def fill(unit: str, size: int) -> str:
    return (unit * (size // len(unit) + 1))[:size]


def posted(text: str, patterns: list[str] | None = None) -> dict[str, Any]:
    redact: Any = (
        "redact" if patterns is None else {"name": "redact", "params": {"patterns": patterns}}
    )
    return {
        "messages": [{"role": "user", "content": text}],
        "context_window": 10_000_000,
        "compiler": {"decorators": [redact]},
    }


@pytest.fixture(scope="module")
def big_api(database_url: str) -> Iterator[Api]:
    """A server that takes 4 MiB bodies (the `api` fixture's take 256 KiB)."""
    settings = Settings(database_url=database_url, auth="keys", max_body_bytes=MAX_BODY)
    key_a = make_key(database_url, f"tenant-a-{uuid.uuid4().hex[:6]}")
    key_b = make_key(database_url, f"tenant-b-{uuid.uuid4().hex[:6]}")
    with LiveServer(settings) as server:
        yield Api(server.url, database_url, key_a, key_b)


def refused_naming_a_pattern(answer: httpx.Response) -> None:
    assert answer.status_code == 422, answer.text[:300]
    assert answer.headers["content-type"] == "application/problem+json"
    [error] = answer.json()["errors"]
    assert error["path"].startswith("body.compiler.decorators[0].params."), error
    assert "redaction" in error["message"] and "send less text" in error["message"], error


def test_many_patterns_each_under_the_old_per_pattern_limit_are_refused_together(
    big_api: Api,
) -> None:
    """32 patterns, each finding `a` every 8 bytes (28 units a byte, under the old per-pattern
    limit of 32): the whole compile's budget (64 + 4 per pattern a byte) is spent long before."""
    with big_api.client(big_api.key_b) as hostile:
        answer = hostile.post("/v1/compile", json=posted(fill("xxxxxxxa", 256_000), ["a"] * 32))
    refused_naming_a_pattern(answer)
    assert answer.json()["errors"][0]["path"].startswith(
        "body.compiler.decorators[0].params.patterns["
    )


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_concurrent_hostile_redactions_leave_other_tenants_and_healthz_answering(
    big_api: Api,
) -> None:
    attacks = {
        "passwords 1": posted(fill("a://:x@", BIG)),  # a real secret every 7 bytes
        "passwords 2": posted(fill("a://:x@", BIG)),
        "bearers": posted(fill("bearer 1 ", BIG)),  # near-misses: each went back to Python
        "frequent": posted(fill("xxxxxxxa", BIG), ["a"]),
        "many patterns": posted(fill("xxxxxxxa", BIG), ["a"] * 32),
        "many patterns 2": posted(fill("xxxxxxxa", BIG), [f"a{{1,{n}}}" for n in range(1, 33)]),
    }
    answers: dict[str, httpx.Response] = {}

    def attack(name: str) -> None:
        with big_api.client(big_api.key_b) as hostile:
            answers[name] = hostile.post("/v1/compile", json=attacks[name])

    threads = [threading.Thread(target=attack, args=(name,)) for name in attacks]
    for thread in threads:
        thread.start()
    ordinary = posted("Deploy with token sk-" + "A" * 24 + " please. " * 2000)
    probes = 0
    # A client timeout of 5 s: a liveness bound, not a benchmark (a stalled replica or a full
    # worker pool never answers in time).
    with httpx.Client(base_url=big_api.url, timeout=5) as probe, big_api.client() as other:
        other.timeout = httpx.Timeout(5)
        while any(t.is_alive() for t in threads) or probes < 3:
            assert probe.get("/healthz").status_code == 200
            compiled = other.post("/v1/compile", json=ordinary)
            assert compiled.status_code == 200, compiled.text[:300]
            assert "sk-" not in compiled.text
            probes += 1
            time.sleep(0.05)
    for thread in threads:
        thread.join()
    for name, answer in answers.items():
        if answer.status_code != 200:
            refused_naming_a_pattern(answer)
            if name.startswith("passwords"):  # the deadline: only built-ins were at work
                path = answer.json()["errors"][0]["path"]
                assert path == "body.compiler.decorators[0].params.builtin", path
        elif name != "bearers":
            assert "[REDACTED]" in answer.text, name
    refused_naming_a_pattern(answers["many patterns"])
    refused_naming_a_pattern(answers["many patterns 2"])
    assert answers["bearers"].status_code == 200  # no secret, and quick since 12+ stays in RE2


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_one_tenant_cannot_fill_the_worker_pool(big_api: Api) -> None:
    """44 compiles of tenant B at once: before, they took all 40 threads of the worker pool
    (each bearer near-miss went back to Python, about a second a request) and tenant A's compile
    waited for one; now B holds 2, and its compiles are quick."""
    hostile = posted(fill("bearer 1 ", 1_000_000))
    statuses: list[int] = []

    def attack() -> None:
        with big_api.client(big_api.key_b) as client:
            client.timeout = httpx.Timeout(240)
            statuses.append(client.post("/v1/compile", json=hostile).status_code)

    threads = [threading.Thread(target=attack) for _ in range(44)]
    for thread in threads:
        thread.start()
    time.sleep(1)  # the requests are in
    ordinary = posted("Deploy with token sk-" + "A" * 24 + " please.")
    probes = 0
    with big_api.client() as other:
        other.timeout = httpx.Timeout(5)  # a liveness bound, not a benchmark
        while any(t.is_alive() for t in threads) or probes < 3:
            compiled = other.post("/v1/compile", json=ordinary)
            assert compiled.status_code == 200, compiled.text[:300]
            probes += 1
            time.sleep(0.05)
    for thread in threads:
        thread.join()
    assert statuses == [200] * 44
