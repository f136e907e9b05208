"""Shared fixtures: migrated real databases (SQLite file and Postgres) and live HTTP servers."""

from __future__ import annotations

import asyncio
import os
import socket
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import hypothesis
import pytest
import uvicorn
from sqlalchemy import func, select
from sqlalchemy.engine import make_url

from app.main import create_app
from app.server import uvicorn_config
from app.services.tenancy import keys
from app.settings import Settings
from app.storage.db import create_engine, create_sessionmaker
from app.storage.migrate import upgrade
from app.storage.models import Base

# No test asserts a timing: Hypothesis's deadline and too-slow check would, on a busy machine.
hypothesis.settings.register_profile(
    "ctxc", deadline=None, suppress_health_check=[hypothesis.HealthCheck.too_slow]
)
hypothesis.settings.load_profile("ctxc")

POSTGRES_ADMIN_URL = os.environ.get(
    "CTXC_TEST_POSTGRES_URL", "postgresql+asyncpg://postgres@127.0.0.1:5432/postgres"
)
DATABASES = ("sqlite", "postgres")
# The scraper's credential for /metrics on the keys-mode test servers.
METRICS_TOKEN = "test-scraper-token"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _asyncpg_dsn(url: str) -> str:
    return make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


async def _admin(sql: str) -> None:
    conn = await asyncpg.connect(_asyncpg_dsn(POSTGRES_ADMIN_URL), timeout=5)
    try:
        await conn.execute(sql)
    finally:
        await conn.close()


def admin(sql: str) -> None:
    """Run ``sql`` on the Postgres server's admin database."""
    asyncio.run(_admin(sql))


@pytest.fixture(scope="session")
def postgres_base() -> Iterator[str]:
    """A fresh Postgres database for this run, dropped at the end."""
    name = f"ctxc_test_{uuid.uuid4().hex[:10]}"
    try:
        asyncio.run(_admin(f'CREATE DATABASE "{name}"'))
    except (OSError, asyncpg.PostgresError) as exc:
        if os.environ.get("CI"):
            pytest.fail(f"Postgres is required in CI and is unreachable: {exc}")
        pytest.skip(f"Postgres unreachable: {exc}")
    yield make_url(POSTGRES_ADMIN_URL).set(database=name).render_as_string(hide_password=False)
    asyncio.run(_admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


def fresh_database(kind: str, tmp: Path, request: pytest.FixtureRequest) -> str:
    """An empty database URL of ``kind`` (not migrated)."""
    if kind == "sqlite":
        return f"sqlite+aiosqlite:///{tmp / f'{uuid.uuid4().hex[:8]}.db'}"
    base: str = request.getfixturevalue("postgres_base")
    name = f"{make_url(base).database}_{uuid.uuid4().hex[:6]}"
    asyncio.run(_admin(f'CREATE DATABASE "{name}"'))
    request.addfinalizer(lambda: asyncio.run(_admin(f'DROP DATABASE "{name}" WITH (FORCE)')))
    return make_url(base).set(database=name).render_as_string(hide_password=False)


@pytest.fixture(scope="session", params=DATABASES)
def database_url(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> str:
    """A migrated database of each kind, shared by the whole run."""
    url = fresh_database(request.param, tmp_path_factory.mktemp("db"), request)
    upgrade(url)
    return url


class LiveServer:
    """uvicorn serving the app on a loopback port, in a thread of this process."""

    def __init__(self, settings: Settings) -> None:
        port = free_port()
        config = uvicorn_config(
            create_app(settings),
            settings,
            host="127.0.0.1",
            port=port,
            log_level="warning",
            lifespan="on",
        )
        self.server = uvicorn.Server(config)
        self.url = f"http://127.0.0.1:{port}"
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self) -> LiveServer:
        self.thread.start()
        deadline = time.monotonic() + 30
        while not self.server.started:
            if not self.thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("server did not start")
            time.sleep(0.02)
        return self

    def __exit__(self, *_: object) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=30)


@dataclass(frozen=True)
class Api:
    """A live server and keys of two tenants on it."""

    url: str
    database_url: str
    key_a: str
    key_b: str

    def client(self, key: str | None = None) -> httpx.Client:
        headers = {"Authorization": f"Bearer {key or self.key_a}"}
        return httpx.Client(base_url=self.url, headers=headers, timeout=60)


def make_key(url: str, tenant: str) -> str:
    async def run() -> str:
        engine = create_engine(url)
        try:
            async with create_sessionmaker(engine)() as db:
                key, _ = await keys.create_key(db, tenant, None, datetime.now(UTC))
                return key
        finally:
            await engine.dispose()

    return asyncio.run(run())


@pytest.fixture(scope="session")
def api(database_url: str) -> Iterator[Api]:
    """A server in keys mode on each database, with tenants A and B."""
    yield from serve_api(database_url)


def serve_api(database_url: str, **settings: Any) -> Iterator[Api]:
    """A server in keys mode on ``database_url`` (``settings`` over the defaults), with tenants
    A and B."""
    served = Settings(
        database_url=database_url,
        auth="keys",
        max_body_bytes=256 * 1024,
        metrics_token=METRICS_TOKEN,
        **settings,
    )
    key_a = make_key(database_url, f"tenant-a-{uuid.uuid4().hex[:6]}")
    key_b = make_key(database_url, f"tenant-b-{uuid.uuid4().hex[:6]}")
    with LiveServer(served) as server:
        yield Api(server.url, database_url, key_a, key_b)


@pytest.fixture
def client(api: Api) -> Iterator[httpx.Client]:
    with api.client() as c:
        yield c


def scrape(client: httpx.Client) -> httpx.Response:
    """``/metrics`` as the scraper reads it (with its own token, not a tenant's key)."""
    return client.get("/metrics", headers={"Authorization": f"Bearer {METRICS_TOKEN}"})


# Digests are made in the background after a compile (app/services/compiling/digesting.py),
# whenever it ends: not writes of the request under test.
DERIVED = frozenset({"digests", "digest_ids"})


def row_counts(url: str) -> dict[str, int]:
    """How many rows each table holds (to prove a failed request wrote nothing), but the
    derived ones."""

    async def run() -> dict[str, int]:
        engine = create_engine(url)
        try:
            async with engine.connect() as conn:
                return {
                    t.name: int(
                        (await conn.execute(select(func.count()).select_from(t))).scalar_one()
                    )
                    for t in Base.metadata.sorted_tables
                    if t.name not in DERIVED
                }
        finally:
            await engine.dispose()

    return asyncio.run(run())


def new_session(client: httpx.Client, **fields: object) -> str:
    response = client.post("/v1/sessions", json=fields)
    assert response.status_code == 201, response.text
    session_id: str = response.json()["id"]
    return session_id
