"""`GET /v1/sessions/{id}` at 1,000 / 10,000 / 100,000 stored messages, through HTTP, on each
database, against the floor of an authenticated no-op request (`GET /v1/models`) in the same run.

The sessions are built with bulk appends (5,000 messages a request). The reads are interleaved
(a floor request, then one read of each session, round after round), so drift in the machine's
load falls on all of them alike. The session answer reads the running totals the session row
keeps: it should not grow with the history (target: 100,000 within ~1.2x of 1,000).
"""

from __future__ import annotations

import statistics
import time
from typing import Any

import httpx

from bench.common import database, describe, served

SIZES = (1_000, 10_000, 100_000)
BATCH = 5_000
ROUNDS = 400
WARMUP = 20


def batch(start: int, count: int) -> list[dict[str, Any]]:
    """``count`` short turns of an agent's conversation, user and assistant in turn."""
    return [
        {
            "role": "user" if i % 2 == 0 else "assistant",
            "content": f"turn {i}: read src/module_{i % 97}.py and run the tests again",
        }
        for i in range(start, start + count)
    ]


def session_of(client: httpx.Client, size: int) -> str:
    sid: str = client.post("/v1/sessions", json={}).json()["id"]
    for start in range(0, size, BATCH):
        body = {"messages": batch(start, min(BATCH, size - start))}
        client.post(f"/v1/sessions/{sid}/messages", json=body).raise_for_status()
    answer = client.get(f"/v1/sessions/{sid}").json()
    assert answer["message_count"] == size, answer
    return sid


def timed(client: httpx.Client, path: str) -> float:
    start = time.perf_counter()
    client.get(path).raise_for_status()
    return time.perf_counter() - start


def run() -> None:
    print("session read: GET /v1/sessions/{id} against an authenticated no-op (GET /v1/models)")
    for kind in ("sqlite", "postgres"):
        with database(kind) as url, served(url, max_body_bytes=64 << 20, timeout=600) as served_:
            client, _ = served_
            paths = {"floor": "/v1/models"}
            paths |= {f"{size:,}": f"/v1/sessions/{session_of(client, size)}" for size in SIZES}
            times: dict[str, list[float]] = {name: [] for name in paths}
            for n in range(WARMUP + ROUNDS):
                for name, path in paths.items():
                    took = timed(client, path)
                    if n >= WARMUP:
                        times[name].append(took)
            medians = {name: statistics.median(values) for name, values in times.items()}
            first = medians[f"{SIZES[0]:,}"]
            print(f"  {kind}")
            for name, values in times.items():
                ratios = (
                    ""
                    if name == "floor"
                    else (
                        f"   {medians[name] / medians['floor']:5.2f}x the floor"
                        f"   {medians[name] / first:5.2f}x the {SIZES[0]:,}-message read"
                    )
                )
                label = "floor (no-op)" if name == "floor" else f"{name} messages"
                print(f"    {label:18s} {describe(values)}{ratios}")


if __name__ == "__main__":
    run()
