"""The event bus: wakes the subscribers of a session when one of its events commits.

Events are durable rows; the bus carries only wake-ups (an event id), and readers take the events
from the database. Two implementations: Postgres LISTEN/NOTIFY (every replica on the database)
and in-process (SQLite: this process at once, other processes by polling). `notify_on_commit` is
the emitting half of either.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import Protocol

from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession

from app.adapters.events import local, postgres
from app.adapters.events.subscribers import RESYNC, Subscription
from app.domain.sessions import SessionPk

__all__ = ["RESYNC", "EventBus", "Subscription", "create_bus", "notify_on_commit"]


class EventBus(Protocol):
    """Wake-ups for the subscribers of one process, from commits anywhere on its database."""

    async def start(self) -> None:
        """Begin receiving; subscribers may subscribe before or after."""

    async def close(self) -> None:
        """Stop receiving and end every subscription (their readers return)."""

    def subscribe(self, pk: SessionPk) -> AbstractContextManager[Subscription]:
        """Wake-ups for ``pk``'s events while the block runs; subscribe, then read the
        database, then wait, so that nothing committed in between is missed."""
        ...

    @property
    def merged(self) -> int:
        """Wake-ups merged away because a subscriber's queue was full (none is lost)."""
        ...


def create_bus(engine: AsyncEngine, queue_size: int) -> EventBus:
    """The bus for ``engine``'s database: LISTEN/NOTIFY on Postgres, in-process on SQLite."""
    if engine.dialect.name == "postgresql":
        return postgres.PostgresBus(engine, queue_size)
    return local.LocalBus(engine, queue_size)


async def notify_on_commit(db: AsyncSession, pk: SessionPk, event_id: int) -> None:
    """Arrange that every bus on ``db``'s database learns of the event when ``db``'s transaction
    commits, and never if it rolls back."""
    if db.get_bind().dialect.name == "postgresql":
        await postgres.notify(db, pk, event_id)
    else:
        local.notify_after_commit(db, pk, event_id)
