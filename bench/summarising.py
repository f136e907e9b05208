"""Summarisation compaction, through HTTP on a real server.

1. Compaction time (POST /v1/sessions/{id}/compact, kind full, the extractive summariser) on
   sessions of 1,000 and 10,000 stored messages, on SQLite and Postgres.
2. A 200-turn simulated agent session under budget pressure: each turn appends a few messages
   and compiles. With a compaction policy (request-boundary compaction from the trigger down to
   the low-water mark) against a per-turn sliding window at the same budget (`token_limit`
   alone): the share of each turn's prompt tokens that are an unchanged prefix of the previous
   turn's prompt (what a provider's prompt cache can reuse; target at least 90%), and the total
   tokens sent.
"""

from __future__ import annotations

import random
import statistics
import time
from typing import Any

import httpx

from app.adapters.tokenizers import load_counter
from app.domain.formats.openai import from_openai
from app.domain.tokens import count_message
from bench.append import agent_batch
from bench.common import database, server

SIZES = (1_000, 10_000)
TURNS = 200
WINDOW = 128_000  # gpt-4o's
POLICY = {"trigger_tokens": 100_000, "target_tokens": 50_000, "summary_tokens": 4_000}
ENCODER = load_counter().encoder("o200k_base")


def _fill(client: httpx.Client, sid: str, count: int, rng: random.Random) -> None:
    for start in range(0, count, 1_000):
        batch = [m for i in range(start, start + 1_000, 10) for m in agent_batch(rng, i)]
        posted = client.post(f"/v1/sessions/{sid}/messages", json={"messages": batch})
        posted.raise_for_status()


def compaction_times() -> None:
    print("compaction time, kind full, extractive summariser (POST /compact, through HTTP)")
    for kind in ("sqlite", "postgres"):
        with database(kind) as url, server(url) as client:
            for size in SIZES:
                times = []
                for n in range(3):
                    sid = client.post("/v1/sessions", json={"provider": "gpt-4o"}).json()["id"]
                    _fill(client, sid, size, random.Random(size + n))
                    start = time.perf_counter()
                    done = client.post(f"/v1/sessions/{sid}/compact", json={"kind": "full"})
                    times.append(time.perf_counter() - start)
                    done.raise_for_status()
                record = done.json()
                print(
                    f"  {kind:8} {size:>6,} messages: median {statistics.median(times):6.2f} s | "
                    f"{record['messages']:,} archived, {record['tokens_removed']:,} tokens -> "
                    f"summary of {record['summary_tokens']:,}"
                )


def _tokens(messages: list[dict[str, Any]]) -> list[int]:
    return [count_message(m, ENCODER) for m in from_openai(messages)]


def _prefix_share(previous: list[dict[str, Any]], current: list[dict[str, Any]]) -> float:
    """Tokens of ``current`` that are an unchanged prefix of ``previous``, as a share."""
    counts = _tokens(current)
    same = 0
    for n, (a, b) in enumerate(zip(previous, current, strict=False)):
        if a != b:
            break
        same += counts[n]
    return same / max(1, sum(counts))


def _turn(rng: random.Random, n: int) -> list[dict[str, Any]]:
    """A user prompt, a tool round and an answer, once in a while a long file read."""
    return agent_batch(rng, n * 10)[:4]


def simulate(
    client: httpx.Client, compiler: dict[str, Any], **session: Any
) -> tuple[float, int, int]:
    fields = {"provider": "gpt-4o", "context_window": WINDOW, "compiler": compiler, **session}
    sid = client.post("/v1/sessions", json=fields).json()["id"]
    rng = random.Random(200)
    shares, sent, previous, grown = [], 0, None, 0
    for n in range(TURNS):
        posted = client.post(f"/v1/sessions/{sid}/messages", json={"messages": _turn(rng, n)})
        grown += posted.json()["tokens"]
        answer = client.post(f"/v1/sessions/{sid}/compile", json={}).json()
        messages = answer["messages"]
        sent += answer["tokens"]["total"]
        if previous is not None:
            shares.append(_prefix_share(previous, messages))
        previous = messages
    return statistics.mean(shares), sent, grown


def prefix_stability() -> None:
    print(
        f"{TURNS}-turn agent session, {WINDOW:,}-token window (Postgres): unchanged prompt "
        "prefix per turn, and tokens sent"
    )
    limit = {"decorators": [{"name": "token_limit", "params": {"reserve": 2_000}}]}
    with database("postgres") as url, server(url) as client:
        compacted = simulate(client, limit, compaction=POLICY)
        sliding = simulate(client, limit)
    print(
        f"  the history grows by {compacted[2] / TURNS:,.0f} tokens a turn on average "
        f"({compacted[2]:,} in all); policy {POLICY}"
    )
    for name, (share, sent, _) in (("compaction policy", compacted), ("sliding window", sliding)):
        print(f"  {name:18} mean unchanged prefix {share:6.1%} | tokens sent {sent:,}")


def run() -> None:
    compaction_times()
    prefix_stability()


if __name__ == "__main__":
    run()
