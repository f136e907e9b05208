"""Summarisation compaction (seeds/003): plan, summarise, archive and persist.

One compaction is one transaction: the summarised messages leave the live history for the
compaction's archive (exactly as they were stored), and one summary message in the ``summary``
section takes the seq of the last of them, so the history keeps its order. The session row is
locked before anything is written and the plan is checked against what is stored then: of two
replicas compacting the same session at once, one compacts and the other finds its messages gone
and writes nothing. The summariser runs before that lock (it may be a slow remote call).
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from pydantic import ValidationError
from sqlalchemy.ext.asyncio import AsyncSession

from app.domain.compaction.planning import CompactionPolicy, Plan, Reason
from app.domain.compilers.spec import located
from app.domain.errors import InvalidInput, NotFound
from app.domain.messages import SUMMARY_SECTION, Message, TextPart
from app.domain.sessions import SessionPk, TenantId
from app.domain.tokens import TokenCounter
from app.services.messages import NewMessage, message_rows
from app.services.sessions import require_session
from app.storage import queries
from app.storage.models import CompactionRow, MessageRow, SessionRow

SUMMARY_HEADER = "[Summary of the earlier conversation]\n"


@dataclass(frozen=True)
class Summary:
    text: str
    summarizer: str  # which summariser wrote it (and, after a fallback, why)


Summarize = Callable[[Sequence[Message], Reason], Awaitable[Summary]]


@dataclass(frozen=True)
class Done:
    """One compaction as recorded, with the live message counts around it."""

    row: CompactionRow
    messages_before: int
    messages_after: int


def policy_of(
    stored: dict[str, Any] | None, override: dict[str, Any] | None, field: str = "compaction"
) -> CompactionPolicy | None:
    """The session's policy with a request's fields over it; None when neither sets one."""
    if stored is None and override is None:
        return None
    try:
        return CompactionPolicy.model_validate({**(stored or {}), **(override or {})})
    except ValidationError as err:
        raise InvalidInput(located(err, (field,))) from None


def archived(row: MessageRow) -> dict[str, Any]:
    """A stored message exactly as it was stored, for the archive."""
    return {
        "seq": row.seq, "section": row.section, "role": row.role, "name": row.name,
        "content": row.content, "metadata": row.meta,
        "tokens": {"o200k_base": row.tokens_o200k, "cl100k_base": row.tokens_cl100k},
        "created_at": row.created_at.isoformat(),
    }  # fmt: skip


async def apply_plan(
    db: AsyncSession,
    counter: TokenCounter,
    session: SessionRow,
    plan: Plan,
    summary: Summary,
    encoding: str,
    stateful: bool,
    now: datetime,
) -> Done | None:
    """Persist ``plan`` with ``summary`` (the caller commits); None when another compaction took
    its messages first (nothing written)."""
    pk = SessionPk(session.pk)
    seqs = [i.seq for i in plan.taken]
    if not await queries.lock_session(db, pk, now):
        return None
    if await queries.present_seqs(db, pk, seqs) != len(seqs):
        await db.rollback()
        return None
    rows = await queries.messages_at(db, pk, seqs)
    archive = [archived(r) for r in rows]
    for stored in rows:
        await db.delete(stored)
    await db.flush()
    cid = str(uuid.uuid4())
    message = Message(
        role="user", content=(TextPart(text=SUMMARY_HEADER + summary.text),),
        metadata={"compaction_id": cid, "summarized_seqs": [seqs[0], seqs[-1]]},
    )  # fmt: skip
    counts = counter.count_all(message)
    db.add_all(message_rows(pk, [NewMessage(seqs[-1], SUMMARY_SECTION, message, counts, now)]))
    summary_tokens = counts[encoding]
    resets = stateful and (
        session.cursor_seq is not None or session.provider_session_id is not None
    )
    if resets:  # the provider session holds what was summarised: a new one starts
        session.cursor_seq = None
        session.provider_session_id = None
    # A prompt cache holds the prompt up to the first change: all after it is written again.
    rewrite = summary_tokens + sum(i.tokens for i in plan.left if i.seq > seqs[0])
    record = CompactionRow(
        id=cid, session_pk=pk, kind=plan.kind, reason=plan.reason, seq_from=seqs[0],
        seq_to=seqs[-1], summary_seq=seqs[-1], archived=archive,
        tokens_before=plan.tokens_before,
        tokens_after=plan.tokens_before - plan.tokens_taken + summary_tokens,
        summary_tokens=summary_tokens, cache_rewrite_tokens=rewrite,
        resets_provider_session=resets, summarizer=summary.summarizer, created_at=now,
    )  # fmt: skip
    db.add(record)
    before = len(plan.taken) + len(plan.left)
    return Done(record, before, len(plan.left) + 1)


async def compactions(db: AsyncSession, tenant: TenantId, session_id: str) -> list[CompactionRow]:
    """The session's compactions, oldest first."""
    row = await require_session(db, tenant, session_id)
    return list(await queries.compaction_rows(db, SessionPk(row.pk)))


async def compaction(
    db: AsyncSession, tenant: TenantId, session_id: str, cid: str
) -> CompactionRow:
    """One compaction with its archive."""
    row = await require_session(db, tenant, session_id)
    found = await queries.compaction_row(db, SessionPk(row.pk), cid)
    if found is None:
        raise NotFound("compaction", cid)
    return found
