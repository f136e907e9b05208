"""API keys: issued once, stored hashed, mapped to a tenant."""

from __future__ import annotations

import asyncio
import hashlib
import secrets
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from cachetools import TTLCache
from sqlalchemy.exc import IntegrityError, OperationalError
from sqlalchemy.ext.asyncio import AsyncSession

from app.domain.errors import Conflict, NotFound
from app.domain.sessions import TenantId
from app.settings import LOCAL_TENANT
from app.storage import queries
from app.storage.db import autocommit
from app.storage.models import ApiKeyRow, TenantRow

KEY_PREFIX = "ctxc_"
SHOWN_PREFIX_CHARS = 12


@dataclass(frozen=True)
class KeyInfo:
    id: str
    tenant: str
    prefix: str
    label: str | None
    created_at: datetime
    revoked_at: datetime | None


def hash_key(key: str) -> str:
    """Keys are 256-bit random values, so a plain sha256 is enough to store them safely."""
    return hashlib.sha256(key.encode()).hexdigest()


async def ensure_tenant(db: AsyncSession, name: str, now: datetime) -> TenantId:
    """The id of the tenant called ``name``, created when missing (the caller commits)."""
    tenant = await queries.tenant_by_name(db, name)
    if tenant is None:
        tenant = TenantRow(id=str(uuid.uuid4()), name=name, created_at=now)
        db.add(tenant)
        await db.flush()
    return TenantId(tenant.id)


async def create_key(
    db: AsyncSession, tenant_name: str, label: str | None, now: datetime
) -> tuple[str, KeyInfo]:
    """A new key for the tenant (created if new); the key itself is returned only here."""
    if tenant_name == LOCAL_TENANT:
        raise Conflict(f"the tenant name {LOCAL_TENANT!r} is reserved for local mode")
    tenant = await ensure_tenant(db, tenant_name, now)
    key = KEY_PREFIX + secrets.token_urlsafe(32)
    row = ApiKeyRow(
        id=str(uuid.uuid4()),
        tenant_id=tenant,
        prefix=key[:SHOWN_PREFIX_CHARS],
        key_hash=hash_key(key),
        label=label,
        created_at=now,
    )
    db.add(row)
    await db.commit()
    return key, _info(row, tenant_name)


async def list_keys(db: AsyncSession) -> list[KeyInfo]:
    return [_info(row, tenant) for row, tenant in await queries.list_keys(db)]


async def revoke_key(db: AsyncSession, id_or_prefix: str, now: datetime) -> KeyInfo:
    """Revoke the key with this id or shown prefix."""
    rows = await queries.keys_matching(db, id_or_prefix)
    if len(rows) != 1:
        raise NotFound("api key", id_or_prefix)
    row = rows[0]
    if row.revoked_at is None:
        row.revoked_at = now
    tenant = await db.get(TenantRow, row.tenant_id)
    await db.commit()
    return _info(row, tenant.name if tenant else "?")


async def local_tenant(db: AsyncSession, now: datetime) -> TenantId:
    """The tenant keyless loopback callers act as in local mode (created on first start).

    The workers of `ctxc serve --workers N` start together: when another one creates the
    tenant between our read and our insert (a unique violation, or on SQLite a stale read
    snapshot), read it again."""
    for attempt in range(5):
        try:
            tenant = await ensure_tenant(db, LOCAL_TENANT, now)
            await db.commit()
            return tenant
        except (IntegrityError, OperationalError):
            await db.rollback()
            if attempt == 4:
                raise
            await asyncio.sleep(0.05 * (attempt + 1))
    raise AssertionError("unreachable")


class KeyCache:
    """Valid keys (by hash) and their tenant, each remembered for ``ttl`` seconds.

    Keys are revoked from another process (the CLI), so a revocation reaches a running server
    only when its entry expires: the price of not reading the key on every request. Unknown and
    revoked keys are never remembered. Correct across workers by construction: each process
    keeps its own entries, each read from the database (where the revocation is) at most
    ``ttl`` seconds ago, so every worker refuses a revoked key within ``ttl`` of the revocation,
    as one process does; nothing needs to be told to the others. At most ``max_entries`` keys
    are kept (expired ones out first, then the least recently used). Used on the event loop
    only, so without a lock.
    """

    def __init__(
        self, ttl: float, max_entries: int = 10_000, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.ttl = ttl
        self.max_entries = max_entries
        self._entries: TTLCache[str, TenantId] = TTLCache(max_entries, max(ttl, 0), timer=clock)

    def get(self, key_hash: str) -> TenantId | None:
        return self._entries.get(key_hash)

    def put(self, key_hash: str, tenant: TenantId) -> None:
        if self.ttl > 0:
            self._entries[key_hash] = tenant


async def authenticate(
    db: AsyncSession, key: str, cache: KeyCache | None = None
) -> TenantId | None:
    """The tenant of a valid, unrevoked key (as of ``cache.ttl`` seconds ago at most)."""
    key_hash = hash_key(key)
    if cache is not None and (tenant := cache.get(key_hash)) is not None:
        return tenant
    await autocommit(db)  # one read
    row = await queries.key_by_hash(db, key_hash)
    if row is None or row.revoked_at is not None:
        return None
    tenant = TenantId(row.tenant_id)
    if cache is not None:
        cache.put(key_hash, tenant)
    return tenant


def _info(row: ApiKeyRow, tenant: str) -> KeyInfo:
    return KeyInfo(row.id, tenant, row.prefix, row.label, row.created_at, row.revoked_at)
