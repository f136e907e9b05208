"""Subscribers of session events and their wake-ups.

A wake-up carries only an event id, never the event: the reader takes the events themselves
from the database, after the last id it sent. So a subscriber's queue can stay small and bounded:
when it is full, the oldest wake-up is merged away (the newest one stays, and the reader re-reads
everything after its last id anyway), and a slow subscriber costs O(1) memory without ever
missing an event.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import contextmanager

from app.domain.sessions import SessionPk

# Larger than any event id: a wake-up that always makes the reader look at the database
# (after a lost LISTEN connection, notifications may have been missed).
RESYNC = 2**63 - 1


class Subscription:
    """The pending wake-ups of one subscriber (a bounded queue of event ids)."""

    def __init__(self, size: int) -> None:
        self._queue: asyncio.Queue[int] = asyncio.Queue(size)
        self.closed = False

    def wake(self, event_id: int) -> bool:
        """Queue a wake-up; False when the queue was full and its oldest wake-up was merged."""
        merged = self._queue.full()
        if merged:
            self._queue.get_nowait()
        self._queue.put_nowait(event_id)
        return not merged

    def close(self) -> None:
        """End the subscription: a waiting reader returns False."""
        self.closed = True
        self.wake(RESYNC)

    async def wait_past(self, last_id: int) -> bool:
        """Wait until an event after ``last_id`` may be stored; False once closed."""
        while not self.closed:
            newest = await self._queue.get()
            while not self._queue.empty():
                newest = max(newest, self._queue.get_nowait())
            if newest > last_id and not self.closed:
                return True
        return False


class Subscribers:
    """The subscriptions of one process, by session. Used from one event loop only."""

    def __init__(self, queue_size: int) -> None:
        self.queue_size = queue_size
        self._by_session: dict[SessionPk, set[Subscription]] = {}
        self.merged = 0  # wake-ups merged because a queue was full (nothing is lost)
        self.closed = False

    @contextmanager
    def subscribe(self, pk: SessionPk) -> Iterator[Subscription]:
        """A subscription to ``pk``'s events for the duration of the block."""
        subscription = Subscription(self.queue_size)
        if self.closed:
            subscription.close()
        self._by_session.setdefault(pk, set()).add(subscription)
        try:
            yield subscription
        finally:
            subs = self._by_session.get(pk)
            if subs is not None:
                subs.discard(subscription)
                if not subs:
                    del self._by_session[pk]

    def wake(self, pk: SessionPk, event_id: int) -> None:
        """Tell every subscriber of ``pk`` that event ``event_id`` committed."""
        for subscription in self._by_session.get(pk, ()):
            if not subscription.wake(event_id):
                self.merged += 1

    def resync(self) -> None:
        """Make every subscriber re-read the database (notifications may have been missed)."""
        for subs in self._by_session.values():
            for subscription in subs:
                if not subscription.wake(RESYNC):
                    self.merged += 1

    def close(self) -> None:
        """End every subscription, and any made later (the bus is closing)."""
        self.closed = True
        for subs in self._by_session.values():
            for subscription in subs:
                subscription.close()

    def __len__(self) -> int:
        return sum(len(subs) for subs in self._by_session.values())
