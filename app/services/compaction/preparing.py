"""Request-boundary compactions prepared in the background (issue 16, part 5).

A compile that finds the history past the policy's early mark (``prepare_pct`` of the trigger)
schedules a preparation and does not wait for it: under the session's compaction lease (one at
a time across replicas), it plans as a compaction asked for now would, calls the summariser
with no transaction held, and stores the summary with the seqs it takes and a digest of their
stored content, without applying it. A later compile over the trigger swaps it in
(app/services/compaction/boundary.py) if those messages are all still there, unchanged.

One task per session in this process, at most ``background_compactions`` summarising at once,
and at most ``MAX_WAITING`` sessions waiting: more are not scheduled (a later compile schedules
them again). A preparation that found nothing to prepare (nothing that sheds ``min_shed_pct`` of
the history, its summary counted: the swap would refuse it), or whose summary would lose a
constraint (``ConstraintLost``, then logged and said by the compiles over the trigger), is not
tried again until the history has grown by a tenth of its messages (at least two), was
rewritten, or the policy changed: a compile past the mark would otherwise plan it, and call
the summariser, anew. Shutdown cancels them all. A process that stops mid-way leaves at most an
expired lease (taken over as usual) and nothing stored, or a stored preparation a later compile
checks. A stored preparation says which summariser made it (its profile here, its backend kind
and the policy's changes): a compile whose policy names another, or after the deployment's
profile changed, discards it, so every compaction's summary is its named summariser's.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from functools import partial
from typing import Any, Literal

import anyio
from cachetools import LRUCache
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from app.adapters.summarizers import Summarizer, Summary
from app.adapters.summarizers.base import Usage
from app.domain.compaction.economics import sheds_enough
from app.domain.compaction.planning import CompactionPolicy, Plan, plan_session
from app.domain.errors import NotFound
from app.domain.sessions import SessionPk
from app.domain.summaries.loss import OUTCOMES, Loss, LossEntry
from app.domain.tokens import TokenCounter, count_message
from app.services.compaction import Where, leases, stored_items
from app.services.compaction.refusals import ConstraintLost
from app.services.compaction.summarising import summarized_under, summary_message
from app.services.sessions.cache import canonical_json
from app.services.tenancy import cpu
from app.storage import prepared as store
from app.storage import queries
from app.storage.models import MessageRow

log = logging.getLogger(__name__)
MAX_WAITING = 1024
WRITER_KEY = "writer"  # a stored summary's: what names the summariser its policy chose
FUTILE_KEPT = 4096
Outcome = Literal["prepared", "busy", "exists", "none", "refused", "stale", "gone", "failed"]


@dataclass(frozen=True)
class Futile:
    """A history of which no compaction could be prepared: its version and how many messages it
    had, the policy it was planned by, and the refusal when a constraint would have been
    lost."""

    version: int
    count: int
    policy: CompactionPolicy
    refused: str | None

    def holds(self, job: Preparation) -> bool:
        """Whether ``job`` would prepare that history again, by that policy."""
        grown = job.count >= self.count + max(2, self.count // 10)
        return job.version == self.version and not grown and job.policy == self.policy


@dataclass(frozen=True)
class Prepared:
    """A summary made in the background, and when."""

    summary: Summary
    at: datetime


@dataclass(frozen=True)
class Preparation:
    """A compaction to prepare: the session, its policy and where it is measured, and the
    summariser its policy chose (``writer``: what names it, stored with the summary)."""

    pk: SessionPk
    policy: CompactionPolicy
    where: Where
    summarizer: Summarizer
    counter: TokenCounter
    version: int = 0  # the history's, and how many messages it had, when the compile read it
    count: int = 0
    writer: dict[str, Any] | None = None


def content_digest(rows: Sequence[MessageRow]) -> str:
    """A digest of stored messages as they are now (seq, section, role, name, content and
    metadata): equal only if none of them changed."""
    hashed = hashlib.sha256()
    for r in rows:
        hashed.update(canonical_json([r.seq, r.section, r.role, r.name, r.content, r.meta]))
    return hashed.hexdigest()


def summary_json(summary: Summary, writer: dict[str, Any] | None = None) -> dict[str, Any]:
    """A summary as stored with its preparation, with what names the summariser its policy
    chose (``writer``: one prepared by another is not swapped in, see
    app/services/compaction/boundary.py)."""
    out = asdict(summary)
    out["loss"] = None if summary.loss is None else summary.loss.as_json()
    out[WRITER_KEY] = writer
    return out


def same_writer(stored: dict[str, Any], now: dict[str, Any]) -> bool:
    """Whether a summary stored with ``stored`` (its ``WRITER_KEY``) is one the summariser
    ``now`` names would stand by: asked for the same, by the same profile and backend kind.
    When one of the replicas lacks the profile named, its summary says so
    (``summarizer_unavailable``) or is the named one's: either is accountable, and taken
    rather than summarised again."""
    if stored.get(WRITER_KEY) is None or stored[WRITER_KEY].get("choice") != now["choice"]:
        return False
    then = stored[WRITER_KEY]
    if not (then.get("available") and now["available"]):
        return True
    return bool((then.get("profile"), then.get("kind")) == (now["profile"], now["kind"]))


def summary_of(stored: dict[str, Any]) -> Summary:
    """A stored summary back (a loss report keeps each entry's head, as records do; the
    constraints its block carries and the summariser's usage as they were)."""
    loss = stored.get("loss")
    fields = {k: v for k, v in stored.items() if k in Summary.__dataclass_fields__}
    fields["constraints"] = tuple(stored.get("constraints") or ())
    usage = stored.get("usage")
    fields["usage"] = Usage(**usage) if isinstance(usage, dict) else None
    if loss is not None:
        outcome = {
            n: tuple(LossEntry(e["kind"], e["text"], tuple(e["seqs"])) for e in loss[n])
            for n in OUTCOMES
        }
        fields["loss"] = Loss(**outcome, notes=tuple(loss.get("notes", ())))
    return Summary(**fields)


class Preparer:
    """Prepares compactions in the background, one task per session at a time."""

    def __init__(
        self,
        maker: async_sessionmaker[AsyncSession],
        lease_seconds: float,
        concurrency: int,
        on_done: Callable[[Outcome], None] = lambda _: None,
        lane: cpu.Lane | None = None,
    ) -> None:
        self.maker, self.lease_seconds, self.on_done = maker, lease_seconds, on_done
        self.lane = lane or cpu.Lane()  # its CPU work is background work
        self._running: dict[str, asyncio.Task[None]] = {}
        self._slots = asyncio.Semaphore(concurrency)
        self._futile: LRUCache[str, Futile] = LRUCache(FUTILE_KEPT)

    def schedule(self, job: Preparation) -> bool:
        """Start preparing ``job`` unless one of its session runs, too many wait, or its history
        is one of which none could be prepared."""
        if job.pk in self._running or len(self._running) >= MAX_WAITING:
            return False
        if self.refusal(job) is not None:
            return False
        task = asyncio.create_task(self._run(job))
        self._running[job.pk] = task
        task.add_done_callback(lambda _: self._running.pop(job.pk, None))
        return True

    def running(self, pk: SessionPk) -> bool:
        return pk in self._running

    def refusal(self, job: Preparation) -> str | None:
        """Why ``job``'s history is not prepared again ("" when there was nothing to prepare),
        or None when it may be."""
        futile = self._futile.get(job.pk)
        if futile is None or not futile.holds(job):
            return None
        return futile.refused or ""

    def futile(self, job: Preparation) -> None:
        """Remember that ``job``'s history sheds too little: an inline compaction summarised it
        and refused the summary, so neither summarises it again until it grows."""
        self._futile[job.pk] = Futile(job.version, job.count, job.policy, None)

    async def _run(self, job: Preparation) -> None:
        outcome: Outcome = "failed"
        refused: str | None = None
        try:
            async with self._slots:
                outcome = await self._prepare(job)
        except NotFound:
            outcome = "gone"
        except ConstraintLost as err:
            outcome, refused = "refused", str(err)
            log.warning("a compaction of session %s was not prepared: %s", job.pk, err)
        except Exception:  # a background task: nothing waits for it to fail
            log.warning("a compaction of session %s could not be prepared", job.pk, exc_info=True)
        finally:
            if outcome in ("none", "refused"):
                self._futile[job.pk] = Futile(job.version, job.count, job.policy, refused)
            self.on_done(outcome)

    async def _prepare(self, job: Preparation) -> Outcome:
        async with self.maker() as db:
            lease = await leases.take(db, job.pk, self.lease_seconds)
            if lease is None:
                await db.commit()
                return "busy"
            try:
                outcome = await self._under(db, job, lease)
            except BaseException:
                with anyio.CancelScope(shield=True):
                    await _give_back(db, lease)
                raise
            return outcome

    async def _under(self, db: AsyncSession, job: Preparation, lease: leases.Lease) -> Outcome:
        """Plan, summarise and store, holding ``lease`` (given back in the last transaction)."""
        planned = await self._plan(db, job)
        if isinstance(planned, str):
            await _give_back(db, lease)
            return planned
        plan, seqs, digest = planned
        await db.commit()  # no transaction (nor connection) is held while it summarises
        encoder = job.counter.encoder(job.where.encoding)
        summary = await summarized_under(
            _engine(db), lease, job.summarizer, plan, encoder, job.where.output
        )
        shed = plan.tokens_taken - count_message(summary_message(summary.text), encoder)
        if not sheds_enough(shed, plan.tokens_before, job.policy.min_shed_pct):
            await _give_back(db, lease)  # the swap would refuse it, and prepare it again
            return "none"
        if not await queries.lock_session(db, job.pk):
            return "gone"
        if not await leases.holds(db, lease):
            await db.rollback()
            return "busy"
        if content_digest(await queries.messages_at(db, job.pk, seqs)) != digest:
            await _give_back(db, lease)
            return "stale"
        stored = summary_json(summary, job.writer)
        await store.save(db, job.pk, seqs, digest, stored, datetime.now(UTC))
        await leases.release(db, lease)
        await db.commit()
        return "prepared"

    async def _plan(
        self, db: AsyncSession, job: Preparation
    ) -> tuple[Plan, list[int], str] | Outcome:
        """The compaction to prepare, the seqs it takes and their digest; else why none:
        ``exists`` (one is stored), ``stale`` (the history was compacted since the compile that
        scheduled it: it is under the early mark) or ``none`` (nothing that sheds enough)."""
        if await store.load(db, job.pk) is not None:
            return "exists"
        _, totals = await queries.stored_totals(db, job.pk)
        if totals[job.where.encoding] <= job.policy.prepare_tokens:
            return "stale"
        rows = await queries.all_messages(db, job.pk)
        items = await self.lane.run_sync(stored_items, rows, job.where.encoding)
        plan = await self.lane.run_sync(
            partial(plan_session, now=True, ahead=True), items, job.policy
        )
        if plan is None or not sheds_enough(
            plan.tokens_taken, plan.tokens_before, job.policy.min_shed_pct
        ):
            return "none"
        seqs = [i.seq for i in plan.taken]
        return plan, seqs, content_digest([r for r in rows if r.seq in set(seqs)])

    async def idle(self) -> None:
        """Wait for the preparations running now (tests; shutdown)."""
        while self._running:
            await asyncio.gather(*self._running.values(), return_exceptions=True)

    async def close(self) -> None:
        for task in self._running.values():
            task.cancel()
        await self.idle()


def _engine(db: AsyncSession) -> AsyncEngine:
    engine = db.bind
    assert isinstance(engine, AsyncEngine)
    return engine


async def _give_back(db: AsyncSession, lease: leases.Lease) -> None:
    """Give the lease back (unless another took it over) and end the transaction; a failing
    database leaves it to expire."""
    try:
        await db.rollback()
        if await leases.holds(db, lease):
            await leases.release(db, lease)
        await db.commit()
    except Exception:
        await db.rollback()
