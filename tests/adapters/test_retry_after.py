"""How long a summariser waits before a retry: `retry-after-ms`, `Retry-After` in seconds or as
an HTTP-date, always within the backoff cap; `x-should-retry` overrides the status. Against a
real local HTTP server."""

from __future__ import annotations

import itertools
import time
from dataclasses import replace
from email.utils import formatdate

import pytest

from app.adapters.summarizers.http import retry_after
from tests.adapters.helpers import POLICY, chat_completion, resilient, summarize
from tests.adapters.stubs import Answer, Received, StubServer
from tests.adapters.test_openai_summarizer import HISTORY, openai

NOW = 1_700_000_000.0


@pytest.mark.parametrize(
    ("headers", "seconds"),
    [
        ({"retry-after": "3"}, 3.0),
        ({"retry-after": "0.25"}, 0.25),
        ({"retry-after-ms": "1500"}, 1.5),
        ({"retry-after-ms": "200", "retry-after": "9"}, 0.2),  # the finer one wins
        ({"retry-after-ms": "soon", "retry-after": "9"}, 9.0),
        ({"retry-after": formatdate(NOW + 120, usegmt=True)}, 120.0),
        ({"retry-after": formatdate(NOW + 60)}, 60.0),  # "-0000": UTC
        ({"retry-after": formatdate(NOW - 60, usegmt=True)}, 0.0),  # in the past: now
        ({"retry-after": "-5"}, 0.0),
        ({"retry-after": "nan"}, None),
        ({"retry-after-ms": "inf"}, None),
        ({"retry-after": "next Tuesday"}, None),
        ({}, None),
    ],
)
def test_the_wait_a_server_asks_for_is_read_in_every_form(
    headers: dict[str, str], seconds: float | None
) -> None:
    assert retry_after(headers, now=lambda: NOW) == seconds


def gaps(answers: list[Answer]) -> tuple[list[float], int]:
    """Seconds between the requests a summary made against ``answers``, and how many it made."""
    seen: list[float] = []

    def handle(_: Received) -> Answer:
        seen.append(time.monotonic())
        return answers[min(len(seen), len(answers)) - 1]

    policy = replace(POLICY, backoff=0.01, max_backoff=0.6)
    with StubServer(handle) as stub:
        summary = summarize(resilient(openai(stub.url), policy), HISTORY)
    return [b - a for a, b in itertools.pairwise(seen)], summary.requests


def test_retry_after_ms_is_honoured() -> None:
    waited, requests = gaps([Answer(429, {}, {"retry-after-ms": "300"}), chat_completion("ok")])
    assert requests == 2
    assert 0.3 <= waited[0] < 0.6


def test_a_retry_after_date_is_honoured_up_to_the_cap() -> None:
    later = formatdate(time.time() + 5, usegmt=True)
    waited, requests = gaps([Answer(503, {}, {"retry-after": later}), chat_completion("ok")])
    assert requests == 2
    assert 0.6 <= waited[0] < 3.0  # 4 to 5 s asked, capped at max_backoff


def test_a_very_long_retry_after_ms_is_capped() -> None:
    waited, _ = gaps([Answer(429, {}, {"retry-after-ms": "60000"}), chat_completion("ok")])
    assert 0.6 <= waited[0] < 3.0


def test_x_should_retry_overrides_the_status() -> None:
    _, requests = gaps([Answer(503, {}, {"x-should-retry": "false"}), chat_completion("ok")])
    assert requests == 1
    _, requests = gaps([Answer(400, {}, {"x-should-retry": "true"}), chat_completion("ok")])
    assert requests == 2
