"""Session use cases: create, read, change, delete, list. Each write commits once, here."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm.exc import StaleDataError

from app.domain.errors import Conflict, NotFound, UnknownName
from app.domain.models import Catalog
from app.domain.providers import PROFILES, ProviderProfile, with_overrides
from app.domain.sessions import SESSION_ID_RE, TenantId
from app.storage import compiles, queries
from app.storage.models import SessionRow


@dataclass(frozen=True)
class SessionView:
    """A session row with its message figures."""

    row: SessionRow
    message_count: int
    tokens: int  # in the encoding of the session's provider


def session_profile(
    row: SessionRow, catalog: Catalog, provider: str | None = None
) -> ProviderProfile:
    """The profile a session compiles for: ``provider`` or its own, with its overrides."""
    if provider is not None:
        return with_overrides(catalog.resolve(provider), row.profile)
    return with_overrides(stored_profile(catalog, row.provider, row.id), row.profile)


def stored_profile(catalog: Catalog, provider: str, session_id: str) -> ProviderProfile:
    """A stored session's provider; one no longer declared (``CTXC_MODELS`` changed) is a
    Conflict saying how to mend it, not a fault of the request."""
    try:
        return catalog.resolve(provider)
    except UnknownName:
        raise Conflict(
            f"session {session_id!r} has provider {provider!r}, which is no longer a provider "
            "profile or a known model: declare it again in CTXC_MODELS, or PATCH the session's "
            "provider"
        ) from None


def readable_profile(row: SessionRow, catalog: Catalog) -> ProviderProfile:
    """The profile a session is read with: its own, or, for a provider no longer declared, the
    `openai` profile (so it is still read, listed and exported; compiling it is a 409)."""
    try:
        return session_profile(row, catalog)
    except Conflict:
        return with_overrides(PROFILES["openai"], row.profile)


async def require_session(db: AsyncSession, tenant: TenantId, session_id: str) -> SessionRow:
    """The tenant's session, or NotFound (another tenant's session is simply not found)."""
    if not SESSION_ID_RE.match(session_id):  # could never have been created
        raise NotFound("session", session_id)
    row = await queries.session_row(db, tenant, session_id)
    if row is None:
        raise NotFound("session", session_id)
    return row


async def require_session_and_tenant_name(
    db: AsyncSession, tenant: TenantId, session_id: str
) -> tuple[SessionRow, str]:
    """``require_session`` and the tenant's name, in one query."""
    found = None
    if SESSION_ID_RE.match(session_id):
        found = await compiles.session_and_tenant_name(db, tenant, session_id)
    if found is None:
        raise NotFound("session", session_id)
    return found


def view(row: SessionRow, catalog: Catalog) -> SessionView:
    """The row with its message figures: the running totals it keeps (no message is read)."""
    tokens = queries.totals(row)[readable_profile(row, catalog).encoding]
    return SessionView(row, row.message_count, tokens)


async def create_session(
    db: AsyncSession,
    tenant: TenantId,
    session_id: str | None,
    fields: dict[str, Any],
    now: datetime,
    catalog: Catalog,
) -> SessionView:
    """Create a session with the caller's id, or a generated one."""
    session_id = session_id or f"ses_{uuid.uuid4().hex}"
    row = await add_session(db, tenant, session_id, fields, Stamp.new(now), catalog)
    await db.commit()
    return SessionView(row, 0, 0)


@dataclass(frozen=True)
class Stamp:
    """When a session was made and last changed, and its last seq: now and none for a new
    one, an exported one's own for an import."""

    created_at: datetime
    updated_at: datetime
    last_seq: int = 0

    @classmethod
    def new(cls, now: datetime) -> Stamp:
        return cls(now, now)


async def add_session(
    db: AsyncSession,
    tenant: TenantId,
    session_id: str,
    fields: dict[str, Any],
    stamp: Stamp,
    catalog: Catalog,
) -> SessionRow:
    """Insert a session row from its API fields (the caller commits); a taken id is a Conflict."""
    catalog.resolve(fields["provider"])
    row = SessionRow(
        pk=str(uuid.uuid4()),
        tenant_id=tenant,
        id=session_id,
        last_seq=stamp.last_seq,
        created_at=stamp.created_at,
        updated_at=stamp.updated_at,
        **_columns(fields),
    )
    db.add(row)
    try:
        await db.flush()
    except IntegrityError:
        await db.rollback()
        raise Conflict(f"session {session_id!r} already exists") from None
    return row


async def update_session(
    db: AsyncSession,
    tenant: TenantId,
    session_id: str,
    changes: dict[str, Any],
    now: datetime,
    catalog: Catalog,
) -> SessionView:
    """Apply the given fields; a new resume key, provider or profile ends the provider session
    (cursor reset)."""
    row = await require_session(db, tenant, session_id)
    if "provider" in changes:
        catalog.resolve(changes["provider"])
    else:  # nothing is changed on a session whose provider is no longer known
        stored_profile(catalog, row.provider, row.id)
    ends = ("resume_key", "provider", "profile")
    if any(name in changes and changes[name] != getattr(row, name) for name in ends):
        row.cursor_seq = None
        row.provider_session_id = None
    for column, value in _columns(changes).items():
        setattr(row, column, value)
    row.updated_at = now
    await _commit_unless_gone(db, session_id)
    return view(row, catalog)


async def delete_session(db: AsyncSession, tenant: TenantId, session_id: str) -> None:
    # One DELETE by key: a concurrent delete simply makes this one find nothing.
    if not SESSION_ID_RE.match(session_id) or not await queries.delete_session(
        db, tenant, session_id
    ):
        raise NotFound("session", session_id)
    await db.commit()


async def list_sessions(
    db: AsyncSession, tenant: TenantId, after_id: str | None, limit: int, catalog: Catalog
) -> list[SessionView]:
    rows = await queries.session_rows(db, tenant, after_id, limit)
    return [view(row, catalog) for row in rows]


async def _commit_unless_gone(db: AsyncSession, session_id: str) -> None:
    """Commit; a session deleted by a concurrent request meanwhile is simply not found."""
    try:
        await db.commit()
    except StaleDataError:
        await db.rollback()
        raise NotFound("session", session_id) from None


_COLUMN = {"metadata": "meta", "compaction": "compaction_policy"}


def _columns(fields: dict[str, Any]) -> dict[str, Any]:
    return {_COLUMN.get(name, name): value for name, value in fields.items()}
