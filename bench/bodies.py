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


def stalled(client: httpx.Client, path: str, body: bytes, key: str | None = None) -> str:
    """The longest /healthz answer while ``body`` is posted to ``path``, and the post's time."""
    base, stop, found = str(client.base_url), threading.Event(), list[float]()
    probe = threading.Thread(target=_collect, args=(base, stop, found))
    probe.start()
    time.sleep(0.3)
    headers = {"content-type": "application/json"} | ({"Idempotency-Key": key} if key else {})
    start = time.perf_counter()
    answer = client.post(path, content=body, headers=headers)
    took = time.perf_counter() - start
    stop.set()
    probe.join()
    answer.raise_for_status()
    return f"{took:6.2f} s, longest /healthz {found[0] * 1000:7.1f} ms"


def run() -> None:
    body = big_batch()
    print(f"Event-loop stall: longest /healthz while a {len(body) / 1e6:.1f} MB body is posted")
    for kind in ("sqlite", "postgres"):
        with database(kind) as url, server(url) as client:
            idle = longest_health(str(client.base_url), threading.Event(), seconds=2.0)
            sid = client.post("/v1/sessions", json={}).json()["id"]
            append = stalled(client, f"/v1/sessions/{sid}/messages", body, key="bench")
            count = stalled(client, "/v1/tokens/count", body)
            print(f"  {kind:8} idle: longest /healthz {idle * 1000:7.1f} ms")
            print(f"  {kind:8} append (Idempotency-Key) {append}")
            print(f"  {kind:8} token count              {count}")


if __name__ == "__main__":
    run()
