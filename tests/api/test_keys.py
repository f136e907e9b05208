"""API keys on a running server: verified keys are remembered for `key_cache_seconds`, so a key
revoked by the CLI (another process) is refused within that bound; unknown keys never are."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime

import httpx
import pytest

from app.domain.sessions import TenantId
from app.services.tenancy import keys
from app.settings import Settings
from app.storage.db import create_engine, create_sessionmaker
from app.storage.models import ApiKeyRow
from tests.conftest import LiveServer, make_key


def revoke(url: str, key: str) -> None:
    """What `ctxc keys revoke` does, from outside the server."""

    async def run() -> None:
        engine = create_engine(url)
        try:
            async with create_sessionmaker(engine)() as db:
                await keys.revoke_key(db, key[: keys.SHOWN_PREFIX_CHARS], datetime.now(UTC))
        finally:
            await engine.dispose()

    asyncio.run(run())


def store_key(url: str, key: str) -> None:
    """Store ``key`` itself (the CLI only stores keys it generates)."""

    async def run() -> None:
        engine = create_engine(url)
        now = datetime.now(UTC)
        try:
            async with create_sessionmaker(engine)() as db:
                tenant = await keys.ensure_tenant(db, f"chosen-{uuid.uuid4().hex[:6]}", now)
                db.add(
                    ApiKeyRow(
                        id=str(uuid.uuid4()),
                        tenant_id=tenant,
                        prefix=key[:12],
                        key_hash=keys.hash_key(key),
                        created_at=now,
                    )
                )
                await db.commit()
        finally:
            await engine.dispose()

    asyncio.run(run())


def status(url: str, key: str) -> int:
    headers = {"Authorization": f"Bearer {key}"}
    return httpx.get(f"{url}/v1/sessions", headers=headers, timeout=30).status_code


@pytest.fixture(scope="module")
def remembering(database_url: str) -> Iterator[str]:
    """A server that remembers verified keys for an hour."""
    settings = Settings(database_url=database_url, auth="keys", key_cache_seconds=3600)
    with LiveServer(settings) as server:
        yield server.url


def test_without_a_key_cache_a_revoked_key_is_refused_at_once(database_url: str) -> None:
    key = make_key(database_url, f"t-{uuid.uuid4().hex[:6]}")
    settings = Settings(database_url=database_url, auth="keys", key_cache_seconds=0)
    with LiveServer(settings) as server:
        assert status(server.url, key) == 200
        revoke(database_url, key)
        assert status(server.url, key) == 401


def test_a_revoked_key_is_refused_once_its_entry_expires(database_url: str) -> None:
    key = make_key(database_url, f"t-{uuid.uuid4().hex[:6]}")
    settings = Settings(database_url=database_url, auth="keys", key_cache_seconds=0.2)
    with LiveServer(settings) as server:
        assert status(server.url, key) == 200
        revoke(database_url, key)
        time.sleep(0.3)  # past the bound, however slowly the requests ran
        assert status(server.url, key) == 401


def test_a_remembered_key_is_served_until_its_entry_expires(
    database_url: str, remembering: str
) -> None:
    key = make_key(database_url, f"t-{uuid.uuid4().hex[:6]}")
    assert status(remembering, key) == 200
    revoke(database_url, key)
    assert status(remembering, key) == 200  # the documented revocation delay


def test_a_key_revoked_before_its_first_use_is_refused(database_url: str, remembering: str) -> None:
    key = make_key(database_url, f"t-{uuid.uuid4().hex[:6]}")
    revoke(database_url, key)
    assert status(remembering, key) == 401
    assert status(remembering, key) == 401


def test_a_server_started_after_a_revocation_refuses_the_key(database_url: str) -> None:
    key = make_key(database_url, f"t-{uuid.uuid4().hex[:6]}")
    revoke(database_url, key)
    settings = Settings(database_url=database_url, auth="keys", key_cache_seconds=3600)
    with LiveServer(settings) as server:
        assert status(server.url, key) == 401


def test_an_unknown_key_is_401_and_never_remembered(database_url: str, remembering: str) -> None:
    key = f"{keys.KEY_PREFIX}{uuid.uuid4().hex}"
    assert status(remembering, key) == 401
    assert status(remembering, key) == 401
    store_key(database_url, key)  # the key becomes valid: it is read again, not remembered as bad
    assert status(remembering, key) == 200


def test_the_cache_forgets_expired_keys_and_keeps_a_bounded_number() -> None:
    now = [0.0]
    cache = keys.KeyCache(ttl=10, max_entries=2, clock=lambda: now[0])
    cache.put("a", TenantId("ta"))
    cache.put("b", TenantId("tb"))
    cache.put("c", TenantId("tc"))  # "a" is the oldest: out
    assert (cache.get("a"), cache.get("b"), cache.get("c")) == (None, "tb", "tc")
    now[0] = 10.0
    assert cache.get("b") is None and cache.get("c") is None
    off = keys.KeyCache(ttl=0)
    off.put("a", TenantId("ta"))
    assert off.get("a") is None
