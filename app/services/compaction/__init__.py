"""Summarisation compaction (seeds/003): plan, summarise, archive and persist.

One compaction is one transaction: the summarised messages leave the live history for the
compaction's archive (exactly as they were stored), and one summary message in the ``summary``
section takes the seq of the last of them, so the history keeps its order. Before the summariser
is called (a slow remote call, run with no transaction held), the session's compaction lease is
taken (app/services/compaction/leases.py): of concurrent compactions of one session, on any
replica, one summarises and the others call nothing. The session row is locked again before
anything is written and the plan is checked against what is stored then.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

from pydantic import ValidationError
from sqlalchemy.ext.asyncio import AsyncSession

from app.adapters.summarizers import Summary
from app.domain.compaction.economics import (
    ROUNDS_KEY,
    Economics,
    Prices,
    expected_turns,
    prices_of,
    rounds_of,
    sheds_enough,
    weigh,
)
from app.domain.compaction.planning import (
    CompactionPolicy,
    Plan,
)
from app.domain.compilers.base import Item
from app.domain.compilers.spec import located
from app.domain.errors import InvalidInput, NotFound
from app.domain.messages import SUMMARY_SECTION, Message
from app.domain.providers import ProviderProfile
from app.domain.sessions import SessionPk, TenantId
from app.domain.tokens import TokenCounter
from app.services.compaction import leases
from app.services.compaction.refusals import LeaseLost, NotCompacted, Refused
from app.services.compaction.summarising import CARRIED_KEY, summary_message, written_by
from app.services.sessions import require_session
from app.services.sessions.messages import NewMessage, message_rows, stored_message
from app.storage import queries
from app.storage.models import CompactionRow, MessageRow, SessionRow


@dataclass(frozen=True)
class Done:
    """One compaction as recorded, with the live message counts around it."""

    row: CompactionRow
    messages_before: int
    messages_after: int
    summary: Summary | None = None


def policy_of(
    stored: dict[str, Any] | None,
    override: dict[str, Any] | None,
    field: str = "compaction",
    profiles: frozenset[str] | None = None,
) -> CompactionPolicy | None:
    """The session's policy with a request's fields over it; None when neither sets one. With
    ``profiles``, a summariser profile the request names must be one of them (a stored policy
    naming a profile removed since falls back to the default one, see ``Summarizers``)."""
    if stored is None and override is None:
        return None
    try:
        policy = CompactionPolicy.model_validate({**(stored or {}), **(override or {})})
    except ValidationError as err:
        raise InvalidInput(located(err, (field,))) from None
    if profiles is not None and override is not None and "summarizer" in override:
        check_profiles(policy, profiles, field)
    return policy


def check_profiles(policy: CompactionPolicy, profiles: frozenset[str], field: str) -> None:
    """InvalidInput naming each summariser profile of ``policy`` the deployment does not have."""
    choice = policy.summarizer
    unknown = [
        (
            (field, "summarizer", name),
            f"no summariser profile {value!r} (known: {', '.join(sorted(profiles))})",
        )
        for name, value in (choice.names() if choice is not None else [])
        if value not in profiles
    ]
    if unknown:
        raise InvalidInput(unknown)


def archived(row: MessageRow) -> dict[str, Any]:
    """A stored message exactly as it was stored, for the archive."""
    return {
        "seq": row.seq,
        "section": row.section,
        "role": row.role,
        "name": row.name,
        "content": row.content,
        "metadata": row.meta,
        "tokens": stored_counts(row),
        "created_at": row.created_at.isoformat(),
    }


@dataclass(frozen=True)
class Where:
    """What a compaction is measured against: the session's encoding and context window, and
    whether its provider keeps a session of its own."""

    encoding: str
    context_window: int
    stateful: bool
    output: str = "openai"
    prices: Prices | None = None  # the provider's prompt-cache prices (None: no cache)

    @classmethod
    def of(
        cls, session: SessionRow, profile: ProviderProfile, context_window: int | None = None
    ) -> Where:
        """For ``session`` compiled for ``profile`` (a request's context window first)."""
        window = context_window or session.context_window or profile.context_window
        return cls(
            profile.encoding,
            window,
            profile.session_resumption,
            profile.output,
            prices_of(profile),
        )

    def pct(self, tokens: int) -> float:
        return round(100 * tokens / self.context_window, 2)


@dataclass(frozen=True)
class Gate:
    """What a request-boundary compaction must pay for (app/domain/compaction/economics.py):
    the minimum shed, and the cache it rewrites over the ``turns`` expected at ``prices``
    (None: no cache, or the policy's gate is off). ``forced``: the history does not fit the
    context window, so the cache is no reason to wait."""

    min_shed_pct: float
    turns: int
    prices: Prices | None
    forced: bool = False

    @classmethod
    def of(
        cls, policy: CompactionPolicy, where: Where, items: Sequence[Item], forced: bool = False
    ) -> Gate:
        prices = where.prices if policy.economic_gate else None
        turns = expected_turns(items, policy.expected_turns)
        return cls(policy.min_shed_pct, turns, prices, forced)

    def ahead(self, plan: Plan) -> None:
        """``Refused`` before any summariser is called when even a summary of no tokens would
        shed too little."""
        if not sheds_enough(plan.tokens_taken, plan.tokens_before, self.min_shed_pct):
            self.judge(plan, 0, rewrite_tokens(plan, 0))

    def judge(self, plan: Plan, summary_tokens: int, rewrite: int) -> Economics:
        """The figures of applying ``plan`` with a summary of ``summary_tokens``; ``Refused``
        when it may not be applied."""
        shed = plan.tokens_taken - summary_tokens
        economics = weigh(shed, rewrite, self.turns, self.prices, self.forced)
        if not sheds_enough(shed, plan.tokens_before, self.min_shed_pct):
            raise Refused(
                f"it would shed {shed} of the history's {plan.tokens_before} tokens, less than "
                f"min_shed_pct ({self.min_shed_pct}%)",
                replace(economics, applied=False),
                True,
            )
        if not economics.applied:
            raise Refused(
                f"the prompt cache it rewrites ({economics.cost} input-token units) outweighs "
                f"what it sheds over {self.turns} turns ({economics.saved})",
                economics,
            )
        return economics


@dataclass(frozen=True)
class Change:
    """A compaction to write: the plan, its summary, and what the write is subject to: the
    ``lease`` still held, the ``gate`` letting it through; ``prepared_at``: when the summary
    was made in the background."""

    plan: Plan
    summary: Summary
    lease: leases.Lease | None = None
    gate: Gate | None = None
    prepared_at: datetime | None = None


async def apply_plan(
    db: AsyncSession, counter: TokenCounter, session: SessionRow, change: Change, where: Where
) -> Done:
    """Persist ``change`` (the caller commits, also after ``NotCompacted``: then nothing was
    written), if its lease is still held and its gate lets it through."""
    pk, plan = SessionPk(session.pk), change.plan
    seqs = [i.seq for i in plan.taken]
    cid = str(uuid.uuid4())
    message = _summary_message(cid, plan, change.summary)
    counts = counter.count_all(message)
    summary_tokens = counts[where.encoding]
    if summary_tokens >= plan.tokens_taken:
        raise NotCompacted(
            f"the summary ({summary_tokens} tokens) would not be smaller than the "
            f"{len(seqs)} messages it replaces ({plan.tokens_taken} tokens)"
        )
    rewrite = rewrite_tokens(plan, summary_tokens)
    gate = change.gate
    economics = None if gate is None else gate.judge(plan, summary_tokens, rewrite).as_dict()
    await _hold(db, session, change)
    rows = await queries.messages_at(db, pk, seqs)
    archive = [archived(r) for r in rows]
    await queries.delete_messages(db, pk, rows)
    await queries.rewrite_history(db, pk)
    await queries.move_totals(db, pk, [counts], [stored_counts(r) for r in rows])
    db.add_all(message_rows(pk, [NewMessage(seqs[-1], SUMMARY_SECTION, message, counts, now())]))
    resets = where.stateful and await queries.has_provider_session(db, pk)
    if resets:  # the provider session holds what was summarised: a new one starts
        await queries.end_provider_session(db, pk)
    record = _record(cid, pk, change, summary_tokens, rewrite, archive)
    record.resets_provider_session, record.economics = resets, economics
    db.add(record)
    return Done(record, len(plan.taken) + len(plan.left), len(plan.left) + 1, change.summary)


def _summary_message(cid: str, plan: Plan, summary: Summary) -> Message:
    """The summary's message, its metadata saying what it replaced."""
    seqs = [i.seq for i in plan.taken]
    metadata: dict[str, Any] = {
        "compaction_id": cid,
        "summarized_seqs": [seqs[0], seqs[-1]],
        ROUNDS_KEY: rounds_of(plan.taken),
    }
    if summary.constraints:
        metadata[CARRIED_KEY] = list(summary.constraints)
    return summary_message(summary.text).model_copy(update={"metadata": metadata})


async def _hold(db: AsyncSession, session: SessionRow, change: Change) -> None:
    """The session locked, while the change's lease is held and its messages all there."""
    pk = SessionPk(session.pk)
    if not await queries.lock_session(db, pk):
        raise NotFound("session", session.id)
    if change.lease is not None and not await leases.holds(db, change.lease):
        raise LeaseLost("the compaction lease expired while the summariser ran")
    seqs = [i.seq for i in change.plan.taken]
    if await queries.present_seqs(db, pk, seqs) != len(seqs):
        raise NotCompacted("another compaction of this session ran first; try again")


def _record(
    cid: str,
    pk: SessionPk,
    change: Change,
    summary_tokens: int,
    rewrite: int,
    archive: list[dict[str, Any]],
) -> CompactionRow:
    """The compaction's record (whether it ended the provider session and its economics are
    the caller's to say)."""
    plan, summary = change.plan, change.summary
    seqs = [i.seq for i in plan.taken]
    return CompactionRow(
        id=cid,
        session_pk=pk,
        kind=plan.kind,
        reason=plan.reason,
        seq_from=seqs[0],
        seq_to=seqs[-1],
        summary_seq=seqs[-1],
        archived=archive,
        tokens_before=plan.tokens_before,
        tokens_after=plan.tokens_before - plan.tokens_taken + summary_tokens,
        summary_tokens=summary_tokens,
        cache_rewrite_tokens=rewrite,
        resets_provider_session=False,
        summarizer=written_by(summary),
        summarizer_reason=summary.summarizer_reason,
        created_at=now(),
        loss=summary.loss.as_json() if summary.loss is not None else None,
        prepared_at=change.prepared_at,
        economics=None,
    )


def in_place_event(record: CompactionRow, messages: int, pct: float) -> dict[str, Any]:
    """What the ``compaction`` event says of a compaction that rewrote stored messages in place
    (as many after as before; ``pct``: the budget the history uses after)."""
    return {
        "kind": record.kind,
        "reason": record.reason,
        "compaction_id": record.id,
        "tokens_before": record.tokens_before,
        "tokens_after": record.tokens_after,
        "messages_before": messages,
        "messages_after": messages,
        "budget_used_pct": pct,
        "resets_provider_session": record.resets_provider_session,
        "summarizer": record.summarizer,
        "summarizer_reason": record.summarizer_reason,
    }


def rewrite_tokens(plan: Plan, summary_tokens: int) -> int:
    """What a prompt cache writes again after ``plan``: it holds the prompt up to the first
    change, so the summary and all kept after it."""
    first = plan.taken[0].seq
    return summary_tokens + sum(i.tokens for i in plan.left if i.seq > first)


def stored_counts(row: MessageRow) -> dict[str, int]:
    """A stored message's token counts by encoding."""
    return {"o200k_base": row.tokens_o200k, "cl100k_base": row.tokens_cl100k}


def now() -> datetime:
    """The clock at the moment of writing: compactions of one request stay in order."""
    return datetime.now(UTC)


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


def stored_items(rows: Sequence[MessageRow], encoding: str) -> list[Item]:
    """Stored rows as compiler items, counted in ``encoding``."""
    return [
        Item(r.seq, r.section, stored_message(r, encoding).message, r.tokens(encoding))
        for r in rows
    ]
