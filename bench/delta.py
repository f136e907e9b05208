"""The tokens a resumed provider session is sent over a 50-turn conversation, delta mode
against full mode, on Postgres, through HTTP.

Delta compile times at 1,000 / 10,000 / 100,000 stored messages against their floor are in
`bench.session_compile`.
"""

from __future__ import annotations

import random
import time
from typing import Any

import httpx

from bench.append import agent_batch
from bench.common import database, server


def messages(rng: random.Random, start: int, count: int) -> list[dict[str, Any]]:
    out = [m for i in range(start, start + count, 10) for m in agent_batch(rng, i)]
    return out[:count]


def compile_and_ack(client: httpx.Client, sid: str, **ack: Any) -> tuple[dict[str, Any], float]:
    start = time.perf_counter()
    response = client.post(f"/v1/sessions/{sid}/compile", json={})
    took = time.perf_counter() - start
    response.raise_for_status()
    answer: dict[str, Any] = response.json()
    cursor = {"compile_id": answer["compile_id"], **ack}
    client.post(f"/v1/sessions/{sid}/cursor", json=cursor).raise_for_status()
    return answer, took


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
    turns()


if __name__ == "__main__":
    run()
