"""Does a big body stall the server? The longest `/healthz` answer while a 16 MB append of
10,000 nested messages is parsed, checked, counted and stored, against the longest with the
server idle, in the same run (the event loop is blocked for about the difference)."""

from __future__ import annotations

import json
import threading
import time
from typing import Any

import httpx

from bench.common import database, server

MESSAGES = 10_000


def nested(depth: int, i: int) -> Any:
    value: Any = f"leaf {i}"
    for level in range(depth):
        value = {"k": value, "n": [level, i, 2.5, True, None], "s": f"step {level}"}
    return value


def big_batch() -> bytes:
    """About 16 MB: 10,000 messages, each with text and metadata nested 14 deep."""
    messages = [
        {"role": "user", "content": f"message {i} " + "word " * 160, "metadata": nested(14, i)}
        for i in range(MESSAGES)
    ]
    return json.dumps({"messages": messages}).encode()


def longest_health(url: str, stop: threading.Event, seconds: float | None = None) -> float:
    """Ask /healthz one after another (every 10 ms) until ``stop`` or ``seconds``: the longest."""
    longest, until = 0.0, time.monotonic() + (seconds or 1e9)
    with httpx.Client(base_url=url, timeout=120) as client:
        while not stop.is_set() and time.monotonic() < until:
            start = time.perf_counter()
            client.get("/healthz").raise_for_status()
            longest = max(longest, time.perf_counter() - start)
            time.sleep(0.01)
    return longest


def _collect(url: str, stop: threading.Event, found: list[float]) -> None:
    found.append(longest_health(url, stop))


def run() -> None:
    body = big_batch()
    print(f"Event-loop stall: longest /healthz during a {len(body) / 1e6:.1f} MB append")
    for kind in ("sqlite", "postgres"):
        with database(kind) as url, server(url) as client:
            base = str(client.base_url)
            idle = longest_health(base, threading.Event(), seconds=2.0)
            sid = client.post("/v1/sessions", json={}).json()["id"]
            stop, found = threading.Event(), list[float]()
            probe = threading.Thread(target=_collect, args=(base, stop, found))
            probe.start()
            time.sleep(0.3)
            start = time.perf_counter()
            answer = client.post(
                f"/v1/sessions/{sid}/messages", content=body,
                headers={"content-type": "application/json"},
            )  # fmt: skip
            took = time.perf_counter() - start
            stop.set()
            probe.join()
            answer.raise_for_status()
            print(
                f"  {kind:8} append {took:6.2f} s   longest /healthz: idle {idle * 1000:7.1f} ms, "
                f"during {found[0] * 1000:7.1f} ms ({found[0] / idle:5.0f}x idle)"
            )


if __name__ == "__main__":
    run()
