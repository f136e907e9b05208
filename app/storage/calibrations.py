"""Calibration samples: a session's, and its tenant's for the same count key.

Both are read by a compile in one statement. A new sample is added in the transaction that
records the reported usage, which already holds the session's lock (so the session's row has one
writer); the tenant's row is shared by its sessions, so it is created if missing and then locked
(``FOR UPDATE`` on Postgres; SQLite has one writer at a time) before it is read and rewritten.
Locks are taken session first, then the tenant's row, always in that order.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, cast

from sqlalchemy import bindparam, literal, select, union_all
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.ext.asyncio import AsyncSession

from app.domain.calibration import Sample, from_json, kept, to_json
from app.domain.sessions import SessionPk, TenantId
from app.storage.models import ProfileCalibrationRow, SessionCalibrationRow

_SESSION = SessionCalibrationRow.__table__.c
_PROFILE = ProfileCalibrationRow.__table__.c
_BOTH = union_all(
    select(literal("session").label("scope"), _SESSION.samples).where(
        _SESSION.session_pk == bindparam("pk"), _SESSION.key == bindparam("key")
    ),
    select(literal("profile").label("scope"), _PROFILE.samples).where(
        _PROFILE.tenant_id == bindparam("tenant"), _PROFILE.key == bindparam("key")
    ),
)

Row = SessionCalibrationRow | ProfileCalibrationRow


async def samples(
    db: AsyncSession, tenant: TenantId, pk: SessionPk, key: str
) -> tuple[tuple[Sample, ...], tuple[Sample, ...]]:
    """The session's samples and the tenant's, for ``key`` (empty where none are kept)."""
    found = {
        scope: raw
        for scope, raw in await db.execute(_BOTH, {"pk": pk, "tenant": tenant, "key": key})
    }
    return from_json(found.get("session")), from_json(found.get("profile"))


async def add_sample(
    db: AsyncSession, tenant: TenantId, pk: SessionPk, key: str, sample: Sample, now: datetime
) -> None:
    """Keep ``sample`` in the session's ring and the tenant's (the caller holds the session's
    lock)."""
    fresh = {"key": key, "samples": [], "updated_at": now}
    await _add(db, SessionCalibrationRow, {"session_pk": pk, **fresh}, (pk, key), sample, now)
    await _add(
        db, ProfileCalibrationRow, {"tenant_id": tenant, **fresh}, (tenant, key), sample, now
    )


async def _add(
    db: AsyncSession,
    table: type[Row],
    values: dict[str, Any],
    ident: tuple[str, str],
    sample: Sample,
    now: datetime,
) -> None:
    insert = postgresql.insert if db.get_bind().dialect.name == "postgresql" else sqlite.insert
    await db.execute(insert(table).values(values).on_conflict_do_nothing())
    found = await db.get(table, ident, with_for_update=True, populate_existing=True)
    row = cast(Row | None, found)
    if row is None:  # deleted since the insert: its tenant or session went
        return
    row.samples = to_json(kept(from_json(row.samples), sample))
    row.updated_at = now
