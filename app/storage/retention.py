"""What the retention sweep deletes: expired idempotency keys and old compile records, a small
batch a statement, found through an index by age.

A compile record older than the retention is kept while it is its session's newest compile or
its last reported one: reactive compaction reads the last report and whether a compile followed
it (app/services/compaction/reports.py). Nothing else reads old compiles: the cursor is on the
session row, and what calibration learnt is in its rings. Each delete repeats the conditions,
so a compile reported or followed since it was found is judged as it is then.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import and_, delete, func, or_, select, tuple_
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import aliased

from app.storage.models import CompileRow, IdempotencyKeyRow

_K = IdempotencyKeyRow
_C = CompileRow
_OTHER = aliased(CompileRow)


async def delete_expired_keys(db: AsyncSession, before: datetime, limit: int) -> int:
    """Delete up to ``limit`` idempotency keys (of any tenant) stored before ``before``, oldest
    first; how many."""
    query = select(_K.tenant_id, _K.key).where(_K.created_at < before)
    found = [tuple(row) for row in await db.execute(query.order_by(_K.created_at).limit(limit))]
    if not found:
        return 0
    gone = delete(_K).where(tuple_(_K.tenant_id, _K.key).in_(found), _K.created_at < before)
    done = await db.execute(gone.execution_options(synchronize_session=False))
    return int(getattr(done, "rowcount", 0))


def _prunable(before: datetime) -> Any:
    """A compile stored before ``before``, not its session's newest nor its last reported."""
    same = _OTHER.session_pk == _C.session_pk
    newest = select(func.max(_OTHER.created_at)).where(same).scalar_subquery()
    reported = select(func.max(_OTHER.reported_at)).where(same).scalar_subquery()
    return and_(
        _C.created_at < before,
        _C.created_at < newest,
        or_(_C.reported_at.is_(None), _C.reported_at < reported),
    )


async def delete_old_compiles(
    db: AsyncSession, before: datetime, after: tuple[datetime, str] | None, limit: int
) -> tuple[int, tuple[datetime, str] | None]:
    """Delete up to ``limit`` prunable compiles past ``after`` (created_at, id), in age order:
    how many, and where the next batch starts (None: none left). The ones kept are passed
    once a sweep, not read again by every batch."""
    query = select(_C.created_at, _C.id).where(_prunable(before))
    if after is not None:
        at, cid = after
        query = query.where(or_(_C.created_at > at, and_(_C.created_at == at, _C.id > cid)))
    found: Sequence[Any] = (
        await db.execute(query.order_by(_C.created_at, _C.id).limit(limit))
    ).all()
    if not found:
        return 0, None
    ids = [cid for _, cid in found]
    gone = delete(_C).where(_C.id.in_(ids), _prunable(before))
    done = await db.execute(gone.execution_options(synchronize_session=False))
    last = found[-1]
    return int(getattr(done, "rowcount", 0)), (last[0], last[1])
