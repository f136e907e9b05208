"""A sidecar turn says where its time went (``Server-Timing``), read through the official OpenAI
SDK from a real server forwarding to the local upstream, on each database: the phases a turn
ran, in order, the upstream's wait counted as the upstream's and not as ctxc's, and no phase
counted twice."""

from __future__ import annotations

import re
import time
import uuid
from typing import Any

import httpx

from tests.api.sidecar import Sidecar
from tests.upstreams import Delay, Upstream

ENTRY = re.compile(r"([a-z]+);dur=(\d+\.\d\d)")
UPSTREAM_WAIT = 0.3  # seconds the upstream waits before it answers


def phases(headers: httpx.Headers) -> dict[str, float]:
    """The phases ctxc's ``Server-Timing`` entries name, in order, with their milliseconds
    (then the upstream's own entry: kept, after them)."""
    found: dict[str, float] = {}
    ours, _, theirs = headers["server-timing"].partition(", cfL4;")
    assert theirs == 'desc="?proto=TCP&rtt=1"'
    for entry in ours.split(", "):
        matched = ENTRY.fullmatch(entry)
        assert matched is not None, entry
        assert matched[1] not in found, entry
        found[matched[1]] = float(matched[2])
    return found


def test_a_turn_says_where_its_time_went(sidecar: Sidecar, up: Upstream) -> None:
    client = sidecar.openai(f"timed-{uuid.uuid4().hex[:8]}")
    history: list[Any] = [{"role": "user", "content": "Read the README please."}]
    up.script.append(Delay(seconds=UPSTREAM_WAIT))
    start = time.perf_counter()
    raw = client.chat.completions.with_raw_response.create(model="gpt-4o", messages=history)
    took = (time.perf_counter() - start) * 1000
    first = phases(raw.headers)
    # A new session: nothing stored to hash the history against yet.
    assert list(first) == ["read", "open", "compile", "upstream", "store"]
    assert first["upstream"] >= UPSTREAM_WAIT * 1000
    assert sum(first.values()) <= took  # all within the request
    history += [raw.parse().choices[0].message, {"role": "user", "content": "And now?"}]

    up.script.append(Delay(seconds=UPSTREAM_WAIT))
    start = time.perf_counter()
    with client.chat.completions.with_streaming_response.create(
        model="gpt-4o", messages=history, stream=True
    ) as streamed:
        took = (time.perf_counter() - start) * 1000
        second = phases(streamed.headers)
        streamed.read()
    # It extends the session: hashed against what it holds; stored after the stream, unsaid.
    assert list(second) == ["read", "open", "hash", "compile", "upstream"]
    assert second["upstream"] >= UPSTREAM_WAIT * 1000
    assert sum(second.values()) <= took


def test_a_stateless_turn_says_its_phases(sidecar: Sidecar, up: Upstream) -> None:
    raw = sidecar.openai().chat.completions.with_raw_response.create(
        model="gpt-4o", messages=[{"role": "user", "content": "hi"}]
    )
    assert list(phases(raw.headers)) == ["read", "compile", "upstream"]
