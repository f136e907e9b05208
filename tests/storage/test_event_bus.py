"""The event bus and `follow` on each database, without HTTP: merged wake-ups lose nothing, a
rollback wakes nobody, closing the bus ends every follower, and on Postgres a lost LISTEN
connection comes back without a missed event."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path

import pytest
from sqlalchemy import event, text
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from app.adapters.events import EventBus, create_bus
from app.adapters.events.postgres import APPLICATION_NAME, PostgresBus
from app.api.schemas import SessionCreate
from app.domain.errors import NotFound
from app.domain.models import BUILTIN_CATALOG
from app.domain.sessions import SessionPk, TenantId
from app.services import sessions
from app.services.sessions import events
from app.services.tenancy import keys
from app.storage.db import create_engine, create_sessionmaker
from app.storage.migrate import upgrade
from app.storage.models import EventRow
from tests.conftest import fresh_database

Maker = async_sessionmaker[AsyncSession]
NEXT_TIMEOUT_S = 20


async def new_pk(maker: Maker) -> SessionPk:
    now = datetime.now(UTC)
    async with maker() as db:
        tenant = await keys.ensure_tenant(db, f"bus-{now.timestamp()}", now)
        fields = SessionCreate().model_dump(mode="json", exclude={"id"}) | {"provider": "openai"}
        view = await sessions.create_session(
            db, TenantId(tenant), None, fields, now, BUILTIN_CATALOG
        )
    return SessionPk(view.row.pk)


async def emit(maker: Maker, pk: SessionPk, n: int, commit: bool = True) -> int:
    async with maker() as db:
        event_id = await events.emit(db, pk, events.COMPACTION, {"n": n}, datetime.now(UTC))
        if commit:
            await db.commit()
        return event_id


async def until(condition: Callable[[], bool | Awaitable[bool]]) -> None:
    """Wait for ``condition`` (what we wait for is asynchronous); fail after 20 s."""
    async with asyncio.timeout(NEXT_TIMEOUT_S):
        while True:
            result = condition()
            if result if isinstance(result, bool) else await result:
                return
            await asyncio.sleep(0.01)


async def next_id(follower: AsyncIterator[EventRow]) -> int:
    async with asyncio.timeout(NEXT_TIMEOUT_S):
        return (await anext(follower)).id


def on_bus(url: str, work: Callable[[AsyncEngine, Maker, EventBus], Awaitable[None]]) -> None:
    async def run() -> None:
        engine = create_engine(url)
        bus = create_bus(engine, queue_size=1)
        try:
            await bus.start()
            await work(engine, create_sessionmaker(engine), bus)
        finally:
            await bus.close()
            await engine.dispose()

    asyncio.run(run())


def test_merged_wake_ups_lose_no_event(database_url: str) -> None:
    async def work(_: AsyncEngine, maker: Maker, bus: EventBus) -> None:
        pk = await new_pk(maker)
        first = await emit(maker, pk, 0)
        follower = events.follow(events.EventReader(maker), bus, pk, 0)
        assert await next_id(follower) == first  # subscribed; now it does not read for a while
        ids = [await emit(maker, pk, n) for n in range(1, 21)]
        await until(lambda: bus.merged >= 19)  # 20 wake-ups (or 21) into a queue of one
        assert [await next_id(follower) for _ in ids] == ids
        await follower.aclose()

    on_bus(database_url, work)


def test_a_rolled_back_or_abandoned_event_wakes_nobody(database_url: str) -> None:
    async def work(_: AsyncEngine, maker: Maker, bus: EventBus) -> None:
        pk = await new_pk(maker)
        with bus.subscribe(pk) as subscription:
            async with maker() as db:
                await events.emit(db, pk, events.COMPACTION, {}, datetime.now(UTC))
                await db.rollback()
            await emit(maker, pk, 1, commit=False)  # closed without a commit
            kept = await emit(maker, pk, 2)
            await until(lambda: not subscription._queue.empty())
            assert subscription._queue.get_nowait() == kept
            assert subscription._queue.empty()
        async with maker() as db:
            assert [row.id for row in await events.events_after(db, pk, 0, 10)] == [kept]

    on_bus(database_url, work)


def test_readers_at_one_position_share_one_query(database_url: str) -> None:
    async def work(engine: AsyncEngine, maker: Maker, _: EventBus) -> None:
        pk = await new_pk(maker)
        ids = [await emit(maker, pk, n) for n in range(3)]
        reader = events.EventReader(maker)
        queries: list[str] = []
        listen = (engine.sync_engine, "before_cursor_execute")
        record: Callable[..., None] = lambda *args: queries.append(args[2])  # noqa: E731
        event.listen(*listen, record)
        try:
            leaving = asyncio.ensure_future(reader.after(pk, ids[0]))
            staying = [asyncio.ensure_future(reader.after(pk, ids[0])) for _ in range(20)]
            await asyncio.sleep(0)
            leaving.cancel()  # a subscriber going away does not cancel the others' read
            results = await asyncio.gather(*staying)
        finally:
            event.remove(*listen, record)
        assert [[row.id for row in rows] for rows in results] == [ids[1:]] * 20
        assert len([q for q in queries if "FROM events" in q]) == 1

    on_bus(database_url, work)


def test_closing_the_bus_ends_every_follower(database_url: str) -> None:
    async def work(_: AsyncEngine, maker: Maker, bus: EventBus) -> None:
        pk = await new_pk(maker)
        follower = events.follow(events.EventReader(maker), bus, pk, 0)
        waiting = asyncio.ensure_future(anext(follower))
        await asyncio.sleep(0.05)
        await bus.close()
        with pytest.raises(StopAsyncIteration):
            async with asyncio.timeout(NEXT_TIMEOUT_S):
                await waiting

    on_bus(database_url, work)


def test_emitting_for_a_missing_session_or_a_bad_type_fails(database_url: str) -> None:
    async def work(_: AsyncEngine, maker: Maker, __: EventBus) -> None:
        pk = await new_pk(maker)
        async with maker() as db:
            with pytest.raises(ValueError, match="bad event type"):
                await events.emit(db, pk, "two\nlines", {}, datetime.now(UTC))
            with pytest.raises(NotFound):
                await events.emit(
                    db, SessionPk("missing"), events.COMPACTION, {}, datetime.now(UTC)
                )

    on_bus(database_url, work)


async def listener_pids(engine: AsyncEngine) -> list[int]:
    async with engine.connect() as conn:
        rows = await conn.execute(
            text(
                "SELECT pid FROM pg_stat_activity WHERE application_name = :name"
                " AND datname = current_database()"
            ),
            {"name": APPLICATION_NAME},
        )
        return [int(pid) for (pid,) in rows]


def test_a_lost_listen_connection_comes_back_and_nothing_is_missed(
    database_url: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    if not database_url.startswith("postgresql"):
        pytest.skip("LISTEN/NOTIFY is Postgres")
    url = fresh_database("postgres", tmp_path, request)  # ours alone: we kill its listener
    upgrade(url)

    async def run() -> None:
        engine = create_engine(url)
        maker = create_sessionmaker(engine)
        bus = PostgresBus(engine, 8, keepalive_s=0.2, backoff_s=(0.05, 0.2))
        await bus.start()
        try:
            pk = await new_pk(maker)
            follower = events.follow(events.EventReader(maker), bus, pk, 0)
            first = await emit(maker, pk, 0)
            assert await next_id(follower) == first
            [old] = await listener_pids(engine)
            async with engine.connect() as conn:
                await conn.execute(text("SELECT pg_terminate_backend(:pid)"), {"pid": old})
            during = await emit(maker, pk, 1)  # perhaps while nobody listens: a resync finds it
            assert await next_id(follower) == during

            async def back() -> bool:
                pids = await listener_pids(engine)
                return len(pids) == 1 and pids[0] != old

            await until(back)
            after = await emit(maker, pk, 2)
            assert await next_id(follower) == after
            await follower.aclose()
        finally:
            await bus.close()
            await engine.dispose()

    asyncio.run(run())


def test_the_bus_survives_listen_connections_killed_as_they_come_back(
    database_url: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """A failover kills connections as they are made, the LISTEN one too while it is set up:
    the bus keeps reconnecting (it never dies for good), then delivers and closes cleanly."""
    if not database_url.startswith("postgresql"):
        pytest.skip("LISTEN/NOTIFY is Postgres")
    url = fresh_database("postgres", tmp_path, request)
    upgrade(url)
    kill = text(
        "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
        "WHERE application_name = :name AND datname = current_database()"
    )

    def killing() -> int:
        async def loop() -> int:
            killer = create_engine(url)
            killed = 0
            try:
                async with killer.connect() as conn:
                    for _ in range(1000):
                        found = await conn.execute(kill, {"name": APPLICATION_NAME})
                        killed += found.scalar_one()
            finally:
                await killer.dispose()
            return killed

        return asyncio.run(loop())

    async def run() -> None:
        engine = create_engine(url)
        maker = create_sessionmaker(engine)
        bus = PostgresBus(engine, 8, keepalive_s=0.2, backoff_s=(0.001, 0.002))
        await bus.start()
        try:
            pk = await new_pk(maker)
            follower = events.follow(events.EventReader(maker), bus, pk, 0)
            first = await emit(maker, pk, 0)
            assert await next_id(follower) == first
            # The killers run beside this loop, as an operator or a failover would.
            killed = sum(await asyncio.gather(*(asyncio.to_thread(killing) for _ in range(3))))
            assert killed > 10
            await asyncio.sleep(0.5)
            assert bus._task is not None and not bus._task.done(), bus._task
            await until(lambda: listener_pids(engine))  # listening again
            after = await emit(maker, pk, 1)
            assert await next_id(follower) == after
            await follower.aclose()
        finally:
            await bus.close()
            await engine.dispose()

    asyncio.run(run())
