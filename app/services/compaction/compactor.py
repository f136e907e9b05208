"""Running compactions: under the session's compaction lease, announced as events, the ones a
compile is due or a caller asks for (app/services/compaction/ plans and persists them)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

import anyio
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession

from app.adapters.summarizers import Summarizer, Summary
from app.domain.compaction.planning import (
    PLANS,
    CompactionPolicy,
    Plan,
    plan_session,
    reactive_kind,
)
from app.domain.compilers.base import Item
from app.domain.models import Catalog
from app.domain.sessions import SessionPk
from app.domain.summaries.profiles import SummarizerChoice, writer_of
from app.domain.tokens import TokenCounter
from app.services.compaction import (
    Change,
    Done,
    Gate,
    Where,
    apply_plan,
    boundary,
    leases,
    now,
    stored_items,
)
from app.services.compaction.preparing import Prepared, Preparer
from app.services.compaction.refusals import ConstraintLost, LeaseLost, NotCompacted, Refused
from app.services.compaction.reports import Report, reported
from app.services.compaction.summarising import summarized_under
from app.services.compaction.task_cut import cut_bulky_task
from app.services.sessions import events
from app.services.tenancy import cpu
from app.storage import queries
from app.storage.models import SessionRow


class Chooser(Protocol):
    """The deployment's summarisers by profile (``app.adapters.summarizers.profiles``)."""

    names: frozenset[str]

    def choose(self, choice: SummarizerChoice | None) -> Summarizer: ...

    def writer(self, choice: SummarizerChoice | None) -> dict[str, Any]: ...


@dataclass(frozen=True)
class Deployment:
    """What every compaction of a deployment uses: the counter, the default summariser and the
    profiles a policy may choose (``summarizers``; None: only the default), the catalog, the
    lease's length, the background preparer, and who is told of each compaction written."""

    counter: TokenCounter
    summarizer: Summarizer
    catalog: Catalog
    lease_seconds: float = 30.0
    summarizers: Chooser | None = None
    preparer: Preparer | None = None
    on_compacted: Callable[[Done], None] | None = None


class Busy(NotCompacted):
    """Another request holds the session's compaction lease (it is summarising now)."""


class Compactor:
    """Runs compactions of one session, each under the session's compaction lease and in
    transactions of its own, and tells subscribers: ``context_compaction_start`` (committed
    before the summariser runs) and ``context_compaction_end`` (with its ``outcome``) for
    request-boundary compaction, ``compaction`` for the others."""

    def __init__(self, db: AsyncSession, deployment: Deployment, now: datetime) -> None:
        self.db, self.now = db, now
        self.counter, self.catalog = deployment.counter, deployment.catalog
        self.summarizer = deployment.summarizer
        self.summarizers = deployment.summarizers  # the profiles a policy may choose
        self.lease_seconds = deployment.lease_seconds
        self.on_compacted = deployment.on_compacted  # told of each compaction written (metrics)
        self.preparer = deployment.preparer  # prepares request-boundary compactions
        self.notes: list[str] = []  # for the compile's warnings

    def compacted(self, done: Done) -> Done:
        """``done``, once whoever asked to hear of compactions has."""
        if self.on_compacted is not None:
            self.on_compacted(done)
        return done

    @property
    def profiles(self) -> frozenset[str] | None:
        """The summariser profiles a request may name (None: any, there is only one)."""
        return self.summarizers.names if self.summarizers is not None else None

    def summarizer_for(self, choice: SummarizerChoice | None) -> Summarizer:
        """The summariser a policy's ``choice`` asks for."""
        if self.summarizers is None:
            return self.summarizer
        return self.summarizers.choose(choice)

    def writer(self, choice: SummarizerChoice | None) -> dict[str, Any]:
        """What names the summariser a policy's ``choice`` asks for (a prepared summary is
        swapped in only under a policy naming the same)."""
        if self.summarizers is None:
            return writer_of(choice, None, None, True)
        return self.summarizers.writer(choice)

    async def run(
        self,
        session: SessionRow,
        plan: Plan,
        where: Where,
        choice: SummarizerChoice | None = None,
        gate: Gate | None = None,
        prepared: Prepared | None = None,
    ) -> Done:
        """Summarise and persist ``plan`` (with the summariser ``choice`` asks for), announced;
        commits. ``NotCompacted`` when it wrote nothing (then it called no summariser, unless
        the summary turned out no smaller or the ``gate`` refused it). With a ``prepared``
        summary, no summariser is called: it is swapped in, in one transaction."""
        pk, before = SessionPk(session.pk), _before(plan)
        boundary = plan.kind == "session"
        lease = await self._lease(pk, plan)
        if boundary:
            data = {**before, "budget_used_pct": where.pct(plan.tokens_before)}
            start = await events.emit(self.db, pk, events.COMPACTION_START, data, self.now)
            await leases.started(self.db, lease, start)
        try:
            change = await self._change(plan, where, lease, choice, gate, prepared)
            done = await apply_plan(self.db, self.counter, session, change, where)
        except LeaseLost:
            await self.db.commit()  # only the lock was taken; the new holder ended the start
            raise
        except NotCompacted as err:  # a ConstraintLost too
            await self._ended(lease, _not_compacted(err, before, boundary))
            raise
        except BaseException as err:
            with anyio.CancelScope(shield=True):
                await self._failed(lease, before if boundary else None, err)
            raise
        kind = events.COMPACTION_END if boundary else events.COMPACTION
        await self._ended(
            lease, (kind, {**before, **_outcome(done, where), "outcome": "compacted"})
        )
        return self.compacted(done)

    async def _change(
        self,
        plan: Plan,
        where: Where,
        lease: leases.Lease,
        choice: SummarizerChoice | None,
        gate: Gate | None,
        prepared: Prepared | None,
    ) -> Change:
        """What to write: ``plan`` with its summary, the ``prepared`` one or one made now, if
        the ``gate`` lets the plan through."""
        if gate is not None:
            gate.ahead(plan)
        if prepared is not None:
            return Change(plan, prepared.summary, lease, gate, prepared.at)
        return Change(plan, await self._summarize(plan, where, lease, choice), lease, gate)

    async def _ended(self, lease: leases.Lease, event: tuple[str, dict[str, Any]] | None) -> None:
        """The compaction over: its ``event`` (kind and data) told, the lease released,
        committed."""
        if event is not None:
            await events.emit(self.db, lease.pk, event[0], event[1], self.now)
        await leases.release(self.db, lease)
        await self.db.commit()

    async def _summarize(
        self, plan: Plan, where: Where, lease: leases.Lease, choice: SummarizerChoice | None
    ) -> Summary:
        """The summary of ``plan``, with no transaction (nor connection) held meanwhile."""
        await self.db.commit()
        engine = self.db.bind
        assert isinstance(engine, AsyncEngine)
        encoder = self.counter.encoder(where.encoding)
        chosen = self.summarizer_for(choice)
        return await summarized_under(engine, lease, chosen, plan, encoder, where.output)

    async def _lease(self, pk: SessionPk, plan: Plan) -> leases.Lease:
        """The session's compaction lease, in a transaction left open for the start event;
        ``NotCompacted`` (committed) when another holds it or already took these messages."""
        lease = await leases.take(self.db, pk, self.lease_seconds)
        if lease is None:
            await self.db.commit()
            raise Busy("another compaction of this session is running; try again")
        seqs = [i.seq for i in plan.taken]
        if await queries.present_seqs(self.db, pk, seqs) != len(seqs):
            await leases.release(self.db, lease)
            await self.db.commit()
            raise NotCompacted("another compaction of this session ran first; try again")
        return lease

    async def _failed(
        self, lease: leases.Lease, before: dict[str, Any] | None, err: BaseException
    ) -> None:
        """After an unexpected failure: end the start (when there was one) and give the lease
        back, unless the session is gone or another took the lease over."""
        await self.db.rollback()
        try:
            if await leases.holds(self.db, lease):
                if before is not None:
                    data = {
                        **before,
                        "compaction_id": None,
                        "outcome": "failed",
                        "detail": type(err).__name__,
                    }
                    await events.emit(self.db, lease.pk, events.COMPACTION_END, data, now())
                await leases.release(self.db, lease)
            await self.db.commit()
        except Exception:  # the database itself may be what failed: the lease then expires
            await self.db.rollback()

    async def due(
        self, session: SessionRow, policy: CompactionPolicy, where: Where, report: Report | None
    ) -> list[Done]:
        """Request-boundary compaction by the stored history (prepared in the background and
        swapped in, see app/services/compaction/boundary.py; inline over the trigger without a
        preparer or with ``background`` off; a ``sent`` policy's is the compile's, see
        ``compacting.compact_sent``), then the reactive ones the report calls for (at most
        ``max_reactive_compactions_per_request``). The history is read only when one may be
        due."""
        pk = SessionPk(session.pk)
        done = [] if policy.measure == "sent" else await self._boundary(session, policy, where)
        report = await reported(self.db, pk, report, where.output == "anthropic")
        prompt, too_long = (report.prompt_tokens, report.too_long) if report else (None, False)
        for _ in range(policy.max_reactive_compactions_per_request):
            kind = reactive_kind(prompt, where.context_window, too_long, policy)
            plan = PLANS[kind](await self.items(pk, where), policy) if kind else None
            found = await self.attempt(session, plan, where, policy.summarizer) if plan else []
            if not found:
                break
            done += found
            removed = found[0].row.tokens_before - found[0].row.tokens_after
            prompt, too_long = max(0, (prompt or 0) - removed), False
        if report is not None and report.too_long and policy.enabled:  # the task may be the bulk
            cut = await cut_bulky_task(self.db, self.counter, session, policy, where, now())
            done += [] if cut is None else [self.compacted(cut)]
        return done

    async def _boundary(
        self, session: SessionRow, policy: CompactionPolicy, where: Where
    ) -> list[Done]:
        """Request-boundary compaction by the stored history's tokens."""
        count, tokens = await queries.stored_totals(self.db, SessionPk(session.pk))
        total = tokens[where.encoding]
        if policy.background and self.preparer is not None:
            return await boundary.due(self, session, policy, where, count, total)
        return await self._inline(session, policy, where, count, total)

    async def _inline(
        self, session: SessionRow, policy: CompactionPolicy, where: Where, count: int, total: int
    ) -> list[Done]:
        """Request-boundary compaction in this request, when the history is over the trigger."""
        if total <= policy.trigger_tokens or count < policy.min_messages:
            return []
        items = await self.items(SessionPk(session.pk), where)
        plan = plan_session(items, policy)
        if plan is None:
            return []
        gate = Gate.of(policy, where, items, forced=total > where.context_window)
        job = boundary.job(self, session, policy, where, count)
        if self.preparer is not None and self.preparer.refusal(job) is not None:
            return []  # its summary shed too little: not summarised again until it grows
        try:
            return [await self.run(session, plan, where, policy.summarizer, gate)]
        except Refused as err:
            if err.too_little and self.preparer is not None:
                self.preparer.futile(job)
            return self._without(err)
        except NotCompacted as err:
            return self._without(err)

    async def items(self, pk: SessionPk, where: Where) -> list[Item]:
        """The session's stored history as compiler items counted in the session's encoding."""
        rows = await queries.all_messages(self.db, pk)
        return await cpu.run_sync(stored_items, rows, where.encoding)

    async def attempt(
        self,
        session: SessionRow,
        plan: Plan,
        where: Where,
        choice: SummarizerChoice | None,
        gate: Gate | None = None,
    ) -> list[Done]:
        """``run``, where a compaction that wrote nothing is no error (the compile goes on)."""
        try:
            return [await self.run(session, plan, where, choice, gate)]
        except NotCompacted as err:
            return self._without(err)

    def _without(self, err: NotCompacted) -> list[Done]:
        """No compaction: the compile goes on, with a note when it is the client's to know."""
        if isinstance(err, Busy):
            self.notes.append(
                "a compaction of this session is running in another request: "
                "compiled without waiting for it"
            )
        elif isinstance(err, ConstraintLost):
            self.notes.append(f"compaction {err}; compiled without it")
        return []


def _before(plan: Plan) -> dict[str, Any]:
    """What a compaction's events say of the history before it."""
    return {
        "kind": plan.kind,
        "reason": plan.reason,
        "tokens_before": plan.tokens_before,
        "messages_before": len(plan.taken) + len(plan.left),
    }


def _not_compacted(
    err: NotCompacted, before: dict[str, Any], boundary: bool
) -> tuple[str, dict[str, Any]] | None:
    """The event of a compaction that wrote nothing: refused for a constraint it would lose
    (always told), else skipped (told of a request-boundary one)."""
    kind = events.COMPACTION_END if boundary else events.COMPACTION
    data: dict[str, Any] = {**before, "compaction_id": None}
    if isinstance(err, ConstraintLost):
        refused = {"outcome": "refused", "refused": str(err), "constraints": list(err.checksums)}
        return kind, {**data, **refused}
    if not boundary:
        return None
    data |= {"outcome": "skipped", "skipped": str(err)}
    if isinstance(err, Refused):
        data["economics"] = err.economics.as_dict()
    return kind, data


def _outcome(done: Done, where: Where) -> dict[str, Any]:
    """The figures of a compaction for its event."""
    row, summary = done.row, done.summary
    usage = summary.usage if summary is not None else None
    out = {
        "compaction_id": row.id,
        "summarizer": row.summarizer,
        "summarizer_reason": row.summarizer_reason,
        "tokens_after": row.tokens_after,
        "summary_tokens": row.summary_tokens,
        "messages_after": done.messages_after,
        "budget_used_pct": where.pct(row.tokens_after),
        "resets_provider_session": row.resets_provider_session,
        "loss": _loss_counts(row.loss),
        "constraints": len(summary.constraints) if summary is not None else 0,
        "summarizer_usage": usage.as_json() if usage is not None else None,
    }
    if row.economics is not None:
        out["economics"] = row.economics
    if row.prepared_at is not None:
        out["prepared_at"] = row.prepared_at.isoformat()
    return out


def _loss_counts(loss: dict[str, Any] | None) -> dict[str, int] | None:
    """How many entries the summary kept, merged, replaced and dropped (a ledger summary's)."""
    counts = loss.get("counts") if loss is not None else None
    return dict(counts) if isinstance(counts, dict) else None
