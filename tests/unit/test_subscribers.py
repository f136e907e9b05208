"""Wake-up queues: bounded whatever the publisher does, and never hiding the newest event."""

from __future__ import annotations

import asyncio

from app.adapters.events import RESYNC
from app.adapters.events.subscribers import Subscribers, Subscription
from app.domain.sessions import SessionPk

PK = SessionPk("s1")


def test_a_full_queue_merges_its_oldest_wake_up_and_stays_bounded() -> None:
    async def run() -> None:
        subscription = Subscription(2)
        accepted = [subscription.wake(n) for n in range(1, 101)]
        assert accepted[:2] == [True, True] and not any(accepted[2:])
        assert subscription._queue.qsize() == 2
        assert await subscription.wait_past(99)  # the newest wake-up survived the merging
        assert subscription._queue.empty()

    asyncio.run(run())


def test_wake_ups_for_events_already_sent_do_not_end_the_wait() -> None:
    async def run() -> bool:
        subscription = Subscription(4)
        for n in (3, 4, 5):
            subscription.wake(n)
        waiting = asyncio.create_task(subscription.wait_past(5))
        await asyncio.sleep(0)
        assert not waiting.done()
        subscription.wake(6)
        return await waiting

    assert asyncio.run(run())


def test_resync_always_wakes_and_close_ends_the_wait() -> None:
    async def run() -> tuple[bool, bool]:
        subscription = Subscription(1)
        subscription.wake(RESYNC)
        resynced = await subscription.wait_past(10**12)
        waiting = asyncio.create_task(subscription.wait_past(0))
        await asyncio.sleep(0)
        subscription.close()
        return resynced, await waiting

    assert asyncio.run(run()) == (True, False)


def test_subscribers_wake_only_their_session_and_count_merges() -> None:
    async def run() -> None:
        subscribers = Subscribers(1)
        with subscribers.subscribe(PK) as mine, subscribers.subscribe(SessionPk("s2")) as other:
            assert len(subscribers) == 2
            for n in range(1, 6):
                subscribers.wake(PK, n)
            assert subscribers.merged == 4
            assert await mine.wait_past(4)
            assert other._queue.empty()
            subscribers.resync()
            assert await other.wait_past(10**12)
        assert len(subscribers) == 0

    asyncio.run(run())


def test_subscribing_after_close_ends_at_once() -> None:
    async def run() -> bool:
        subscribers = Subscribers(1)
        subscribers.close()
        with subscribers.subscribe(PK) as subscription:
            return await subscription.wait_past(0)

    assert asyncio.run(run()) is False
