"""Retention (app/services/sessions/retention.py), on both databases, through a live server of
its own database: expired idempotency keys are deleted and no longer replay, live ones do; old
compile records go but the ones the cursor and reactive compaction read; deletes are batched.

Time passes by moving rows' ``created_at`` back, as a day would; the server's own sweep runs
once at start-up (its interval is a day), so the sweeps here are the tests' own.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
from sqlalchemy import func, select

from app.services.sessions.retention import Pruned, Retention, prune
from app.settings import Settings
from app.storage.db import create_engine, create_sessionmaker
from app.storage.migrate import upgrade
from app.storage.models import CompileRow, IdempotencyKeyRow, SessionRow
from tests.api.test_cursor import ack, append, compile_, reply, stateful, user
from tests.conftest import DATABASES, LiveServer, fresh_database, make_key

DAY = timedelta(days=1)
RETENTION = Retention(DAY, DAY, batch=4)


@dataclass(frozen=True)
class Served:
    url: str
    database_url: str
    key: str

    def client(self) -> httpx.Client:
        headers = {"Authorization": f"Bearer {self.key}"}
        return httpx.Client(base_url=self.url, headers=headers, timeout=60)


@pytest.fixture(scope="module", params=DATABASES)
def served(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Served]:
    url = fresh_database(request.param, tmp_path_factory.mktemp("retention"), request)
    upgrade(url)
    settings = Settings(database_url=url, auth="keys", retention_sweep_seconds=86_400)
    key = make_key(url, f"retention-{uuid.uuid4().hex[:6]}")
    with LiveServer(settings) as server:
        yield Served(server.url, url, key)


@pytest.fixture
def client(served: Served) -> Iterator[httpx.Client]:
    with served.client() as c:
        yield c


def _run(url: str, work: Any) -> Any:
    async def run() -> Any:
        engine = create_engine(url)
        try:
            return await work(create_sessionmaker(engine))
        finally:
            await engine.dispose()

    return asyncio.run(run())


def sweep(url: str, retention: Retention = RETENTION) -> Pruned:
    async def work(maker: Any) -> Pruned:
        return await prune(maker, retention, datetime.now(UTC))

    result: Pruned = _run(url, work)
    return result


def age(url: str, row: Any, where: Any, by: timedelta = 2 * DAY) -> None:
    """Move the rows' ``created_at`` back ``by``, as if they had been stored that long ago."""

    async def work(maker: Any) -> None:
        async with maker() as db:
            for found in (await db.scalars(select(row).where(where))).all():
                found.created_at -= by
            await db.commit()

    _run(url, work)


def compile_ids(url: str, sid: str) -> set[str]:
    async def work(maker: Any) -> set[str]:
        async with maker() as db:
            query = select(CompileRow.id).join(SessionRow, SessionRow.pk == CompileRow.session_pk)
            return set((await db.scalars(query.where(SessionRow.id == sid))).all())

    found: set[str] = _run(url, work)
    return found


def key_count(url: str) -> int:
    async def work(maker: Any) -> int:
        async with maker() as db:
            return int(await db.scalar(select(func.count()).select_from(IdempotencyKeyRow)) or 0)

    count: int = _run(url, work)
    return count


def post(client: httpx.Client, sid: str, text: str, key: str) -> httpx.Response:
    body = {"messages": [{"role": "user", "content": text}]}
    headers = {"Idempotency-Key": key}
    return client.post(f"/v1/sessions/{sid}/messages", json=body, headers=headers)


def test_an_expired_key_is_deleted_and_a_retry_is_new(served: Served, client: httpx.Client) -> None:
    sid = stateful(client)
    old, live = f"old-{uuid.uuid4()}", f"live-{uuid.uuid4()}"
    first = post(client, sid, "once", old)
    kept = post(client, sid, "twice", live)
    assert first.status_code == kept.status_code == 201
    age(served.database_url, IdempotencyKeyRow, IdempotencyKeyRow.key == old)
    sweep(served.database_url)
    # The live key still answers as the first time and writes nothing.
    again = post(client, sid, "twice", live)
    assert again.status_code == 201 and again.json() == kept.json()
    # The expired one is gone: the retry is processed as a new request (new seqs).
    retried = post(client, sid, "once", old)
    assert retried.status_code == 201
    assert retried.json()["first_seq"] == kept.json()["last_seq"] + 1
    # And is a key again from now on.
    assert post(client, sid, "once", old).json() == retried.json()


def test_an_expired_key_is_new_before_the_sweep_too(served: Served, client: httpx.Client) -> None:
    sid = stateful(client)
    key = f"k-{uuid.uuid4()}"
    first = post(client, sid, "a", key)
    age(served.database_url, IdempotencyKeyRow, IdempotencyKeyRow.key == key)
    retried = post(client, sid, "a", key)  # the expired row is replaced, not a conflict
    assert retried.status_code == 201
    assert retried.json()["first_seq"] == first.json()["last_seq"] + 1
    # Another body under a live key is still a conflict.
    assert post(client, sid, "b", key).status_code == 409


def test_keys_are_deleted_in_batches(served: Served, client: httpx.Client) -> None:
    sid = stateful(client)
    prefix = f"batch-{uuid.uuid4().hex[:8]}-"
    for i in range(11):
        assert post(client, sid, f"m{i}", f"{prefix}{i}").status_code == 201
    age(served.database_url, IdempotencyKeyRow, IdempotencyKeyRow.key.startswith(prefix))
    before = key_count(served.database_url)
    pruned = sweep(served.database_url)
    assert pruned.keys == 11 and pruned.batches >= 3  # batches of 4
    assert key_count(served.database_url) == before - 11
    assert sweep(served.database_url).keys == 0


def test_old_compiles_go_but_the_newest_and_last_reported(
    served: Served, client: httpx.Client
) -> None:
    sid = stateful(client)
    acknowledged = compile_(client, sid)["compile_id"]
    ack(client, sid, acknowledged, provider_session_id="thread-1", usage={"prompt_tokens": 900})
    append(client, sid, user("step 3"))
    failed = compile_(client, sid)["compile_id"]
    ack(client, sid, failed, error_kind="error")
    pending = [compile_(client, sid)["compile_id"] for _ in range(9)]
    url = served.database_url
    age(url, CompileRow, CompileRow.session_pk == _pk_of(sid))
    pruned = sweep(url)
    # Kept: the last reported one (reactive compaction reads it) and the newest (it tells
    # whether that report was acted on); the acknowledged one and older pending ones go.
    assert compile_ids(url, sid) == {failed, pending[-1]}
    assert pruned.compiles == 9 and pruned.batches == 3  # batches of 4
    assert sweep(url).compiles == 0
    # The cursor flows go on: the newest compile is acknowledged, and the next is a delta.
    done = ack(client, sid, pending[-1], usage={"prompt_tokens": 950})
    assert done["cursor_seq"] == 3 and done["advanced"]
    append(client, sid, reply("done"), user("next"))
    delta = compile_(client, sid)
    assert delta["mode"] == "delta" and delta["seq_range"] == [4, 5]
    # A pruned compile is unknown now (acknowledged after the retention).
    late = client.post(f"/v1/sessions/{sid}/cursor", json={"compile_id": pending[0]})
    assert late.status_code == 404


def test_young_compiles_are_kept(served: Served, client: httpx.Client) -> None:
    sid = stateful(client)
    ids = {compile_(client, sid)["compile_id"] for _ in range(3)}
    sweep(served.database_url)
    assert compile_ids(served.database_url, sid) == ids


def _pk_of(sid: str) -> Any:
    return select(SessionRow.pk).where(SessionRow.id == sid).scalar_subquery()


def test_each_server_sweeps_by_itself(served: Served) -> None:
    settings = Settings(database_url=served.database_url, auth="keys", retention_sweep_seconds=0.1)
    with LiveServer(settings) as server, served.client() as client:
        client.base_url = httpx.URL(server.url)
        sid = stateful(client)
        key = f"swept-{uuid.uuid4()}"
        assert post(client, sid, "a", key).status_code == 201
        before = key_count(served.database_url)
        age(served.database_url, IdempotencyKeyRow, IdempotencyKeyRow.key == key)
        deadline = time.monotonic() + 30  # a bound on waiting, not a figure under test
        while key_count(served.database_url) == before and time.monotonic() < deadline:
            time.sleep(0.05)
        assert key_count(served.database_url) == before - 1
