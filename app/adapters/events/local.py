"""The in-process event bus, for SQLite: one process owns the database file.

SQLite has no LISTEN/NOTIFY, so the process is the broker. A transaction that emitted events
keeps their ids in its session; its `after_commit` hook hands them to every bus of this process
on the same database file (whatever engine or thread committed), and a rollback forgets them. A
bus wakes its subscribers on its own event loop.

Other processes on the same file (the workers of `ctxc serve --workers N`, or another server)
cannot call into this one, so while it has subscribers a bus also polls the events table every
``POLL_SECONDS`` for ids above the highest it has seen, and wakes the subscribers of the
sessions they belong to: an event committed by another process reaches a subscriber here within
about that long (one committed here, at once). SQLite commits one writer at a time and
allocates ids inside the writing transaction, so ids commit in increasing order and "above the
highest seen" never skips one. The poll is one indexed range read, and no read at all while
nobody subscribes.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from contextlib import AbstractContextManager
from pathlib import Path

from sqlalchemy import column, event, func, select, table
from sqlalchemy.engine import URL, make_url
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession
from sqlalchemy.orm import Session, SessionTransaction

from app.adapters.events.subscribers import Subscribers, Subscription
from app.domain.sessions import SessionPk

PENDING = "ctxc_pending_events"  # key in Session.info: (pk, id) emitted, not yet committed
POLL_SECONDS = 0.25  # how often a bus with subscribers looks for other processes' events

log = logging.getLogger("ctxc.events")
_EVENTS = table("events", column("id"), column("session_pk"))


def database_key(url: str | URL) -> str:
    """One name per database file, however its URL is spelled."""
    database = make_url(url).database
    if not database or database == ":memory:":
        return str(url)
    return str(Path(database).expanduser().resolve())


class _Hub:
    """The buses of this process, by database file. Thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._buses: dict[str, set[LocalBus]] = {}

    def attach(self, key: str, bus: LocalBus) -> None:
        with self._lock:
            self._buses.setdefault(key, set()).add(bus)

    def detach(self, key: str, bus: LocalBus) -> None:
        with self._lock:
            self._buses.get(key, set()).discard(bus)

    def publish(self, key: str, pk: SessionPk, event_id: int) -> None:
        with self._lock:
            buses = list(self._buses.get(key, ()))
        for bus in buses:
            bus.deliver(pk, event_id)


_HUB = _Hub()


class LocalBus:
    """Wakes this process's subscribers when an event on its SQLite file commits (in this
    process: at once; in another one: at the next poll)."""

    def __init__(self, engine: AsyncEngine, queue_size: int, poll_s: float = POLL_SECONDS) -> None:
        self._engine = engine
        self._key = database_key(engine.url)
        self._subscribers = Subscribers(queue_size)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._poll_s = poll_s
        self._poller: asyncio.Task[None] | None = None

    async def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        _HUB.attach(self._key, self)
        seen = await self._newest()
        self._poller = asyncio.create_task(self._poll(seen), name="ctxc-events-poll")

    async def close(self) -> None:
        _HUB.detach(self._key, self)
        if self._poller is not None:
            self._poller.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._poller
        self._subscribers.close()

    async def _newest(self) -> int:
        async with self._engine.connect() as connection:
            newest = await connection.scalar(select(func.max(_EVENTS.c.id)))
        return int(newest or 0)

    async def _poll(self, seen: int) -> None:
        """Wake subscribers for events other processes committed (see the module docstring)."""
        while True:
            await asyncio.sleep(self._poll_s)
            if not len(self._subscribers):
                continue  # a new subscriber reads the database itself before it waits
            try:
                async with self._engine.connect() as connection:
                    rows = (
                        await connection.execute(
                            select(_EVENTS.c.session_pk, func.max(_EVENTS.c.id))
                            .where(_EVENTS.c.id > seen)
                            .group_by(_EVENTS.c.session_pk)
                        )
                    ).all()
            except Exception as exc:  # a locked or busy file: the next poll tries again
                log.warning("polling for events failed (%r); retrying", exc)
                continue
            for pk, newest in rows:
                self._subscribers.wake(SessionPk(pk), int(newest))
                seen = max(seen, int(newest))

    def subscribe(self, pk: SessionPk) -> AbstractContextManager[Subscription]:
        return self._subscribers.subscribe(pk)

    @property
    def merged(self) -> int:
        return self._subscribers.merged

    def deliver(self, pk: SessionPk, event_id: int) -> None:
        """From any thread: wake ``pk``'s subscribers on this bus's loop."""
        if self._loop is None:
            return
        with contextlib.suppress(RuntimeError):  # a closed loop: nobody listens any more
            self._loop.call_soon_threadsafe(self._subscribers.wake, pk, event_id)


def _pending(session: Session) -> list[tuple[SessionPk, int]]:
    pending: list[tuple[SessionPk, int]] | None = session.info.get(PENDING)
    if pending is None:
        pending = session.info[PENDING] = []
        event.listen(session, "after_commit", _publish)
        event.listen(session, "after_transaction_end", _forget)
    return pending


def _publish(session: Session) -> None:
    key = database_key(session.get_bind().engine.url)
    for pk, event_id in _take(session):
        _HUB.publish(key, pk, event_id)


def _forget(session: Session, transaction: SessionTransaction) -> None:
    if transaction.parent is None:  # the outermost transaction ended (after_commit ran first)
        _take(session)


def _take(session: Session) -> list[tuple[SessionPk, int]]:
    pending: list[tuple[SessionPk, int]] = session.info.get(PENDING, [])
    taken, pending[:] = list(pending), []
    return taken


def notify_after_commit(db: AsyncSession, pk: SessionPk, event_id: int) -> None:
    """Announce event ``event_id`` to this process's buses if, and when, ``db`` commits."""
    _pending(db.sync_session).append((pk, event_id))
