"""The in-process event bus, for SQLite: one process owns the database file.

SQLite has no LISTEN/NOTIFY, so the process is the broker. A transaction that emitted events
keeps their ids in its session; its `after_commit` hook hands them to every bus of this process
on the same database file (whatever engine or thread committed), and a rollback forgets them. A
bus wakes its subscribers on its own event loop. Another process writing the same file is not
seen until something else wakes the subscriber; run one process on SQLite (Postgres for more).
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from contextlib import AbstractContextManager
from pathlib import Path

from sqlalchemy import event
from sqlalchemy.engine import URL, make_url
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import Session, SessionTransaction

from app.adapters.events.subscribers import Subscribers, Subscription
from app.domain.sessions import SessionPk

PENDING = "ctxc_pending_events"  # key in Session.info: (pk, id) emitted, not yet committed


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
    """Wakes this process's subscribers when an event on its SQLite file commits."""

    def __init__(self, database_url: str | URL, queue_size: int) -> None:
        self._key = database_key(database_url)
        self._subscribers = Subscribers(queue_size)
        self._loop: asyncio.AbstractEventLoop | None = None

    async def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        _HUB.attach(self._key, self)

    async def close(self) -> None:
        _HUB.detach(self._key, self)
        self._subscribers.close()

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
