"""The reads and batched writes of export and import: a page at a time, Core statements."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any, cast

from sqlalchemy import Table, insert, select
from sqlalchemy.ext.asyncio import AsyncSession

from app.domain.sessions import SessionPk
from app.storage.models import (
    CompactionRow,
    CompileRow,
    MessageRow,
    PayloadRow,
    ToolPartRow,
)


def _table(row: type[Any]) -> Table:
    return cast(Table, row.__table__)


async def snapshot(db: AsyncSession) -> None:
    """Make the reads of ``db`` one snapshot on Postgres (call before the first query); SQLite
    reads are bounded by the header's last_seq and the export's start instead."""
    if db.get_bind().dialect.name == "postgresql":
        await db.connection(execution_options={"isolation_level": "REPEATABLE READ"})


async def message_page(
    db: AsyncSession, pk: SessionPk, after: int, through: int, limit: int
) -> Sequence[Any]:
    """Messages after seq ``after`` up to ``through``, as plain rows (no ORM objects)."""
    m = _table(MessageRow).c
    query = (
        select(
            m.seq, m.section, m.role, m.name, m.content, m.metadata, m.created_at, m.created_offset
        )
        .where(m.session_pk == pk, m.seq > after, m.seq <= through)
        .order_by(m.seq)
        .limit(limit)
    )
    return (await db.execute(query)).all()


async def compaction_ids(db: AsyncSession, pk: SessionPk, until: datetime) -> list[str]:
    query = (
        select(CompactionRow.id)
        .where(CompactionRow.session_pk == pk, CompactionRow.created_at <= until)
        .order_by(CompactionRow.created_at, CompactionRow.id)
    )
    return list((await db.scalars(query)).all())


async def payload_page(
    db: AsyncSession, pk: SessionPk, after: str, limit: int
) -> Sequence[PayloadRow]:
    query = (
        select(PayloadRow)
        .where(PayloadRow.session_pk == pk, PayloadRow.sha256 > after)
        .order_by(PayloadRow.sha256)
        .limit(limit)
    )
    return (await db.scalars(query)).all()


async def compile_page(
    db: AsyncSession, pk: SessionPk, after: tuple[datetime, str] | None, limit: int
) -> Sequence[CompileRow]:
    query = select(CompileRow).where(CompileRow.session_pk == pk)
    if after is not None:
        at, cid = after
        query = query.where(
            (CompileRow.created_at > at) | ((CompileRow.created_at == at) & (CompileRow.id > cid))
        )
    query = query.order_by(CompileRow.created_at, CompileRow.id).limit(limit)
    return (await db.scalars(query)).all()


async def taken(db: AsyncSession, row: type[CompactionRow | CompileRow], ids: list[str]) -> str:
    """The first of ``ids`` this database already has (ids are kept on import), or ''."""
    if not ids:
        return ""
    found = await db.scalars(select(row.id).where(row.id.in_(ids)).limit(1))
    return found.first() or ""


async def insert_rows(
    db: AsyncSession,
    row: type[MessageRow | ToolPartRow | PayloadRow | CompileRow | CompactionRow],
    values: list[dict[str, Any]],
) -> None:
    """One executemany INSERT of ``values`` (column names as keys)."""
    if values:
        await db.execute(insert(_table(row)), values)
