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
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

from pydantic import ValidationError
from sqlalchemy.ext.asyncio import AsyncSession

from app.adapters.summarizers import Summarizer, Summary
from app.domain.compaction.planning import (
    PLANS,
    CompactionPolicy,
    Kind,
    Plan,
    plan_session,
    reactive_kind,
)
from app.domain.compilers.base import Item
from app.domain.compilers.spec import located
from app.domain.errors import Conflict, InvalidInput, NotFound
from app.domain.messages import SUMMARY_SECTION, Message, TextPart
from app.domain.models import Catalog
from app.domain.providers import ProviderProfile
from app.domain.sessions import SessionPk, TenantId
from app.domain.summaries.budget import cut_to_budget
from app.domain.tokens import Encoder, TokenCounter, count_message
from app.services import cpu, events
from app.services.messages import NewMessage, message_rows, stored_message
from app.services.sessions import require_session, session_profile
from app.storage import queries
from app.storage.models import CompactionRow, MessageRow, SessionRow

SUMMARY_HEADER = "[Summary of the earlier conversation]\n"


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


@dataclass(frozen=True)
class Where:
    """What a compaction is measured against: the session's encoding and context window, and
    whether its provider keeps a session of its own."""

    encoding: str
    context_window: int
    stateful: bool
    output: str = "openai"

    @classmethod
    def of(
        cls, session: SessionRow, profile: ProviderProfile, context_window: int | None = None
    ) -> Where:
        """For ``session`` compiled for ``profile`` (a request's context window first)."""
        window = context_window or session.context_window or profile.context_window
        return cls(profile.encoding, window, profile.session_resumption, profile.output)

    def pct(self, tokens: int) -> float:
        return round(100 * tokens / self.context_window, 2)


class NotCompacted(Conflict):
    """A compaction that wrote nothing: another took its messages first, or the summary would
    not be smaller than what it replaces."""


async def apply_plan(
    db: AsyncSession,
    counter: TokenCounter,
    session: SessionRow,
    plan: Plan,
    summary: Summary,
    where: Where,
) -> Done:
    """Persist ``plan`` with ``summary`` (the caller commits, also after ``NotCompacted``: then
    nothing was written)."""
    pk = SessionPk(session.pk)
    seqs = [i.seq for i in plan.taken]
    cid = str(uuid.uuid4())
    metadata = {"compaction_id": cid, "summarized_seqs": [seqs[0], seqs[-1]]}
    message = summary_message(summary.text).model_copy(update={"metadata": metadata})
    counts = counter.count_all(message)
    summary_tokens = counts[where.encoding]
    if summary_tokens >= plan.tokens_taken:
        raise NotCompacted(
            f"the summary ({summary_tokens} tokens) would not be smaller than the "
            f"{len(seqs)} messages it replaces ({plan.tokens_taken} tokens)"
        )
    if not await queries.lock_session(db, pk):
        raise NotFound("session", session.id)
    if await queries.present_seqs(db, pk, seqs) != len(seqs):
        raise NotCompacted("another compaction of this session ran first; try again")
    rows = await queries.messages_at(db, pk, seqs)
    archive = [archived(r) for r in rows]
    for stored in rows:
        await db.delete(stored)
    await db.flush()
    db.add_all(message_rows(pk, [NewMessage(seqs[-1], SUMMARY_SECTION, message, counts, now())]))
    resets = where.stateful and await queries.has_provider_session(db, pk)
    if resets:  # the provider session holds what was summarised: a new one starts
        await queries.end_provider_session(db, pk)
    # A prompt cache holds the prompt up to the first change: all after it is written again.
    rewrite = summary_tokens + sum(i.tokens for i in plan.left if i.seq > seqs[0])
    record = CompactionRow(
        id=cid, session_pk=pk, kind=plan.kind, reason=plan.reason, seq_from=seqs[0],
        seq_to=seqs[-1], summary_seq=seqs[-1], archived=archive,
        tokens_before=plan.tokens_before,
        tokens_after=plan.tokens_before - plan.tokens_taken + summary_tokens,
        summary_tokens=summary_tokens, cache_rewrite_tokens=rewrite,
        resets_provider_session=resets, summarizer=_written_by(summary), created_at=now(),
    )  # fmt: skip
    db.add(record)
    before = len(plan.taken) + len(plan.left)
    return Done(record, before, len(plan.left) + 1)


def summary_message(text: str) -> Message:
    """The summary as the message a compaction stores (without its metadata)."""
    return Message(role="user", content=(TextPart(text=SUMMARY_HEADER + text),))


async def within_budget(summarizer: Summarizer, plan: Plan, encoder: Encoder) -> Summary:
    """The summary of ``plan`` as a message of at most ``plan.summary_tokens`` tokens: the
    summariser is asked for that less the header's tokens, and whatever it wrote is cut to fit."""
    header = count_message(summary_message(""), encoder)
    asked = max(1, plan.summary_tokens - header)
    summary = await summarizer.summarize([i.message for i in plan.taken], plan.reason, asked)

    def count(text: str) -> int:
        return count_message(summary_message(text), encoder)

    cut = await cpu.run_sync(cut_to_budget, summary.text, plan.summary_tokens, count)
    return summary if cut is None else replace(summary, text=cut, cut=True)


def now() -> datetime:
    """The clock at the moment of writing: compactions of one request stay in order."""
    return datetime.now(UTC)


def _written_by(summary: Summary) -> str:
    """The backend that wrote the summary, why it fell back when it did, and whether it was cut
    to its budget."""
    cut = " (cut to its budget)" if summary.cut else ""
    if summary.fallback_reason is None:
        return summary.backend + cut
    return f"{summary.backend}{cut} (fallback: {summary.fallback_reason})"[:128]


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


@dataclass(frozen=True)
class Report:
    """How the caller's last model call went: the prompt tokens it used, or prompt-too-long."""

    prompt_tokens: int | None = None
    too_long: bool = False

    @classmethod
    def of(cls, usage: dict[str, Any] | None, error_kind: str | None, cache_apart: bool) -> Report:
        """From reported usage. ``cache_apart``: the provider counts cached prompt tokens apart
        from its input tokens (Anthropic), so the prompt is their sum."""
        usage = usage or {}
        prompt = usage.get("prompt_tokens")
        if prompt is not None and cache_apart:
            prompt += (usage.get("cache_read_tokens") or 0) + (usage.get("cache_write_tokens") or 0)
        return cls(prompt, error_kind == "prompt_too_long")


def stored_items(rows: Sequence[MessageRow], encoding: str) -> list[Item]:
    """Stored rows as compiler items, counted in ``encoding``."""
    return [
        Item(r.seq, r.section, stored_message(r, encoding).message, r.tokens(encoding))
        for r in rows
    ]


async def _reported(
    db: AsyncSession, pk: SessionPk, given: Report | None, where: Where
) -> Report | None:
    """The report that drives reactive compaction: the request's own, else the last one made
    with a cursor acknowledgement, acted on once: by the first compile after it."""
    if given is not None:
        return given
    found = await queries.last_reported(db, pk)
    if found is None or found.reported_at is None:
        return None
    if await queries.compiled_since(db, pk, found.reported_at):
        return None
    return Report.of(found.usage, found.error_kind, where.output == "anthropic")


class Compactor:
    """Runs compactions of one session, each in its own transaction, and tells subscribers:
    ``context_compaction_start`` (committed before the summariser runs) and
    ``context_compaction_end`` for request-boundary compaction, ``compaction`` for the others."""

    def __init__(
        self,
        db: AsyncSession,
        counter: TokenCounter,
        summarizer: Summarizer,
        now: datetime,
        catalog: Catalog,
    ) -> None:
        self.db, self.counter, self.summarizer, self.now = db, counter, summarizer, now
        self.catalog = catalog

    async def run(self, session: SessionRow, plan: Plan, where: Where) -> Done:
        """Summarise and persist ``plan``, announced; commits. ``NotCompacted`` when it wrote
        nothing."""
        pk = SessionPk(session.pk)
        before: dict[str, Any] = {
            "kind": plan.kind, "reason": plan.reason, "tokens_before": plan.tokens_before,
            "messages_before": len(plan.taken) + len(plan.left),
        }  # fmt: skip
        boundary = plan.kind == "session"
        if boundary:
            data = {**before, "budget_used_pct": where.pct(plan.tokens_before)}
            await events.emit(self.db, pk, events.COMPACTION_START, data, self.now)
        await self.db.commit()  # no transaction (nor connection) is held while it summarises
        summary = await within_budget(self.summarizer, plan, self.counter.encoder(where.encoding))
        try:
            done = await apply_plan(self.db, self.counter, session, plan, summary, where)
        except NotCompacted as err:
            await self.db.commit()  # only the lock was taken
            if boundary:
                data = {**before, "compaction_id": None, "skipped": str(err)}
                await events.emit(self.db, pk, events.COMPACTION_END, data, self.now)
                await self.db.commit()
            raise
        kind = events.COMPACTION_END if boundary else events.COMPACTION
        await events.emit(self.db, pk, kind, {**before, **_outcome(done, where)}, self.now)
        await self.db.commit()
        return done

    async def due(
        self, session: SessionRow, policy: CompactionPolicy, where: Where, report: Report | None
    ) -> list[Done]:
        """Request-boundary compaction when the history is over the trigger, then the reactive
        ones the report calls for (at most ``max_reactive_compactions_per_request``). The history
        is read only when one may be due."""
        pk = SessionPk(session.pk)
        done: list[Done] = []
        count, tokens = (await queries.message_stats(self.db, [pk]))[pk]
        if tokens[where.encoding] > policy.trigger_tokens and count >= policy.min_messages:
            plan = plan_session(await self._items(pk, where), policy)
            if plan is not None:
                done += await self._attempt(session, plan, where)
        report = await _reported(self.db, pk, report, where)
        prompt, too_long = (report.prompt_tokens, report.too_long) if report else (None, False)
        for _ in range(policy.max_reactive_compactions_per_request):
            kind = reactive_kind(prompt, where.context_window, too_long, policy)
            plan = PLANS[kind](await self._items(pk, where), policy) if kind else None
            found = await self._attempt(session, plan, where) if plan else []
            if not found:
                break
            done += found
            removed = found[0].row.tokens_before - found[0].row.tokens_after
            prompt, too_long = max(0, (prompt or 0) - removed), False
        return done

    async def _items(self, pk: SessionPk, where: Where) -> list[Item]:
        rows = await queries.all_messages(self.db, pk)
        return await cpu.run_sync(stored_items, rows, where.encoding)

    async def _attempt(self, session: SessionRow, plan: Plan, where: Where) -> list[Done]:
        """``run``, where a compaction that wrote nothing is no error (the compile goes on)."""
        try:
            return [await self.run(session, plan, where)]
        except NotCompacted:
            return []


def _outcome(done: Done, where: Where) -> dict[str, Any]:
    """The figures of a compaction for its event."""
    row = done.row
    return {
        "compaction_id": row.id, "tokens_after": row.tokens_after,
        "summary_tokens": row.summary_tokens, "messages_after": done.messages_after,
        "budget_used_pct": where.pct(row.tokens_after),
        "resets_provider_session": row.resets_provider_session,
    }  # fmt: skip


async def compact_now(
    compactor: Compactor,
    tenant: TenantId,
    session_id: str,
    kind: Kind,
    override: dict[str, Any] | None,
) -> Done:
    """Run a compaction of ``kind`` now, whatever the triggers say (the session's policy, with
    ``override`` over it, still chooses what is kept)."""
    db = compactor.db
    session = await require_session(db, tenant, session_id)
    profile = session_profile(session, compactor.catalog)
    policy = policy_of(session.compaction_policy, override, "policy") or CompactionPolicy()
    rows = await queries.all_messages(db, SessionPk(session.pk))
    items = stored_items(rows, profile.encoding)
    plan = (
        plan_session(items, policy, now=True) if kind == "session" else PLANS[kind](items, policy)
    )
    if plan is None:
        raise Conflict("nothing to compact: no API round may be summarised (recent, pinned, "
                       "the current prompt, or too few messages)")  # fmt: skip
    where = Where.of(session, profile)
    return await compactor.run(session, plan, where)


async def compact_due(
    compactor: Compactor,
    session: SessionRow,
    profile: ProviderProfile,
    context_window: int | None,
    override: dict[str, Any] | None,
    report: Report | None,
) -> list[Done]:
    """The compactions a compile of ``session`` is due (none without an enabled policy)."""
    policy = policy_of(session.compaction_policy, override)
    if policy is None or not policy.enabled:
        return []
    where = Where.of(session, profile, context_window)
    return await compactor.due(session, policy, where, report)
