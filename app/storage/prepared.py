"""Prepared compactions: at most one per session, summarised and waiting to be swapped in."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import delete
from sqlalchemy.ext.asyncio import AsyncSession

from app.domain.sessions import SessionPk
from app.storage.models import PreparedCompactionRow


async def load(db: AsyncSession, pk: SessionPk) -> PreparedCompactionRow | None:
    """The session's prepared compaction, if there is one."""
    return await db.get(PreparedCompactionRow, str(pk), populate_existing=True)


async def save(
    db: AsyncSession,
    pk: SessionPk,
    seqs: list[int],
    digest: str,
    summary: dict[str, Any],
    at: datetime,
) -> None:
    """Store a prepared compaction in place of any the session had (the caller holds the
    session's lock and its compaction lease)."""
    await drop(db, pk)
    db.add(
        PreparedCompactionRow(
            session_pk=pk, seqs=seqs, digest=digest, summary=summary, prepared_at=at
        )
    )
    await db.flush()


async def drop(db: AsyncSession, pk: SessionPk) -> None:
    """Forget the session's prepared compaction."""
    await db.execute(delete(PreparedCompactionRow).where(PreparedCompactionRow.session_pk == pk))
