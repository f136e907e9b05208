"""Compiles right after a bulk write, and foreground compiles beside background digest work.

`python -m bench.bulk` (`--quick`, or `CTXC_BENCH_QUICK=1`: 20,000 messages; else 100,000, or
`CTXC_BENCH_BULK_SIZE`). On SQLite, one `ctxc serve`, one session (the default profile, `openai`
with its 128k window, and the default compiler):

- steady state: the session grown to 1,000 messages, compiled until its digest settles, then
  `REPEATS` compiles timed (their median: the 1,000-message steady state);
- bulk: the session grown to the size through appends of 1,000 messages (an import, a
  migration, a long agent run written in bulk), and the `REPEATS` compiles right after it
  timed, each printed as a ratio to the steady state. Then, the digests' background jobs
  waited for, `REPEATS` more (the steady state at that size) as a ratio to it too;
- beside background work: a fresh 1,000-message `POST /v1/compile` (a history new to the
  server, a `token_limit` compiler) timed alone, then while the digest of the big session for
  another view (`anthropic`: none made yet) is built in the background after the compile that
  read it whole; the median as a ratio to the median alone.

Times are the client's, whole requests. Targets: every compile right after the bulk write
within 2x the steady state at 1,000 messages (issue 27, item 2); the foreground compile's median
within 1.5x beside the background work (item 6).
"""

from __future__ import annotations

import json
import os
import random
import statistics
import sys
import time
from typing import Any

import httpx

from bench.append import agent_batch
from bench.common import database, metric, quick_run, served, verdict

SIZE = 100_000
QUICK_SIZE = 20_000
BATCH = 1_000  # messages per append
REPEATS = 7
SETTLE_S = 600.0
DIGESTS = "ctxc_digests_total"
FRESH = 1_000  # messages of the stateless compile timed beside the background work
BESIDE = 15  # stateless compiles timed beside it (at most: while the background job runs)


def grow(client: httpx.Client, sid: str, start: int, size: int) -> None:
    rng = random.Random(start)
    for first in range(start, size, BATCH):
        batch = [m for n in range(first, first + BATCH, 10) for m in agent_batch(rng, n)]
        client.post(f"/v1/sessions/{sid}/messages", json={"messages": batch}).raise_for_status()


def timed_compiles(client: httpx.Client, sid: str, count: int, body: Any = None) -> list[float]:
    times = []
    for _ in range(count):
        began = time.perf_counter()
        client.post(f"/v1/sessions/{sid}/compile", json=body or {}).raise_for_status()
        times.append(time.perf_counter() - began)
    return times


def settle(client: httpx.Client, sid: str, body: Any = None) -> None:
    """Compile until no digest job follows (the digest is where compiles leave it)."""
    deadline = time.monotonic() + SETTLE_S
    while time.monotonic() < deadline:
        before = metric(client, DIGESTS)
        timed_compiles(client, sid, 1, body)
        time.sleep(1.0)
        if metric(client, DIGESTS) == before and not _running(client, before):
            return
    print("  (the digest did not settle)")


def _running(client: httpx.Client, before: float) -> bool:
    time.sleep(0.5)
    return metric(client, DIGESTS) != before


def fresh_body(seed: int) -> bytes:
    rng = random.Random(seed)
    messages = [m for n in range(0, FRESH, 10) for m in agent_batch(rng, n)]
    body = {"messages": messages, "compiler": {"decorators": ["token_limit"]}}
    return json.dumps(body | {"context_window": 100_000}).encode()


def stateless(client: httpx.Client, seed: int) -> float:
    raw = fresh_body(seed)
    headers = {"content-type": "application/json"}
    began = time.perf_counter()
    client.post("/v1/compile", content=raw, headers=headers).raise_for_status()
    return time.perf_counter() - began


def ms(seconds: float) -> str:
    return f"{seconds * 1000:8.1f} ms"


def bulk(client: httpx.Client, size: int) -> None:
    sid = client.post("/v1/sessions", json={}).json()["id"]
    grow(client, sid, 0, 1_000)
    settle(client, sid)
    steady = statistics.median(timed_compiles(client, sid, REPEATS))
    print(f"  steady state at 1,000 messages: median {ms(steady)}")
    began = time.perf_counter()
    grow(client, sid, 1_000, size)
    print(f"  grown to {size:,} in appends of {BATCH:,}: {time.perf_counter() - began:6.1f} s")
    after = timed_compiles(client, sid, REPEATS)
    ratios = " ".join(f"{t / steady:5.2f}x" for t in after)
    print(f"  the {REPEATS} compiles right after it: {ratios} (of the 1,000-message steady state)")
    print(f"    ms: {' '.join(f'{t * 1000:.0f}' for t in after)}")
    settle(client, sid)
    settled = statistics.median(timed_compiles(client, sid, REPEATS))
    worst = max(after) / steady
    print(
        f"  steady state at {size:,}: median {ms(settled)} ({settled / steady:4.2f}x);"
        f" right after the write: median {statistics.median(after) / steady:5.2f}x,"
        f" worst {worst:5.2f}x ({verdict(worst <= 2)}: <= 2x)"
    )
    ratios = " ".join(f"{t / settled:5.2f}x" for t in after)
    print(f"  the same {REPEATS} against the steady state at {size:,}: {ratios}")
    beside(client, sid)


def beside(client: httpx.Client, sid: str) -> None:
    alone = [stateless(client, seed) for seed in range(100, 100 + REPEATS)]
    before = metric(client, DIGESTS)
    began = time.perf_counter()
    timed_compiles(client, sid, 1, {"provider": "anthropic"})  # a view with no digest
    read = time.perf_counter() - began
    times = []
    for seed in range(200, 200 + BESIDE):
        if metric(client, DIGESTS) != before:
            break
        times.append(stateless(client, seed))
    done = metric(client, DIGESTS) != before
    ratio = statistics.median(times) / statistics.median(alone) if times else float("nan")
    print(
        f"  fresh {FRESH:,}-message POST /v1/compile: alone median {ms(statistics.median(alone))};"
        f" beside the background digest of the {sid[:8]} session (read whole in {read:.1f} s):"
        f" median {ms(statistics.median(times)) if times else 'n/a'} over {len(times)}"
        f" ({'job ended' if done else 'job still running'}) -> {ratio:5.2f}x"
        f" ({verdict(ratio <= 1.5)}: <= 1.5x)"
    )


def run(quick: bool | None = None) -> None:
    size = QUICK_SIZE if quick_run(quick) else int(os.environ.get("CTXC_BENCH_BULK_SIZE", SIZE))
    load = os.getloadavg()[0]
    print(f"bulk: compiles after a bulk write of {size:,} messages (load average {load:.1f})")
    with database("sqlite") as url, served(url, max_body_bytes=1 << 28, timeout=600) as (c, _):
        bulk(c, size)


if __name__ == "__main__":
    run(True if "--quick" in sys.argv else None)
