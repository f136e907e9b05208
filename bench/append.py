"""Append 10-message batches to a 10,000-message session, through HTTP, on each database."""

from __future__ import annotations

import json
import random
import statistics
import time
from typing import Any

from app.adapters.tokenizers import load_counter
from app.domain.formats.openai import from_openai
from bench.common import database, describe, server

HISTORY = 10_000
BATCH = 10
REQUESTS = 300
WORDS = "the agent reads src/app/main.py then runs pytest and fixes the failing import".split()  # noqa: SIM905


def agent_batch(rng: random.Random, start: int) -> list[dict[str, Any]]:
    """Ten messages shaped like an agent's: prompts, tool calls, file reads and logs."""
    out: list[dict[str, Any]] = []
    for i in range(start, start + BATCH):
        kind = i % 4
        text = " ".join(rng.choices(WORDS, k=rng.randint(10, 400)))
        if kind == 0:
            out.append({"role": "user", "content": text})
        elif kind == 1:
            call = {
                "id": f"call_{i}",
                "type": "function",
                "function": {"name": "read_file", "arguments": json.dumps({"path": f"f{i}.py"})},
            }
            out.append({"role": "assistant", "content": None, "tool_calls": [call]})
        elif kind == 2:
            out.append({"role": "tool", "tool_call_id": f"call_{i - 1}", "content": text * 3})
        else:
            out.append({"role": "assistant", "content": text})
    return out


def run() -> None:
    rng = random.Random(7)
    counter = load_counter()
    batches = [agent_batch(rng, HISTORY + i * BATCH) for i in range(REQUESTS)]
    count_times = []
    for batch in batches:
        messages = from_openai(batch)
        start = time.perf_counter()
        [counter.count_all(m) for m in messages]
        count_times.append(time.perf_counter() - start)
    print(f"append: {REQUESTS} requests of {BATCH} messages onto a {HISTORY:,}-message session")
    for kind in ("sqlite", "postgres"):
        with database(kind) as url, server(url) as client:
            sid = client.post("/v1/sessions", json={}).json()["id"]
            for i in range(0, HISTORY, 500):
                filler = [m for j in range(i, i + 500, BATCH) for m in agent_batch(rng, j)]
                client.post(
                    f"/v1/sessions/{sid}/messages", json={"messages": filler}
                ).raise_for_status()
            times = []
            for batch in batches:
                start = time.perf_counter()
                client.post(
                    f"/v1/sessions/{sid}/messages", json={"messages": batch}
                ).raise_for_status()
                times.append(time.perf_counter() - start)
            share = statistics.median(count_times) / statistics.median(times)
            print(f"  {kind:8s} {describe(times)}   token counting {share:5.1%} of the median")


if __name__ == "__main__":
    run()
