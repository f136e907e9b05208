"""The queries the service needs. Every session-level query takes the tenant explicitly."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import case, delete, func, or_, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from app.domain.sessions import SessionPk, TenantId
from app.storage.models import (
    ApiKeyRow,
    CompileRow,
    IdempotencyKeyRow,
    MessageRow,
    SessionRow,
    TenantRow,
)


async def tenant_by_name(db: AsyncSession, name: str) -> TenantRow | None:
    return await db.scalar(select(TenantRow).where(TenantRow.name == name))


async def key_by_hash(db: AsyncSession, key_hash: str) -> ApiKeyRow | None:
    return await db.scalar(select(ApiKeyRow).where(ApiKeyRow.key_hash == key_hash))


async def list_keys(db: AsyncSession) -> Sequence[tuple[ApiKeyRow, str]]:
    rows = await db.execute(
        select(ApiKeyRow, TenantRow.name)
        .join(TenantRow, TenantRow.id == ApiKeyRow.tenant_id)
        .order_by(ApiKeyRow.created_at)
    )
    return [(key, name) for key, name in rows]


async def session_row(db: AsyncSession, tenant: TenantId, session_id: str) -> SessionRow | None:
    return await db.scalar(
        select(SessionRow).where(SessionRow.tenant_id == tenant, SessionRow.id == session_id)
    )


async def session_rows(
    db: AsyncSession, tenant: TenantId, after_id: str | None, limit: int
) -> Sequence[SessionRow]:
    query = select(SessionRow).where(SessionRow.tenant_id == tenant)
    if after_id is not None:
        query = query.where(SessionRow.id > after_id)
    return (await db.scalars(query.order_by(SessionRow.id).limit(limit))).all()


async def delete_session(db: AsyncSession, tenant: TenantId, session_id: str) -> bool:
    """Delete the session (its rows cascade); False when there was none."""
    result = await db.execute(
        delete(SessionRow).where(SessionRow.tenant_id == tenant, SessionRow.id == session_id)
    )
    return bool(getattr(result, "rowcount", 0))


async def message_stats(
    db: AsyncSession, pks: Sequence[SessionPk]
) -> dict[SessionPk, tuple[int, dict[str, int]]]:
    """Per session: message count and token totals by encoding."""
    rows = await db.execute(
        select(
            MessageRow.session_pk,
            func.count(),
            func.sum(MessageRow.tokens_o200k),
            func.sum(MessageRow.tokens_cl100k),
        )
        .where(MessageRow.session_pk.in_(pks))
        .group_by(MessageRow.session_pk)
    )
    stats = {
        SessionPk(pk): (int(n), {"o200k_base": int(a), "cl100k_base": int(b)})
        for pk, n, a, b in rows
    }
    empty = (0, {"o200k_base": 0, "cl100k_base": 0})
    return {pk: stats.get(pk, empty) for pk in pks}


async def reserve_seqs(db: AsyncSession, pk: SessionPk, count: int) -> int | None:
    """Take the next ``count`` seqs and return the new last one (None: the session is gone).

    The update row-locks the session until commit, so concurrent appends queue and seqs stay
    gap-free (a rolled-back append gives its seqs back).
    """
    last = await db.scalar(
        update(SessionRow)
        .where(SessionRow.pk == pk)
        .values(last_seq=SessionRow.last_seq + count)
        .returning(SessionRow.last_seq)
    )
    return None if last is None else int(last)


async def message_page(
    db: AsyncSession, pk: SessionPk, after_seq: int, limit: int, section: str | None
) -> Sequence[MessageRow]:
    query = select(MessageRow).where(MessageRow.session_pk == pk, MessageRow.seq > after_seq)
    if section is not None:
        query = query.where(MessageRow.section == section)
    return (await db.scalars(query.order_by(MessageRow.seq).limit(limit))).all()


async def forget_idempotency_keys(db: AsyncSession, tenant: TenantId, before: datetime) -> None:
    await db.execute(
        delete(IdempotencyKeyRow).where(
            IdempotencyKeyRow.tenant_id == tenant, IdempotencyKeyRow.created_at < before
        )
    )


async def keys_matching(db: AsyncSession, id_or_prefix: str) -> Sequence[ApiKeyRow]:
    return (
        await db.scalars(
            select(ApiKeyRow).where(
                or_(ApiKeyRow.id == id_or_prefix, ApiKeyRow.prefix == id_or_prefix)
            )
        )
    ).all()


async def advance_cursor(
    db: AsyncSession, pk: SessionPk, seq: int, provider_session_id: str | None
) -> None:
    """Move the cursor up to ``seq``, never back, in one statement (acknowledgements race)."""
    cursor, held = SessionRow.cursor_seq, SessionRow.provider_session_id
    moves = or_(cursor.is_(None), cursor < seq)
    values: dict[str, Any] = {"cursor_seq": case((moves, seq), else_=cursor)}
    if provider_session_id is not None:  # the newest acknowledged compile's session wins
        values["provider_session_id"] = case(
            (or_(moves, held.is_(None)), provider_session_id), else_=held
        )
    await db.execute(update(SessionRow).where(SessionRow.pk == pk).values(**values))


async def compile_row(db: AsyncSession, pk: SessionPk, compile_id: str) -> CompileRow | None:
    return await db.scalar(
        select(CompileRow).where(CompileRow.id == compile_id, CompileRow.session_pk == pk)
    )


async def tenant_name(db: AsyncSession, tenant: TenantId) -> str:
    return (await db.scalar(select(TenantRow.name).where(TenantRow.id == tenant))) or tenant


async def idempotency_row(db: AsyncSession, tenant: TenantId, key: str) -> IdempotencyKeyRow | None:
    return await db.get(IdempotencyKeyRow, (tenant, key))
