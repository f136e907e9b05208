"""The compaction lease: three columns of the session row, changed only by single statements."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from sqlalchemy import or_, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from app.domain.sessions import SessionPk
from app.storage.models import EventRow, SessionRow

_S = SessionRow


async def take(
    db: AsyncSession, pk: SessionPk, holder: str, now: datetime, until: datetime
) -> tuple[bool, int | None]:
    """Take the lease when nobody holds it or it expired (row-locks the session until commit).
    (taken, the start event its expired holder left open)."""
    query = (
        update(_S)
        .where(_S.pk == pk, or_(_S.compaction_holder.is_(None), _S.compaction_expires < now))
        .values(compaction_holder=holder, compaction_expires=until)
        .returning(_S.compaction_start_event)  # not set here: the value the last holder left
    )
    row = (await db.execute(query)).one_or_none()
    return (False, None) if row is None else (True, row[0])


async def set_start(db: AsyncSession, pk: SessionPk, holder: str, event_id: int | None) -> None:
    """The start event the holder announced (None: none open)."""
    await db.execute(
        update(_S)
        .where(_S.pk == pk, _S.compaction_holder == holder)
        .values(compaction_start_event=event_id)
    )


async def renew(db: AsyncSession, pk: SessionPk, holder: str, until: datetime) -> bool:
    """Push the expiry out; False when the lease is no longer the holder's."""
    done = await db.execute(
        update(_S)
        .where(_S.pk == pk, _S.compaction_holder == holder)
        .values(compaction_expires=until)
    )
    return bool(getattr(done, "rowcount", 0))


async def release(db: AsyncSession, pk: SessionPk, holder: str) -> None:
    """Give the lease back (a no-op when another took it over)."""
    await db.execute(
        update(_S)
        .where(_S.pk == pk, _S.compaction_holder == holder)
        .values(compaction_holder=None, compaction_expires=None, compaction_start_event=None)
    )


async def holder(db: AsyncSession, pk: SessionPk) -> str | None:
    return await db.scalar(select(_S.compaction_holder).where(_S.pk == pk))


async def expired(db: AsyncSession, now: datetime, limit: int) -> Sequence[SessionPk]:
    """Sessions whose lease expired (its holder stopped, or stalled), oldest first."""
    query = (
        select(_S.pk)
        .where(_S.compaction_expires < now)
        .order_by(_S.compaction_expires)
        .limit(limit)
    )
    return [SessionPk(pk) for pk in (await db.scalars(query)).all()]


async def event(db: AsyncSession, pk: SessionPk, event_id: int) -> EventRow | None:
    return await db.scalar(
        select(EventRow).where(EventRow.id == event_id, EventRow.session_pk == pk)
    )
