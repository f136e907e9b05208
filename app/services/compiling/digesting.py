"""Digests of long histories, made and moved forward after the compiles that need them.

A session compile that trims reads the newest part of the history and a digest of the rest
(app/domain/compilers/digests.py). A compile that had to read all of it (none yet, or the one
there could not serve it) has a digest made from what it read; one that read a tail grown past
what it keeps by half has the digest moved forward. Both run after the compile answered, as tasks
of their own (at most one per session, view and execution at a time in this process), in the
background CPU lane (``cpu.Lane``), and are written under the session's lock only if no
compaction rewrote the history since the compile read it. A failure costs nothing but the next
compile reading more.

A digest made of a whole long history is made in steps (``advance``): each step reads at most
``STEP`` times what a digest keeps past the digest so far, and is saved before the next, so no
step's work grows with the history; a write that makes a session long brings its digest up to
date the same way before it answers (``catching_up``).
"""

from __future__ import annotations

import asyncio
import bisect
import logging
from collections.abc import Callable, Sequence
from contextlib import AbstractAsyncContextManager, nullcontext
from dataclasses import dataclass
from datetime import UTC, datetime
from itertools import accumulate
from typing import Any, Literal, TypeVar, TypeVarTuple

from cachetools import LRUCache
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.domain.compilers.base import Compiler, Item, Snapshot
from app.domain.compilers.digests import (
    Digest,
    candidates,
    earlier,
    extend,
    trace_executions,
)
from app.domain.compiling import Output, Target
from app.domain.sessions import SessionPk
from app.domain.tokens import Encoder, count_message
from app.domain.validity.repair import Ids
from app.services.compiling.tails import KEEP_WINDOWS, MOVE_AT, Tail, View, own_key
from app.services.tenancy import cpu
from app.storage import digests
from app.storage.digests import Stored
from app.storage.models import SessionRow

log = logging.getLogger(__name__)
FUTILE_KEPT = 4096
TAILS_KEPT = 4096  # digests whose tail's tokens are known (about half a kilobyte each)
# Long histories read whole at once in this process: what bounds a worker's memory while the
# first compiles of long sessions (or of ones a digest cannot serve) run.
WHOLE_READS = 1
Outcome = Literal["made", "moved", "none", "stale", "failed"]
T = TypeVar("T")
Ts = TypeVarTuple("Ts")


class Runner:
    """How a step's CPU work runs: ``cpu.run_sync`` (the tenant's slots) or a ``cpu.Lane``."""

    async def run_sync(self, work: Callable[[*Ts], T], *args: *Ts) -> T:
        return await cpu.run_sync(work, *args)


@dataclass(frozen=True)
class Job:
    """A digest to make (no ``prior``) or move forward from what a compile read."""

    pk: SessionPk
    view_key: str
    version: int  # the history's, when the compile read it
    items: Sequence[Item]  # every stored item (or the prior's needed rounds and its tail)
    base: Compiler
    snapshot: Snapshot
    keep_tokens: int
    prior: Stored | None = None

    @property
    def running(self) -> Running:
        """What no other job runs beside it: a job of the same session, view and execution."""
        return (self.pk, self.view_key, self.snapshot.execution_id)


# A job's session, view and execution (None: a compile with no execution).
Running = tuple[str, str, str | None]


class Digester:
    """Runs digest jobs in the background, one per session, view and execution at a time:
    those of two executions may run together (each on a digest of its own, or on the view's,
    where only one move from a place is kept)."""

    def __init__(
        self,
        maker: async_sessionmaker[AsyncSession],
        on_done: Callable[[Outcome], None] = lambda _: None,
        lane: cpu.Lane | Runner | None = None,
    ) -> None:
        self.maker, self.on_done = maker, on_done
        self.lane = lane or cpu.Lane()
        self._running: dict[Running, asyncio.Task[Outcome]] = {}
        # Histories of which no digest could be made, by session, view and execution: (their
        # version, how many messages they had); not tried again until they grew by a tenth.
        self._futile: LRUCache[Running, tuple[int, int]] = LRUCache(FUTILE_KEPT)
        # Per digest as stored (session, view, version, generation, upto) and encoding: the
        # tokens stored from its upto on when last summed, and the session's total then.
        self._tails: LRUCache[tuple[Any, ...], tuple[int, int]] = LRUCache(TAILS_KEPT)
        self._whole = asyncio.Semaphore(WHOLE_READS)

    def reading(self, long: bool) -> AbstractAsyncContextManager[Any]:
        """A permit to read a history whole: one of ``WHOLE_READS`` for a long one (its rows
        and messages take memory in proportion to it), none needed for a short one."""
        return self._whole if long else nullcontext()

    def schedule(self, job: Job, now: datetime) -> None:
        key = job.running
        if key in self._running or self._is_futile(job):
            return
        task = asyncio.create_task(self._run(job, now))
        self._running[key] = task
        task.add_done_callback(lambda _: self._running.pop(key, None))

    def _is_futile(self, job: Job) -> bool:
        return job.prior is None and self.futile(job.running, job.version, len(job.items))

    async def tail_tokens(
        self, db: AsyncSession, at: digests.Place, stored: Stored, encoding: str, total: int
    ) -> int:
        """The tokens (in ``encoding``) stored from ``stored``'s upto on, in the history ``at``
        whose stored total was ``total`` when read: within a version stored messages are only
        appended, so what the last sum of them found grows by what the total grew since. Summed
        in the database (with the total, in one statement) the first time, and when the total
        is below what it was (a database put back as an older copy was). Appends racing a sum
        are in both the sum and its total; one between the caller's read of ``total`` and the
        sum only makes this estimate early, and a digest moved early is none (the job weighs
        the tail it reads, and does nothing under the mark)."""
        upto = stored.digest.upto
        key = (at.pk, at.view_key, at.version, stored.generation, upto, encoding)
        found = self._tails.get(key)
        if found is not None and total >= found[1]:
            return found[0] + total - found[1]
        tail, then = await digests.tail_and_total(db, at.pk, upto, encoding)
        self._tails[key] = (tail, then)
        return tail

    def futile(self, key: Running, version: int, size: int) -> bool:
        """Whether no digest could be made of this history (``size`` messages long) when it
        was a tenth shorter."""
        futile = self._futile.get(key)
        if futile is None:
            return False
        was, before = futile
        return was == version and size < before + max(100, before // 10)

    async def now(self, job: Job, when: datetime, run: Runner) -> Outcome:
        """Make or move ``job``'s digest now, with ``run`` (after the job of its session, view
        and execution running in this process, if one is; none is started meanwhile)."""
        key = job.running
        await self.settled(key)
        if self._is_futile(job):
            return "none"
        task = asyncio.create_task(self._run(job, when, run))
        self._running[key] = task
        task.add_done_callback(lambda _: self._running.pop(key, None))
        return await asyncio.shield(task)

    def running(self) -> int:
        """How many jobs run in this process."""
        return len(self._running)

    def busy(self, key: Running) -> bool:
        """Whether a job of the session, view and execution runs in this process."""
        return key in self._running

    async def settled(self, key: Running) -> None:
        """Once no job of the session, view and execution runs in this process: a digest read
        then is where that job left it (a move from where it was before would not be kept)."""
        while (running := self._running.get(key)) is not None:
            await asyncio.wait([running])

    async def _run(self, job: Job, now: datetime, run: Runner | None = None) -> Outcome:
        outcome: Outcome = "failed"
        try:
            outcome = await self._digest(job, now, run or self.lane)
        except Exception:  # a background task: nothing waits for it to fail
            log.warning("a digest of session %s could not be made", job.pk, exc_info=True)
        finally:
            if outcome == "none" and job.prior is None:
                self._futile[job.running] = (job.version, len(job.items))
            self.on_done(outcome)
        return outcome

    async def _digest(self, job: Job, now: datetime, run: cpu.Lane | Runner) -> Outcome:
        async with self.maker() as db:
            return await advance(db, job, now, run)

    async def idle(self) -> None:
        """Wait for the jobs running now (tests; shutdown)."""
        while self._running:
            await asyncio.gather(*self._running.values(), return_exceptions=True)

    async def close(self) -> None:
        for task in self._running.values():
            task.cancel()
        await self.idle()


# What a digest keeps, and when it is made or moved


def keep_tokens(target: Target, output: Output) -> int:
    """What a digest of a view compiled for ``target`` keeps whole at its end, in tokens."""
    return int(KEEP_WINDOWS * max(target.context_window, output.total))


def digest_snapshot(target: Target, encoder: Encoder, execution_id: str | None) -> Snapshot:
    """The snapshot a digest's base compiler reads its part with (no items of its own)."""
    return Snapshot(
        items=(),
        tenant="",
        now=datetime.now(UTC),
        count=lambda m: count_message(m, encoder),
        execution_id=execution_id,
        target=target.profile.output,
    )


def job_after(
    view: View,
    row: SessionRow,
    items: Sequence[Item],
    tail: Tail | None,
    keep: int,
    snapshot: Snapshot,
) -> Job | None:
    """The digest to make (after a whole read of ``items``, a history long enough to need one)
    or move forward (after a ``tail`` grown past ``MOVE_AT`` times the ``keep`` tokens), if
    any."""
    if (tail.tokens if tail else sum(i.tokens for i in items)) < MOVE_AT * keep:
        return None
    prior = tail.stored if tail else None
    pk = SessionPk(row.pk)
    return Job(pk, view.key, row.history_version, items, view.base, snapshot, keep, prior)


# Making a digest in steps

# A step reads the digest's needed rounds and at most this many times what it keeps past it (or
# from the start): it moves the digest forward by about one time what it keeps.
STEP = MOVE_AT + 1


async def advance(db: AsyncSession, job: Job, now: datetime, run: cpu.Lane | Runner) -> Outcome:
    """Make ``job``'s digest and move it forward step by step through ``job.items`` (every
    stored item from the start, or a prior's needed rounds and every item from its upto on),
    each step saved (and committed) before the next, until the tail left is one a compile would
    not move it forward for. The first step's outcome, unless a later one found the history
    changed or the digest replaced or moved by another process ("stale": it goes no further)."""
    items = job.items
    seqs = [i.seq for i in items]
    sums = [0, *accumulate(i.tokens for i in items)]
    stored = job.prior
    at = digests.Place(job.pk, await _key(job, run), job.version)
    outcome: Outcome = "none"
    made_or_moved: Outcome = "made" if stored is None else "moved"
    while True:
        upto = stored.digest.upto if stored else 0
        start = bisect.bisect_left(seqs, upto)
        if stored is not None and sums[-1] - sums[start] < MOVE_AT * job.keep_tokens:
            return outcome
        end = bisect.bisect_left(sums, sums[start] + STEP * job.keep_tokens, lo=start)
        needed = [] if stored is None else _needed(items, seqs, stored.digest)
        made = await _step(db, job, stored, needed, items[start:end], run)
        if made is None:
            return outcome
        kept = await digests.save(db, at, *made, now, stored)
        await db.commit()
        if not kept:
            return "stale"
        outcome = made_or_moved
        # Another process may have put a digest in place since, made for another execution.
        stored = await digests.load(db, job.pk, at.view_key, job.version)
        if stored is None or stored.digest.upto <= upto:
            return "stale"
        if not stored.digest.serves(job.snapshot.execution_id):
            return "stale"


async def _key(job: Job, run: cpu.Lane | Runner) -> str:
    """Where ``job`` keeps its digest: under its execution's own key when that execution has
    trace messages in what the job reads, or in its prior's part (a digest kept under the
    view's key before executions had keys of their own), or its prior is kept there; so it
    neither moves nor replaces the view's digest, which serves the compiles that hide them.
    Else under the view's."""
    execution = job.snapshot.execution_id
    if execution is None:
        return job.view_key
    own = own_key(job.view_key, execution)
    prior = job.prior
    if prior is not None and (prior.view_key == own or execution in prior.digest.traces):
        return own
    traced = await run.run_sync(trace_executions, job.items)  # up to the whole history
    return own if execution in traced else job.view_key


async def _step(
    db: AsyncSession,
    job: Job,
    stored: Stored | None,
    needed: Sequence[Item],
    step: Sequence[Item],
    run: cpu.Lane | Runner,
) -> tuple[Digest, Ids] | None:
    """The digest moved forward over ``step`` after its ``needed`` rounds (made of ``step``,
    without ``stored``)."""
    if stored is None:
        return await run.run_sync(extend, None, step, job.base, job.snapshot, job.keep_tokens)
    digest, target = stored.digest, job.snapshot.target
    assert target is not None
    # In proportion to the step's ids and their renames: off the event loop, with the step.
    asked = await run.run_sync(candidates, step, target, digest)
    calls, held = await digests.ids_among(db, job.pk, stored, asked)
    told = earlier(asked, calls, held, needed)
    items = [*needed, *step]
    return await run.run_sync(extend, digest, items, job.base, job.snapshot, job.keep_tokens, told)


def _needed(items: Sequence[Item], seqs: Sequence[int], digest: Digest) -> list[Item]:
    """The items of ``digest``'s needed rounds (``items`` in seq order, ``seqs`` theirs)."""
    found: list[Item] = []
    for first, last in digest.needed:
        last = min(last, digest.upto - 1)
        found += items[bisect.bisect_left(seqs, first) : bisect.bisect_right(seqs, last)]
    return found
