"""Request-boundary compaction off the request path: what a compile does about it.

Past the early mark (``prepare_pct`` of ``trigger_tokens``) with nothing prepared, a compile
schedules a preparation (app/services/compaction/preparing.py) and goes on. Over the trigger,
it swaps in the prepared one, in one transaction, if the messages it takes are all still stored and
unchanged and the summariser the policy names now wrote it (else it is discarded and another
prepared), and if the gate lets it through. A
refused one stays for a later compile, when more turns may make it pay, unless one planned on
the history now would pass: then it is discarded and that one prepared. With nothing to swap
in, it schedules one and compiles without compacting (a warning says so, or says why the
preparation of this history was refused). Only when the stored
history does not fit the context window does the compile compact inline, the gate then
overridden.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from sqlalchemy.ext.asyncio import AsyncSession

from app.adapters.summarizers import Summarizer
from app.domain.compaction.planning import CompactionPolicy, Plan, plan_session
from app.domain.compilers.base import Item
from app.domain.sessions import SessionPk
from app.domain.summaries.profiles import SummarizerChoice
from app.domain.tokens import TokenCounter
from app.services.compaction import Done, Gate, Where, rewrite_tokens, stored_items
from app.services.compaction.preparing import (
    Preparation,
    Prepared,
    Preparer,
    content_digest,
    same_writer,
    summary_of,
)
from app.services.compaction.refusals import NotCompacted, Refused
from app.services.tenancy import cpu
from app.storage import prepared as store
from app.storage import queries
from app.storage.models import MessageRow, PreparedCompactionRow, SessionRow


class Compactor(Protocol):
    """What request-boundary compaction needs of the compactor running it
    (app/services/compaction/compactor.py, which calls this module: a protocol, not an import)."""

    db: AsyncSession
    counter: TokenCounter
    notes: list[str]
    preparer: Preparer | None

    def summarizer_for(self, choice: SummarizerChoice | None) -> Summarizer: ...

    def writer(self, choice: SummarizerChoice | None) -> dict[str, Any]: ...

    async def run(
        self,
        session: SessionRow,
        plan: Plan,
        where: Where,
        choice: SummarizerChoice | None = None,
        gate: Gate | None = None,
        prepared: Prepared | None = None,
    ) -> Done: ...

    async def attempt(
        self,
        session: SessionRow,
        plan: Plan,
        where: Where,
        choice: SummarizerChoice | None,
        gate: Gate | None = None,
    ) -> list[Done]: ...


PREPARING = (
    "the history is over trigger_tokens: a compaction is being prepared in the "
    "background; compiled without it"
)


async def due(
    compactor: Compactor,
    session: SessionRow,
    policy: CompactionPolicy,
    where: Where,
    count: int,
    total: int,
) -> list[Done]:
    """What the compile does about request-boundary compaction of a history of ``count``
    messages and ``total`` tokens."""
    exceeded = total > where.context_window
    if count < policy.min_messages or (total <= policy.prepare_tokens and not exceeded):
        return []
    db, pk = compactor.db, SessionPk(session.pk)
    found = await store.load(db, pk)
    over = total > policy.trigger_tokens
    if not (over or exceeded):
        if found is None:
            _schedule(compactor, session, policy, where, count)
        return []
    rows = await queries.all_messages(db, pk)
    items = await cpu.run_sync(stored_items, rows, where.encoding)
    if found is not None:
        plan = None
        if same_writer(found.summary, compactor.writer(policy.summarizer)):
            plan = await cpu.run_sync(_still_valid, found, rows, items, policy)
        if plan is not None:
            swapped = await _swap(compactor, session, plan, found, policy, where, items, exceeded)
            if swapped is not None:
                return swapped
        await store.drop(db, pk)
        await db.commit()
    if exceeded:
        plan = plan_session(items, policy, now=True)
        if plan is None:
            return []
        gate = Gate.of(policy, where, items, forced=True)
        return await compactor.attempt(session, plan, where, policy.summarizer, gate)
    if _schedule(compactor, session, policy, where, count) or _preparing(compactor, pk):
        compactor.notes.append(PREPARING)
    elif refused := _refusal(compactor, session, policy, where, count):
        compactor.notes.append(f"compaction {refused}; compiled without it")
    return []


def _still_valid(
    found: PreparedCompactionRow,
    rows: Sequence[MessageRow],
    items: list[Item],
    policy: CompactionPolicy,
) -> Plan | None:
    """The prepared compaction as a plan of the history now, if the messages it takes are all
    still stored and unchanged."""
    seqs = set(found.seqs)
    taken = [r for r in rows if r.seq in seqs]
    if len(taken) != len(seqs) or content_digest(taken) != found.digest:
        return None
    return Plan(
        "session",
        tuple(i for i in items if i.seq in seqs),
        tuple(i for i in items if i.seq not in seqs),
        policy.summary_tokens,
    )


async def _swap(
    compactor: Compactor,
    session: SessionRow,
    plan: Plan,
    found: PreparedCompactionRow,
    policy: CompactionPolicy,
    where: Where,
    items: list[Item],
    exceeded: bool,
) -> list[Done] | None:
    """Apply the prepared compaction; None when it is to be discarded (it would shed too
    little of the history now)."""
    gate = Gate.of(policy, where, items, forced=exceeded)
    prepared = Prepared(summary_of(found.summary), found.prepared_at)
    try:
        return [await compactor.run(session, plan, where, policy.summarizer, gate, prepared)]
    except Refused as err:
        if err.too_little or await cpu.run_sync(_fresh_pays, gate, items, policy):
            return None
        compactor.notes.append(f"the prepared compaction was not applied: {err}")
        return []
    except NotCompacted:  # busy, or another compaction took its messages (and dropped it)
        return []


def _fresh_pays(gate: Gate, items: list[Item], policy: CompactionPolicy) -> bool:
    """Whether a compaction planned on the history now, with a summary of its full budget,
    would pass the gate. A prepared one was planned on a shorter history: it sheds no more as
    the history grows while what it rewrites does, so once refused it never pays; a fresh one
    sheds the growth too."""
    plan = plan_session(items, policy, now=True)
    if plan is None:
        return False
    try:
        gate.judge(plan, policy.summary_tokens, rewrite_tokens(plan, policy.summary_tokens))
    except Refused:
        return False
    return True


def job(
    compactor: Compactor, session: SessionRow, policy: CompactionPolicy, where: Where, count: int
) -> Preparation:
    summarizer = compactor.summarizer_for(policy.summarizer)
    return Preparation(
        SessionPk(session.pk),
        policy,
        where,
        summarizer,
        compactor.counter,
        session.history_version,
        count,
        compactor.writer(policy.summarizer),
    )


def _schedule(
    compactor: Compactor, session: SessionRow, policy: CompactionPolicy, where: Where, count: int
) -> bool:
    preparer = compactor.preparer
    return preparer is not None and preparer.schedule(job(compactor, session, policy, where, count))


def _refusal(
    compactor: Compactor, session: SessionRow, policy: CompactionPolicy, where: Where, count: int
) -> str | None:
    """Why the preparation of this history was refused (a constraint it would lose), if it
    was."""
    preparer = compactor.preparer
    if preparer is None:
        return None
    return preparer.refusal(job(compactor, session, policy, where, count)) or None


def _preparing(compactor: Compactor, pk: SessionPk) -> bool:
    return compactor.preparer is not None and compactor.preparer.running(pk)
