"""A write that grows a session brings the digest of its own view up to date before it answers.

An append or an import that makes a session long (or grows its tail past what a compile moves
the digest forward at) makes or moves the digest of the view a compile with no options reads:
the session's compiler and profile, in its context window. Without it the first compiles after a
bulk write would each read the whole history, the second beside the digest being made of it.
The work is the write's, on its tenant's CPU slots, in steps (``digesting.advance``); a failure
costs the write nothing (it is committed first) but the next compile reading more.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Row
from sqlalchemy.ext.asyncio import AsyncSession

from app.domain.compilers.base import Item, Snapshot
from app.domain.compilers.registry import Registry
from app.domain.models import Catalog
from app.domain.providers import ProviderProfile
from app.domain.sessions import SessionPk, TenantId
from app.domain.tokens import count_message
from app.services.compiling.digesting import Digester, Job, Outcome, Runner
from app.services.compiling.request import spec_of
from app.services.compiling.stored import History, item_of, items_of
from app.services.compiling.tails import KEEP_WINDOWS, MOVE_AT, View, long_history, view_of
from app.services.sessions import session_profile
from app.services.sessions.cache import MessageCache
from app.services.tenancy import cpu
from app.storage import compiles, digests, queries
from app.storage.digests import Stored
from app.storage.models import SessionRow

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Own:
    """A long session's own view: what a compile with no options reads a tail with."""

    row: SessionRow
    profile: ProviderProfile
    view: View
    keep_tokens: int


async def catch_up(
    digester: Digester,
    tenant: TenantId,
    session_id: str,
    registry: Registry,
    catalog: Catalog,
    cache: MessageCache,
) -> Outcome:
    """Make or move the digest of the session's own view, if it is long enough to need one
    (its history read whole only when it has none yet, one such read at a time): not one made
    for an execution whose traces it shows (moved as the view's, it would show them to it)."""
    try:
        async with digester.maker() as db:
            own = await _own(db, tenant, session_id, registry, catalog)
            if own is None:
                return "none"
            pk = SessionPk(own.row.pk)
            version = own.row.history_version
            running = (pk, own.view.key, None)
            # A job for no execution moving it: from where it leaves it (a job of an execution
            # with no traces may move it too: then one of the two moves is not kept).
            if digester.busy(running):
                await db.commit()  # no transaction held meanwhile
                await digester.settled(running)
            stored = await digests.load(db, pk, own.view.key, version)
            if stored is not None and not stored.digest.serves(None):
                return "none"  # an execution's, showing its traces: the view's compile replaces it
            if stored is None and digester.futile(running, version, own.row.last_seq):
                return "none"
            async with digester.reading(stored is None):
                job = await _job(db, digester, own, stored, cache)
                await db.commit()
                if job is None:
                    return "none"
                return await digester.now(job, datetime.now(UTC), Runner())
    except Exception:  # the write is committed: a digest not made costs a compile reading more
        log.warning("the digest of session %s could not be caught up", session_id, exc_info=True)
        return "failed"


async def _own(
    db: AsyncSession, tenant: TenantId, session_id: str, registry: Registry, catalog: Catalog
) -> Own | None:
    row = await queries.session_row(db, tenant, session_id)
    if row is None:
        return None
    profile = session_profile(row, catalog)
    view = view_of(spec_of(None, row.compiler), registry, profile)
    window = row.context_window or profile.context_window
    if view is None or not long_history(row, profile.encoding, window):
        return None
    return Own(row, profile, view, int(KEEP_WINDOWS * window))


async def _job(
    db: AsyncSession, digester: Digester, own: Own, stored: Stored | None, cache: MessageCache
) -> Job | None:
    """The job bringing ``stored`` (or a new digest) up to date: None when its tail is short."""
    pk, encoding = SessionPk(own.row.pk), own.profile.encoding
    if stored is None:
        rows = await compiles.rows_after(db, pk, 0, encoding)
    else:
        digest = stored.digest
        at = digests.Place(pk, own.view.key, own.row.history_version)
        total = int(getattr(own.row, queries.TOTAL_COLUMNS[encoding]))
        if await digester.tail_tokens(db, at, stored, encoding, total) < MOVE_AT * own.keep_tokens:
            return None  # what most appends find: nothing read but the session and digest
        rows = await digests.rows_from(db, pk, digest.needed, digest.upto, encoding)
    version = own.row.history_version
    # Kept for the next compile only if the rows are of the version read (a compaction that
    # committed since rewrote them in place).
    kept = cache if await digests.history_version(db, pk) == version else None
    history: History = (pk, version)
    items = await cpu.run_sync(_items, rows, history, kept, own.keep_tokens)
    encoder = cache.counter.encoder(encoding)
    snapshot = Snapshot(
        items=(),
        tenant="",
        now=datetime.now(UTC),
        count=lambda m: count_message(m, encoder),
        target=own.profile.output,
    )
    view, version = own.view, own.row.history_version
    return Job(pk, view.key, version, items, view.base, snapshot, own.keep_tokens, stored)


def _items(
    rows: Sequence[Row[Any]], history: History, cache: MessageCache | None, tail: int
) -> list[Item]:
    """The rows parsed; the last ``tail`` tokens of them (what the digest keeps, about what a
    compile reads once it has moved) kept in ``cache`` as a compile's read keeps them: the
    first compile after the write finds them parsed (and what the digest's making asked of
    them)."""
    if cache is None:
        return [item_of(r) for r in rows]
    start, tokens = len(rows), 0
    while start > 0 and tokens < tail:
        start -= 1
        tokens += rows[start].tokens
    return [item_of(r) for r in rows[:start]] + items_of(rows[start:], history, cache)
