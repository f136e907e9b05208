"""A concurrency soak on a real `ctxc serve` over Postgres: 64 clients append 1,000 messages each
(batches of 50) to shared and to separate sessions, each batch with an Idempotency-Key that is
retried: after a success, after a client-side timeout, and twice at once. Afterwards no message
is lost or duplicated, every batch holds consecutive seqs, and every session's seqs are 1..n."""

from __future__ import annotations

import asyncio
import json
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import fresh_database
from tests.faults.server import Server, all_messages, running

CLIENTS = 64
MESSAGES = 1_000  # per client
BATCH = 50
SHARED_SESSIONS = 4  # the first half of the clients share these; the others have one each
TIMEOUT = httpx.Timeout(120)


@dataclass
class Tally:
    requests: int = 0
    replays_checked: int = 0
    client_timeouts: int = 0
    concurrent_duplicates: int = 0
    statuses: Counter[int] = field(default_factory=Counter)
    transport_errors: Counter[str] = field(default_factory=Counter)  # retried, by their type
    batches: dict[str, tuple[str, int, int]] = field(default_factory=dict)  # tag: sid, first, last


def messages(tag: str) -> list[dict[str, Any]]:
    return [
        {"role": "user" if i % 2 == 0 else "assistant", "content": f"{tag}.{i}: step {i} done"}
        for i in range(BATCH)
    ]


async def post(
    c: httpx.AsyncClient, sid: str, body: dict[str, Any], key: str, tally: Tally, **kw: Any
) -> httpx.Response:
    tally.requests += 1
    response = await c.post(
        f"/v1/sessions/{sid}/messages", json=body, headers={"Idempotency-Key": key}, **kw
    )
    tally.statuses[response.status_code] += 1
    return response


async def until_stored(
    c: httpx.AsyncClient, sid: str, body: dict[str, Any], key: str, tally: Tally
) -> dict[str, Any]:
    """Post until a 201, as a careful client does (the same key every time)."""
    for _ in range(20):
        try:
            response = await post(c, sid, body, key, tally)
        except httpx.TransportError as err:  # e.g. a keep-alive connection the server had closed
            tally.transport_errors[type(err).__name__] += 1
            continue
        if response.status_code == 201:
            answer: dict[str, Any] = response.json()
            return answer
        assert response.status_code < 500, response.text
        await asyncio.sleep(0.1)
    raise AssertionError(f"batch {key} never stored")


async def client(server: Server, n: int, sid: str, tally: Tally) -> None:
    async with httpx.AsyncClient(base_url=server.url, headers=server.headers, timeout=TIMEOUT) as c:
        for b in range(MESSAGES // BATCH):
            tag, key = f"c{n}b{b}", f"soak-{n}-{b}"
            body = {"messages": messages(tag)}
            match (n + b) % 4:
                case 1:  # a timeout on the client's side, then the retry
                    try:
                        await post(c, sid, body, key, tally, timeout=0.005 * (1 + b % 8))
                    except httpx.TimeoutException:
                        tally.client_timeouts += 1
                    answer = await until_stored(c, sid, body, key, tally)
                case 2:  # the same request twice at once
                    first, second = await asyncio.gather(
                        until_stored(c, sid, body, key, tally),
                        until_stored(c, sid, body, key, tally),
                    )
                    assert first == second
                    tally.concurrent_duplicates += 1
                    answer = first
                case _:
                    answer = await until_stored(c, sid, body, key, tally)
            if b % 4 == 0:  # a retry after the success: the same answer, nothing written
                assert await until_stored(c, sid, body, key, tally) == answer
                tally.replays_checked += 1
            assert answer["last_seq"] - answer["first_seq"] == BATCH - 1
            tally.batches[tag] = (sid, answer["first_seq"], answer["last_seq"])


async def soak(server: Server, sids: list[str]) -> Tally:
    tally = Tally()
    half = CLIENTS // 2
    owners = [sids[n % SHARED_SESSIONS] for n in range(half)] + sids[SHARED_SESSIONS:]
    await asyncio.gather(*(client(server, n, sid, tally) for n, sid in enumerate(owners)))
    return tally


@pytest.mark.slow
def test_64_clients_appending_with_retried_keys_lose_and_duplicate_nothing(
    tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    url = fresh_database("postgres", tmp_path, request)
    started = time.monotonic()
    with running(url, tmp_path, CTXC_LOG_LEVEL="info") as server:
        with server.client() as c:
            count = SHARED_SESSIONS + CLIENTS // 2
            sids = [c.post("/v1/sessions", json={}).json()["id"] for _ in range(count)]
        soak_started = time.monotonic()
        tally = asyncio.run(soak(server, sids))
        soaked = time.monotonic() - soak_started
        cpu = server.cpu_seconds()
        stored = 0
        with server.client() as c:
            for sid in sids:
                history = all_messages(c, sid)
                stored += len(history)
                assert [m["seq"] for m in history] == list(range(1, len(history) + 1))
                texts = [m["message"]["content"][0]["text"].split(":")[0] for m in history]
                assert len(texts) == len(set(texts)), "a message was stored twice"
                at = {t: m["seq"] for t, m in zip(texts, history, strict=True)}
                for tag, (owner, first, last) in tally.batches.items():
                    if owner == sid:  # the batch is whole, in order, where its answer says
                        assert [at.pop(f"{tag}.{i}") for i in range(BATCH)] == list(
                            range(first, last + 1)
                        )
                assert not at, "messages no batch answer accounts for"
    logged = [json.loads(line) for line in (tmp_path / "serve-1.log").read_text().splitlines()]
    errors = [e for e in logged if e.get("status", 0) >= 500 or e["level"] == "error"]
    assert not errors, errors[:3]
    assert stored == CLIENTS * MESSAGES
    assert len(tally.batches) == CLIENTS * MESSAGES // BATCH
    answered = sum(tally.statuses.values()) + sum(tally.transport_errors.values())
    assert answered == tally.requests - tally.client_timeouts
    assert set(tally.statuses) == {201}
    print(
        f"\nsoak: {CLIENTS} clients, {stored} messages stored, 0 lost, 0 duplicated;"
        f" {tally.requests} requests {dict(tally.statuses)} {dict(tally.transport_errors)},"
        f" {tally.client_timeouts} client"
        f" timeouts, {tally.concurrent_duplicates} concurrent duplicates,"
        f" {tally.replays_checked} replays; {soaked:.1f}s soak ({cpu:.1f}s server CPU),"
        f" {time.monotonic() - started:.1f}s in all"
    )
