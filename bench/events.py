"""Event delivery latency across two replicas on one Postgres.

Two `ctxc serve` processes share a database. A writer (this process, through `events.emit` on an
engine of its own: the code path compaction uses) commits one event at a time, and subscribers
read the SSE stream of each replica. Latency runs from just before the commit to the message's
arrival at the subscriber: the NOTIFY, the replica's LISTEN connection, its database read and
the SSE write. Then the same with 50 subscribers on the second replica (until the last one has
it), and, as the floor, a bare asyncpg NOTIFY to LISTEN between two connections.
"""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime

import asyncpg
import httpx
from sqlalchemy import select
from sqlalchemy.engine import make_url

from app.domain.sessions import SessionPk
from app.services.sessions import events
from app.storage.db import create_engine, create_sessionmaker
from app.storage.models import SessionRow
from bench.common import database, describe, server

ROUNDS = 300
FANOUT = 50
FANOUT_ROUNDS = 100
TIMEOUT_S = 10
DATA = {
    "compaction_id": "cmp",
    "kind": "session",
    "reason": "session_compaction",
    "tokens_before": 91_000,
    "tokens_after": 12_000,
    "budget_used_pct": 6.0,
}


class Subscriber:
    """One SSE stream, read in a task: (event id, arrival time) as each message ends."""

    def __init__(self, client: httpx.AsyncClient, session_id: str) -> None:
        self.arrivals: asyncio.Queue[tuple[int, float]] = asyncio.Queue()
        self.connected = asyncio.Event()
        self.task = asyncio.create_task(self._read(client, session_id))

    async def _read(self, client: httpx.AsyncClient, session_id: str) -> None:
        async with client.stream("GET", f"/v1/sessions/{session_id}/events") as response:
            response.raise_for_status()
            self.connected.set()
            event_id = None
            async for line in response.aiter_lines():
                if line.startswith("id:"):
                    event_id = int(line[3:])
                elif line == "" and event_id is not None:
                    self.arrivals.put_nowait((event_id, time.perf_counter()))
                    event_id = None

    async def arrival(self, event_id: int) -> float:
        async with asyncio.timeout(TIMEOUT_S):
            got, at = await self.arrivals.get()
        assert got == event_id, (got, event_id)
        return at


async def emit(
    url: str, session_id: str, subscribers: list[Subscriber], rounds: int
) -> list[list[float]]:
    """Commit ``rounds`` events one by one; per round, each subscriber's latency."""
    engine = create_engine(url)
    maker = create_sessionmaker(engine)
    try:
        async with maker() as db:
            pk = SessionPk(
                await db.scalar(select(SessionRow.pk).where(SessionRow.id == session_id)) or ""
            )
        out = []
        for _ in range(rounds + 1):  # the first round warms up
            async with maker() as db:
                event_id = await events.emit(db, pk, events.COMPACTION, DATA, datetime.now(UTC))
                start = time.perf_counter()
                await db.commit()
            out.append([await s.arrival(event_id) - start for s in subscribers])
        return out[1:]
    finally:
        await engine.dispose()


async def replicas(url: str, one: httpx.Client, two: httpx.Client) -> None:
    clients = [
        httpx.AsyncClient(base_url=c.base_url, headers=c.headers, timeout=TIMEOUT_S)
        for c in (one, two)
    ]
    session_id = (await clients[0].post("/v1/sessions", json={})).json()["id"]
    subscribers = [Subscriber(client, session_id) for client in clients]
    await asyncio.gather(*(s.connected.wait() for s in subscribers))
    rounds = await emit(url, session_id, subscribers, ROUNDS)
    print(f"  subscriber on replica 1: {describe([r[0] for r in rounds])}")
    print(f"  subscriber on replica 2: {describe([r[1] for r in rounds])}")
    fan = [Subscriber(clients[1], session_id) for _ in range(FANOUT)]
    await asyncio.gather(*(s.connected.wait() for s in fan))
    rounds = await emit(url, session_id, fan, FANOUT_ROUNDS)
    print(f"  {FANOUT} subscribers on replica 2 (the last): {describe([max(r) for r in rounds])}")
    for s in subscribers + fan:
        s.task.cancel()
    await asyncio.gather(*(s.task for s in subscribers + fan), return_exceptions=True)
    for client in clients:
        await client.aclose()


async def bare_notify(url: str) -> None:
    dsn = make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)
    listener, sender = await asyncpg.connect(dsn), await asyncpg.connect(dsn)
    arrivals: asyncio.Queue[float] = asyncio.Queue()
    await listener.add_listener("bench", lambda *_: arrivals.put_nowait(time.perf_counter()))
    times = []
    for _ in range(ROUNDS):
        start = time.perf_counter()
        await sender.execute("SELECT pg_notify('bench', 'x')")
        times.append(await asyncio.wait_for(arrivals.get(), TIMEOUT_S) - start)
    print(f"  floor, bare asyncpg NOTIFY -> LISTEN: {describe(times)}")
    await listener.close()
    await sender.close()


def run() -> None:
    print(f"event delivery latency, two replicas on one Postgres ({ROUNDS} events, one by one)")
    with database("postgres") as url, server(url) as one, server(url) as two:
        asyncio.run(replicas(url, one, two))
        asyncio.run(bare_notify(url))


if __name__ == "__main__":
    run()
