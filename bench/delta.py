"""Delta compiles for a resumed provider session, on Postgres, through HTTP.

For sessions of 1,000, 10,000 and 100,000 stored messages: append 50 messages, compile (timed),
acknowledge; medians and p99, against a raw asyncpg read of the same rows. Then the tokens a
resumed session is sent over a 50-turn conversation, delta mode against full mode.
"""

from __future__ import annotations

import asyncio
import random
import statistics
import time
from typing import Any

import asyncpg
import httpx
from sqlalchemy.engine import make_url

from bench.append import agent_batch
from bench.common import database, describe, percentile, server

SIZES = (1_000, 10_000, 100_000)
ROUNDS = 20
NEW = 50


def messages(rng: random.Random, start: int, count: int) -> list[dict[str, Any]]:
    out = [m for i in range(start, start + count, 10) for m in agent_batch(rng, i)]
    return out[:count]


def fill(client: httpx.Client, sid: str, rng: random.Random, count: int) -> None:
    for start in range(0, count, 1_000):
        batch = {"messages": messages(rng, start, min(1_000, count - start))}
        client.post(f"/v1/sessions/{sid}/messages", json=batch).raise_for_status()


def compile_and_ack(client: httpx.Client, sid: str, **ack: Any) -> tuple[dict[str, Any], float]:
    start = time.perf_counter()
    response = client.post(f"/v1/sessions/{sid}/compile", json={})
    took = time.perf_counter() - start
    response.raise_for_status()
    answer: dict[str, Any] = response.json()
    cursor = {"compile_id": answer["compile_id"], **ack}
    client.post(f"/v1/sessions/{sid}/cursor", json=cursor).raise_for_status()
    return answer, took


async def raw_reads(url: str, sid: str, reads: list[tuple[int, int]]) -> list[float]:
    """The same rows read with asyncpg alone (one connection, prepared once): for each compile,
    the messages after its cursor up to the last one stored then."""
    dsn = make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)
    conn = await asyncpg.connect(dsn)
    try:
        pk = await conn.fetchval("SELECT pk FROM sessions WHERE id = $1", sid)
        query = await conn.prepare(
            "SELECT * FROM messages WHERE session_pk = $1 AND seq > $2 AND seq <= $3 ORDER BY seq"
        )
        times = []
        for after, last in reads:
            start = time.perf_counter()
            await query.fetch(pk, after, last)
            times.append(time.perf_counter() - start)
        return times
    finally:
        await conn.close()


def sizes() -> None:
    print(f"delta compile ({NEW} new messages), Postgres, through HTTP")
    with database("postgres") as url, server(url) as client:
        for size in SIZES:
            rng = random.Random(size)
            sid = client.post("/v1/sessions", json={"provider": "codex-cli"}).json()["id"]
            fill(client, sid, rng, size)
            compile_and_ack(client, sid, provider_session_id="thread-1")  # the full start
            times, reads = [], []
            for n in range(ROUNDS):
                batch = {"messages": messages(rng, size + n * NEW, NEW)}
                client.post(f"/v1/sessions/{sid}/messages", json=batch).raise_for_status()
                session = client.get(f"/v1/sessions/{sid}").json()
                answer, took = compile_and_ack(client, sid)
                assert answer["mode"] == "delta", answer["mode"]
                times.append(took)
                reads.append((session["cursor_seq"], session["last_seq"]))
            raw = asyncio.run(raw_reads(url, sid, reads))
            ratio = statistics.median(times) / statistics.median(raw)
            print(
                f"  {size:>7,} stored: {describe(times)} | raw asyncpg read median "
                f"{statistics.median(raw) * 1000:6.2f} ms p99 {percentile(raw, 99) * 1000:6.2f} ms"
                f" | ratio {ratio:4.1f}x"
            )


def turns() -> None:
    print("tokens sent over a 50-turn resumed session (codex-cli): delta mode vs full mode")
    with database("postgres") as url, server(url) as client:
        rng = random.Random(50)
        delta_sid = client.post("/v1/sessions", json={"provider": "codex-cli"}).json()["id"]
        full_sid = client.post("/v1/sessions", json={"provider": "codex-cli"}).json()["id"]
        sent = {"delta": 0, "full": 0}
        for turn in range(50):
            batch = {"messages": messages(rng, turn * 10, 10)}
            for sid in (delta_sid, full_sid):
                client.post(f"/v1/sessions/{sid}/messages", json=batch).raise_for_status()
            answer, _ = compile_and_ack(client, delta_sid, provider_session_id="thread-1")
            sent["delta"] += answer["tokens"]["total"]
            answer, _ = compile_and_ack(client, full_sid)  # never a provider session: full
            sent["full"] += answer["tokens"]["total"]
        saved = 1 - sent["delta"] / sent["full"]
        print(
            f"  full {sent['full']:,} tokens | delta {sent['delta']:,} tokens | {saved:.1%} fewer"
        )


def run() -> None:
    sizes()
    turns()


if __name__ == "__main__":
    run()
