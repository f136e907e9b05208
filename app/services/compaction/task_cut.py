"""The opening task cut in the stored history after a ``prompt_too_long`` report, when it is the
bulk of the history (``app.domain.compaction.tasks``): one compaction (kind ``full``, reason
``reactive_full``) whose archive holds the message as it was stored, its cut texts kept by
sha256 (``GET /v1/sessions/{id}/payloads/{sha256}``, or the recall tool), in one transaction."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any
from urllib.parse import quote

from sqlalchemy.ext.asyncio import AsyncSession

from app.domain.compaction.planning import CompactionPolicy
from app.domain.compaction.tasks import Cut, Pointer, bulky_task, cut_task
from app.domain.compilers.base import Item, StepReport, Touched
from app.domain.messages import Message, TextPart
from app.domain.recall import DEFAULT_NAME, pointer_text
from app.domain.sessions import SessionPk
from app.domain.tokens import TokenCounter, count_message
from app.services.compaction import (
    Done,
    Where,
    archived,
    in_place_event,
    stored_counts,
    stored_items,
)
from app.services.sessions import events
from app.services.sessions.originals import keep_originals
from app.services.tenancy import cpu
from app.storage import queries
from app.storage.models import CompactionRow, MessageRow, SessionRow


def _pointer(session_id: str) -> Pointer:
    """The line of a cut text: where its original is."""

    def pointer(sha256: str, left: int) -> str:
        where = f"GET /v1/sessions/{quote(session_id, safe='')}/payloads/{sha256}"
        recall = pointer_text(DEFAULT_NAME, None, sha256=sha256)
        return f"ctxc: {left:,} characters cut here; the whole text: {where} (or {recall})"

    return pointer


async def cut_bulky_task(
    db: AsyncSession,
    counter: TokenCounter,
    session: SessionRow,
    policy: CompactionPolicy,
    where: Where,
    now: datetime,
) -> Done | None:
    """Cut the opening task to at most the summary's budget when it is the bulk of the stored
    history (None: it is not, or nothing was cut); commits what it wrote."""
    pk = SessionPk(session.pk)
    if not await queries.lock_session(db, pk):
        return None
    rows = {r.seq: r for r in await queries.all_messages(db, pk)}
    items = await cpu.run_sync(stored_items, list(rows.values()), where.encoding)
    cut = await _cut(counter, session.id, items, policy, where.encoding)
    if cut is None:
        await db.commit()  # only the lock was taken
        return None
    row = rows[cut.seq]
    before, archive = sum(i.tokens for i in items), [archived(row)]
    saved = await _stored(db, counter, row, cut, where.encoding, now)
    record = _record(pk, cut.seq, archive, before, before - saved, now)
    if where.stateful and await queries.has_provider_session(db, pk):
        record.resets_provider_session = True
        await queries.end_provider_session(db, pk)
    db.add(record)
    data = in_place_event(record, len(items), where.pct(record.tokens_after))
    await events.emit(db, pk, events.COMPACTION, data, now)
    await db.commit()
    return Done(record, len(items), len(items))


async def _cut(
    counter: TokenCounter,
    session_id: str,
    items: list[Item],
    policy: CompactionPolicy,
    encoding: str,
) -> Cut | None:
    """The opening task cut to the summary's budget, when it is the bulk of ``items``."""
    task = bulky_task(items, policy)
    if task is None:
        return None
    encoder = counter.encoder(encoding)

    def count(text: str) -> int:
        return count_message(Message(role="user", content=(TextPart(text=text),)), encoder)

    pointer = _pointer(session_id)
    cut: Cut | None = await cpu.run_sync(cut_task, task, policy.summary_tokens, count, pointer)
    return cut


async def _stored(
    db: AsyncSession,
    counter: TokenCounter,
    row: MessageRow,
    cut: Cut,
    encoding: str,
    now: datetime,
) -> int:
    """The task's row rewritten as ``cut`` (a new history version), the session's totals moved
    and the cut texts kept by sha256; the tokens saved in ``encoding``."""
    pk = SessionPk(row.session_pk)
    old, counts = stored_counts(row), counter.count_all(cut.message)
    await queries.rewrite_history(db, pk)
    row.content = cut.message.to_json().get("content", [])
    row.tokens_o200k, row.tokens_cl100k = counts["o200k_base"], counts["cl100k_base"]
    await queries.move_totals(db, pk, [counts], [old])
    saved = old[encoding] - counts[encoding]
    steps = [StepReport("task_cut", (Touched(cut.seq, saved, cut.omitted),))]
    await keep_originals(db, pk, steps, now)
    return saved


def _record(
    pk: SessionPk, seq: int, archive: list[dict[str, Any]], before: int, after: int, at: datetime
) -> CompactionRow:
    return CompactionRow(
        id=str(uuid.uuid4()),
        session_pk=pk,
        kind="full",
        reason="reactive_full",
        seq_from=seq,
        seq_to=seq,
        summary_seq=None,
        archived=archive,
        tokens_before=before,
        tokens_after=after,
        summary_tokens=0,
        cache_rewrite_tokens=after,
        resets_provider_session=False,
        summarizer=None,
        summarizer_reason="not_summarized",
        created_at=at,
    )
