"""Session events: stored in the caller's transaction, announced when it commits, replayed by id.

Emitting is one call inside the caller's own transaction, followed by the caller's commit:

    await events.emit(db, pk, events.COMPACTION_START, {...}, now)
    await db.commit()  # subscribers on every replica learn of it now; a rollback announces nothing

The event row and its announcement (Postgres NOTIFY, or the in-process hook on SQLite) belong
to that transaction. Emitting row-locks the session until commit, so one session's events commit
in id order: a reader that asks for "everything after the last id I sent" never skips one.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator, Sequence
from datetime import datetime
from typing import Any

import anyio
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.adapters.events import EventBus, Subscription, notify_on_commit
from app.domain.errors import NotFound
from app.domain.sessions import SessionPk, TenantId
from app.services.sessions import require_session
from app.storage import queries
from app.storage.models import EventRow

# Request-boundary compaction announces its start and its end; reactive compaction, one event.
COMPACTION_START = "context_compaction_start"
COMPACTION_END = "context_compaction_end"
COMPACTION = "compaction"

EVENT_TYPE_RE = re.compile(r"^[a-z][a-z0-9_.]{0,63}$")
PAGE = 100  # events per database read while streaming (what a blocked stream holds at most)


async def emit(
    db: AsyncSession, pk: SessionPk, type: str, data: dict[str, Any], now: datetime
) -> int:
    """Add an event to the caller's transaction and return its id; subscribers learn of it
    when that transaction commits, and never if it rolls back."""
    if not EVENT_TYPE_RE.match(type):
        raise ValueError(f"bad event type {type!r}")
    if not await queries.lock_session(db, pk):
        raise NotFound("session", pk)
    row = EventRow(session_pk=pk, type=type, data=data, created_at=now)
    db.add(row)
    await db.flush()
    await notify_on_commit(db, pk, row.id)
    return row.id


async def events_after(
    db: AsyncSession, pk: SessionPk, after_id: int, limit: int
) -> Sequence[EventRow]:
    """The session's stored events with ids above ``after_id``, oldest first, at most ``limit``."""
    return await queries.event_rows(db, pk, after_id, limit)


async def stream_start(
    db: AsyncSession, tenant: TenantId, session_id: str, after_id: int | None
) -> tuple[SessionPk, int]:
    """The tenant's session and the id its stream starts after: ``after_id`` (replay), or its
    newest event (only what happens from now on)."""
    row = await require_session(db, tenant, session_id)
    pk = SessionPk(row.pk)
    return pk, after_id if after_id is not None else await queries.last_event_id(db, pk)


class EventReader:
    """Reads stored events for streams. Subscribers of one session at the same position share
    one query: a wake-up costs a read per position, not per subscriber."""

    def __init__(self, maker: async_sessionmaker[AsyncSession]) -> None:
        self._maker = maker
        self._reading: dict[tuple[SessionPk, int], asyncio.Future[Sequence[EventRow]]] = {}

    async def after(self, pk: SessionPk, after_id: int) -> Sequence[EventRow]:
        """Up to PAGE events of ``pk`` after ``after_id``, in a short session of their own."""
        key = (pk, after_id)
        reading = self._reading.get(key)
        if reading is None:
            reading = self._reading[key] = asyncio.ensure_future(self._read(pk, after_id))
            reading.add_done_callback(lambda done: self._finished(key, done))
        # Shielded: a subscriber that goes away must not cancel the others' read.
        return await asyncio.shield(reading)

    def _finished(
        self, key: tuple[SessionPk, int], done: asyncio.Future[Sequence[EventRow]]
    ) -> None:
        self._reading.pop(key, None)
        if not done.cancelled():
            done.exception()  # retrieved: when every subscriber left, nobody else will

    async def _read(self, pk: SessionPk, after_id: int) -> Sequence[EventRow]:
        async with self._maker() as db:
            return await events_after(db, pk, after_id, PAGE)


async def follow(
    reader: EventReader,
    bus: EventBus,
    pk: SessionPk,
    after_id: int,
    stop: anyio.Event | None = None,
) -> AsyncIterator[EventRow]:
    """Every event of the session after ``after_id``, in order: the stored ones, then each new
    one as it commits, until the bus closes or ``stop`` is set. Holds a database session only
    while reading."""
    with bus.subscribe(pk) as wakeups:  # before the first read: nothing slips in between
        last = after_id
        while True:
            rows = await reader.after(pk, last)
            for row in rows:
                yield row
                last = row.id
            if len(rows) < PAGE and not await _woken(wakeups, last, stop):
                return


async def _woken(wakeups: Subscription, last: int, stop: anyio.Event | None) -> bool:
    """Wait for an event after ``last``; False when the bus closed or ``stop`` was set."""
    if stop is None:
        return await wakeups.wait_past(last)
    woken = False
    async with anyio.create_task_group() as group:

        async def wait() -> None:
            nonlocal woken
            woken = await wakeups.wait_past(last)
            group.cancel_scope.cancel()

        group.start_soon(wait)
        await stop.wait()
        group.cancel_scope.cancel()
    return woken and not stop.is_set()
