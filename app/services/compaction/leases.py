"""Compaction leases: one summariser call per compaction, across replicas.

A session is summarised by whoever holds its lease: a holder id and an expiry on the session
row, taken in one UPDATE (free or expired) in a short transaction before the summariser is
called. Of concurrent compiles, on any replica, one takes it; the others call no summariser and
compile without waiting. The holder renews it every third of its lifetime while the summariser
works, and gives it back in the transaction that writes the compaction.

A holder that stopped (killed, crashed) leaves its lease to expire. Whoever takes it over next
(a compile, or the sweep each process runs at start-up and then every lease lifetime) closes
the ``context_compaction_start`` it left open with a ``context_compaction_end`` whose
``outcome`` is ``abandoned``: no start stays without its end.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import anyio
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from app.domain.errors import NotFound
from app.domain.sessions import SessionPk
from app.services.sessions import events
from app.storage import leases as store
from app.storage import queries

log = logging.getLogger("ctxc")
SWEEP_BATCH = 100
ABANDONED = "the process running it stopped before it finished; nothing was written"


@dataclass(frozen=True)
class Lease:
    pk: SessionPk
    holder: str
    seconds: float

    def until(self) -> datetime:
        return datetime.now(UTC) + timedelta(seconds=self.seconds)


async def take(db: AsyncSession, pk: SessionPk, seconds: float) -> Lease | None:
    """Take the session's compaction lease in the caller's transaction (which row-locks the
    session: commit soon). None when another holds it; NotFound when the session is gone. An
    expired holder's open start is closed as abandoned here."""
    lease = Lease(pk, uuid.uuid4().hex, seconds)
    now = datetime.now(UTC)
    taken, left_open = await store.take(db, pk, lease.holder, now, lease.until())
    if not taken:
        if not await queries.lock_session(db, pk):
            raise NotFound("session", pk)
        return None
    if left_open is not None:
        await close_abandoned(db, pk, left_open, now)
        await store.set_start(db, pk, lease.holder, None)
    return lease


async def close_abandoned(db: AsyncSession, pk: SessionPk, start_id: int, now: datetime) -> None:
    """End the start event ``start_id`` as abandoned (its data, no compaction)."""
    start = await store.event(db, pk, start_id)
    data = {
        **(start.data if start else {}),
        "compaction_id": None,
        "outcome": "abandoned",
        "start_event_id": start_id,
        "detail": ABANDONED,
    }
    await events.emit(db, pk, events.COMPACTION_END, data, now)


async def started(db: AsyncSession, lease: Lease, event_id: int) -> None:
    """Record the start event the holder announced, to close it if the holder stops."""
    await store.set_start(db, lease.pk, lease.holder, event_id)


async def holds(db: AsyncSession, lease: Lease) -> bool:
    """Whether the lease is still the holder's (read under the caller's session lock)."""
    return await store.holder(db, lease.pk) == lease.holder


async def release(db: AsyncSession, lease: Lease) -> None:
    """Give the lease back in the caller's transaction."""
    await store.release(db, lease.pk, lease.holder)


@asynccontextmanager
async def kept(engine: AsyncEngine, lease: Lease) -> AsyncIterator[None]:
    """Renew ``lease`` every third of its lifetime for the block (each renewal a short
    transaction of its own)."""

    async def renew() -> None:
        while True:
            await anyio.sleep(lease.seconds / 3)
            with anyio.CancelScope(shield=True):  # a renewal, once begun, commits
                async with AsyncSession(engine) as db:
                    mine = await store.renew(db, lease.pk, lease.holder, lease.until())
                    await db.commit()
            if not mine:
                return

    async with anyio.create_task_group() as group:
        group.start_soon(renew)
        try:
            yield
        finally:
            group.cancel_scope.cancel()


async def sweep(maker: async_sessionmaker[AsyncSession]) -> int:
    """Take over and give back every expired lease, closing the starts they left open; how
    many."""
    async with maker() as db:
        found = await store.expired(db, datetime.now(UTC), SWEEP_BATCH)
        await db.commit()
        closed = 0
        for pk in found:
            try:
                lease = await take(db, pk, 1.0)
            except NotFound:
                lease = None
            if lease is not None:
                await release(db, lease)
                closed += 1
            await db.commit()
    return closed


async def sweep_forever(maker: async_sessionmaker[AsyncSession], seconds: float) -> None:
    """``sweep`` now and then every ``seconds``, for the life of the process."""
    while True:
        try:
            closed = await sweep(maker)
            if closed:
                log.warning("closed %d abandoned compaction(s)", closed)
        except Exception:  # the database may be away for a while: the next round retries
            log.exception("the compaction lease sweep failed")
        await anyio.sleep(seconds)
