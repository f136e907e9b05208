"""Digests of long histories, made and moved forward after the compiles that need them.

A session compile that trims reads the newest part of the history and a digest of the rest
(app/domain/compilers/digests.py). A compile that had to read all of it (none yet, or the one
there could not serve it) has a digest made from what it read; one that read a tail grown past
what it keeps by half has the digest moved forward. Both run after the compile answered, as tasks
of their own (at most one per session and view at a time in this process), on the tenant's CPU
slots, and are written under the session's lock only if no compaction rewrote the history since
the compile read it. A failure costs nothing but the next compile reading more.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from cachetools import LRUCache
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.domain.compilers.base import Compiler, Item, Snapshot
from app.domain.compilers.digests import NOTHING_EARLIER, extend
from app.domain.sessions import SessionPk
from app.domain.validity.repair import Earlier
from app.services import cpu
from app.storage import digests
from app.storage.digests import Stored

log = logging.getLogger(__name__)
FUTILE_KEPT = 4096
Outcome = Literal["made", "moved", "none", "stale", "failed"]


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
    earlier: Earlier = NOTHING_EARLIER


class Digester:
    """Runs digest jobs in the background, one per session and view at a time."""

    def __init__(
        self,
        maker: async_sessionmaker[AsyncSession],
        on_done: Callable[[Outcome], None] = lambda _: None,
    ) -> None:
        self.maker, self.on_done = maker, on_done
        self._running: dict[tuple[str, str], asyncio.Task[None]] = {}
        # Histories of which no digest could be made, by session and view: (their version, how
        # many messages they had); not tried again until they grew by a tenth.
        self._futile: LRUCache[tuple[str, str], tuple[int, int]] = LRUCache(FUTILE_KEPT)

    def schedule(self, job: Job, now: datetime) -> None:
        key = (job.pk, job.view_key)
        if key in self._running:
            return
        futile = self._futile.get(key)
        if futile is not None and job.prior is None:
            version, size = futile
            if version == job.version and len(job.items) < size + max(100, size // 10):
                return
        task = asyncio.create_task(self._run(job, now))
        self._running[key] = task
        task.add_done_callback(lambda _: self._running.pop(key, None))

    async def _run(self, job: Job, now: datetime) -> None:
        outcome: Outcome = "failed"
        try:
            outcome = await self._digest(job, now)
        except Exception:  # a background task: nothing waits for it to fail
            log.warning("a digest of session %s could not be made", job.pk, exc_info=True)
        finally:
            if outcome == "none" and job.prior is None:
                self._futile[(job.pk, job.view_key)] = (job.version, len(job.items))
            self.on_done(outcome)

    async def _digest(self, job: Job, now: datetime) -> Outcome:
        prior = job.prior
        made = await cpu.run_sync(
            extend, None if prior is None else prior.digest, job.items, job.base, job.snapshot,
            job.keep_tokens, job.earlier,
        )  # fmt: skip
        if made is None:
            return "none"
        digest, ids = made
        generation = None if prior is None else prior.generation
        async with self.maker() as db:
            kept = await digests.save(
                db, job.pk, job.view_key, job.version, digest, ids, now, generation
            )
            await db.commit()
        if not kept:
            return "stale"
        return "made" if prior is None else "moved"

    async def idle(self) -> None:
        """Wait for the jobs running now (tests; shutdown)."""
        while self._running:
            await asyncio.gather(*self._running.values(), return_exceptions=True)

    async def close(self) -> None:
        for task in self._running.values():
            task.cancel()
        await self.idle()
