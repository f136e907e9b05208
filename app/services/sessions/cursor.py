"""The cursor of a session-stateful provider (seeds/004): what its provider session holds.

A compile is acknowledged after the caller's model call succeeded; only then does the cursor move
to the last seq that compile sent, and never backwards (one conditional UPDATE, so racing
acknowledgements end at the highest). A reported failure is stored and moves nothing. A
successful call's reported prompt count calibrates later estimates
(app/services/sessions/calibration.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm.exc import StaleDataError

from app.domain.errors import InvalidInput, NotFound
from app.domain.sessions import SessionPk, TenantId
from app.services.sessions import require_session
from app.services.sessions.calibration import learn
from app.storage import queries
from app.storage.models import CompileRow, SessionRow


@dataclass(frozen=True)
class Cursor:
    cursor_seq: int | None
    provider_session_id: str | None
    advanced: bool  # whether this acknowledgement moved the cursor


@dataclass(frozen=True)
class Acknowledgement:
    """How the model call of a compile went: its id, the provider's session id, the usage it
    reported, the failure (``error_kind``), and ``through_seq``: the provider session also
    holds the stored messages up to this seq (its own reply, appended after the compile)."""

    compile_id: str
    provider_session_id: str | None = None
    usage: dict[str, Any] | None = None
    error_kind: str | None = None
    through_seq: int | None = None


async def acknowledge(
    db: AsyncSession, tenant: TenantId, session_id: str, report: Acknowledgement, now: datetime
) -> Cursor:
    """Record how the model call of the reported compile went; on success, advance the cursor
    (so the next delta starts after ``through_seq`` too)."""
    row = await require_session(db, tenant, session_id)
    if report.through_seq is not None and report.through_seq > row.last_seq:
        problem = f"seq {report.through_seq} is beyond the stored history (seq {row.last_seq})"
        raise InvalidInput([(("through_seq",), problem)])
    pk = SessionPk(row.pk)
    # The session first, then its compile row: the order a delete takes them in (no deadlock).
    if not await queries.lock_session(db, pk):
        raise NotFound("session", session_id)
    compiled = await queries.compile_row(db, pk, report.compile_id)
    if compiled is None:
        raise NotFound("compile", report.compile_id)
    before = row.cursor_seq
    await _reported(db, tenant, compiled, report, now)
    if report.error_kind is None and not await _stale(db, row, compiled):
        compiled.acknowledged_at = compiled.acknowledged_at or now
        seq = max(compiled.seq_to or 0, report.through_seq or 0)
        if seq:
            await queries.advance_cursor(db, pk, seq, report.provider_session_id)
    await db.refresh(row)  # while the lock holds: after commit, a delete may have taken it
    await db.commit()
    return _cursor(row, advanced=row.cursor_seq != before)


async def _reported(
    db: AsyncSession, tenant: TenantId, compiled: CompileRow, report: Acknowledgement, now: datetime
) -> None:
    """The report kept on its compile (a repeated one is not a new one); a successful call's
    count corrects the estimates."""
    compiled.reported_at = compiled.reported_at or now
    if report.error_kind is None:
        await learn(db, tenant, SessionPk(compiled.session_pk), compiled, report.usage, now)
    if report.usage is not None:
        compiled.usage = report.usage
    if report.error_kind is not None:
        compiled.error_kind = report.error_kind


async def _stale(db: AsyncSession, row: SessionRow, compiled: CompileRow) -> bool:
    """Whether the compile was made for a provider session that has ended since: a delta for one
    reset (or of another resume key), or any compile before a compaction ended it. What it sent
    is not in the provider session the next full compile starts."""
    reset = await queries.last_reset_at(db, SessionPk(row.pk))
    return (compiled.mode == "delta" and row.cursor_seq is None) or (
        reset is not None and compiled.created_at < reset
    )


async def reset(db: AsyncSession, tenant: TenantId, session_id: str) -> Cursor:
    """Forget what the provider session holds: the next compile is full (a new provider
    session)."""
    row = await require_session(db, tenant, session_id)
    row.cursor_seq = None
    row.provider_session_id = None
    try:
        await db.commit()
    except StaleDataError:  # deleted by a concurrent request since it was read
        await db.rollback()
        raise NotFound("session", session_id) from None
    return _cursor(row, advanced=False)


def _cursor(row: SessionRow, advanced: bool) -> Cursor:
    return Cursor(row.cursor_seq, row.provider_session_id, advanced)
