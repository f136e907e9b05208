"""The Postgres event bus: LISTEN/NOTIFY, so every replica on one database sees every event.

An emitting transaction runs `pg_notify` beside its insert: Postgres delivers the notification
when, and only if, that transaction commits. Each process holds ONE dedicated asyncpg connection
that LISTENs (not one per subscriber) and wakes the subscribers of the session named in each
notification. When that connection drops (or stops answering its keepalive), the bus reconnects
with exponential backoff; every subscriber is woken to re-read the database when the
connection is lost (a stream ends there if the database is gone) and again when it is back,
since notifications sent while nobody listened are gone; the events themselves are not.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from contextlib import AbstractContextManager
from typing import Any

import asyncpg
from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession

from app.adapters.events.subscribers import Subscribers, Subscription
from app.domain.sessions import SessionPk

log = logging.getLogger("ctxc.events")

CHANNEL = "ctxc_events"
APPLICATION_NAME = "ctxc-events"
# Options of SQLAlchemy's asyncpg adapter that asyncpg.connect itself does not take.
ADAPTER_OPTIONS = ("prepared_statement_cache_size", "prepared_statement_name_func")


async def notify(db: AsyncSession, pk: SessionPk, event_id: int) -> None:
    """Queue the notification of event ``event_id`` in ``db``'s transaction (sent at commit)."""
    await db.execute(select(func.pg_notify(CHANNEL, f"{pk}:{event_id}")))


def _parse(payload: str) -> tuple[SessionPk, int] | None:
    pk, _, event_id = payload.rpartition(":")
    return (SessionPk(pk), int(event_id)) if pk and event_id.isdigit() else None


class PostgresBus:
    """One LISTEN connection per process, reconnected with backoff; see the module docstring."""

    def __init__(
        self,
        engine: AsyncEngine,
        queue_size: int,
        keepalive_s: float = 10.0,
        backoff_s: tuple[float, float] = (0.1, 30.0),
    ) -> None:
        args, kwargs = engine.dialect.create_connect_args(engine.url)
        self._connect_args: tuple[Any, ...] = tuple(args)
        self._connect_kwargs: dict[str, Any] = {"timeout": 10} | {
            k: v for k, v in kwargs.items() if k not in ADAPTER_OPTIONS
        }
        self._subscribers = Subscribers(queue_size)
        self._keepalive_s = keepalive_s
        self._backoff_s = backoff_s
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        """Listen before the first request is served (a failure here fails start-up)."""
        connection, lost = await self._listen()
        self._task = asyncio.create_task(self._supervise(connection, lost), name="ctxc-events")

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        self._subscribers.close()

    def subscribe(self, pk: SessionPk) -> AbstractContextManager[Subscription]:
        return self._subscribers.subscribe(pk)

    @property
    def merged(self) -> int:
        return self._subscribers.merged

    async def _listen(self) -> tuple[asyncpg.Connection, asyncio.Event]:
        """A new LISTEN connection, and an event set when it is lost."""
        connection = await asyncpg.connect(
            *self._connect_args,
            **self._connect_kwargs,
            server_settings={"application_name": APPLICATION_NAME},
        )
        lost = asyncio.Event()
        connection.add_termination_listener(lambda _: lost.set())
        try:
            await connection.add_listener(CHANNEL, self._on_notification)
        except BaseException:
            connection.terminate()
            raise
        self._subscribers.resync()  # whatever was notified while nobody listened
        return connection, lost

    def _on_notification(self, _conn: object, _pid: int, _channel: str, payload: str) -> None:
        parsed = _parse(payload)
        if parsed is None:
            log.warning("ignored a malformed %s notification: %r", CHANNEL, payload[:100])
            return
        self._subscribers.wake(*parsed)

    async def _supervise(self, connection: asyncpg.Connection, lost: asyncio.Event) -> None:
        try:
            while True:
                await self._watch(connection, lost)
                connection.terminate()
                # Every subscriber re-reads now: if the database is gone, its stream ends
                # cleanly (the client reconnects later) instead of hanging on a dead bus.
                self._subscribers.resync()
                connection, lost = await self._reconnect()
        finally:
            connection.terminate()

    async def _watch(self, connection: asyncpg.Connection, lost: asyncio.Event) -> None:
        """Return when the connection is lost or stops answering (a silent network failure
        would otherwise never be noticed)."""
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(lost.wait(), self._keepalive_s)
                log.warning("the LISTEN connection was lost; reconnecting")
                return
            try:
                await asyncio.wait_for(connection.execute("SELECT 1"), self._keepalive_s)
            except Exception as exc:  # whatever it is, the bus must not die: reconnect
                log.warning("the LISTEN connection stopped answering (%r); reconnecting", exc)
                return

    async def _reconnect(self) -> tuple[asyncpg.Connection, asyncio.Event]:
        delay, most = self._backoff_s
        while True:
            await asyncio.sleep(delay)
            try:
                return await self._listen()
            except Exception as exc:  # e.g. asyncpg's InternalClientError when the new
                # connection is terminated before LISTEN: a bus that stopped here would never
                # wake a subscriber again.
                log.warning("LISTEN reconnect failed (%r); retrying in %.1fs", exc, delay)
                delay = min(delay * 2, most)
