"""Reading the tail of a long history: its newest part and the digest of the rest.

A session compile that trims reads the newest part of a long history and a digest of the rest
(app/domain/compilers/digests.py; made and moved forward by ``digesting``). What it read is kept
(``MessageCache.tails``, by tenant, session and view), so the next compile of the same history
with the same digest reads only the rows stored since, and asks the digest's ids only about the
ids they add: within a history version stored rows are only appended (a compaction that rewrites
any moves the version), and a digest's generation and upto name what it holds.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy.ext.asyncio import AsyncSession

from app.domain.compilers.base import Compiler, Elided, Item
from app.domain.compilers.digests import candidate_ids, earlier
from app.domain.compilers.registry import Registry, build_base, built_in
from app.domain.compilers.spec import CompilerSpec
from app.domain.providers import ProviderProfile
from app.domain.sessions import SessionPk, TenantId
from app.domain.validity.repair import Earlier
from app.services.compiling.stored import BYTES_PER_TOKEN, OVERHEAD, items_of, tool_ids
from app.services.sessions.cache import MessageCache, canonical_json
from app.services.tenancy import cpu
from app.storage import digests
from app.storage.digests import Stored
from app.storage.models import SessionRow

# A digest keeps this many context windows of rounds after it (or as many times what the compile
# sent, if more), and is moved forward once the tail read with it has MOVE_AT times that: a
# compile reads 1.1 to 1.65 windows of a long history.
KEEP_WINDOWS = 1.1
MOVE_AT = 1.5
TRIMMING = frozenset({"token_limit", "window"})
# New rows parsed on the event loop, at most (a worker thread round trip costs more).
FEW_ROWS = 64


@dataclass(frozen=True)
class View:
    """What a digest is made for: a base compiler, for a target shape and encoding."""

    key: str
    base: Compiler


def long_history(row: SessionRow, encoding: str, context_window: int) -> bool:
    """Whether the session is long enough in ``context_window`` for a digest to be made of it
    (its running token totals): a shorter one is read whole, with no digest looked up."""
    stored = row.tokens_o200k if encoding == "o200k_base" else row.tokens_cl100k
    return stored >= MOVE_AT * KEEP_WINDOWS * context_window


def view_of(spec: CompilerSpec, registry: Registry, profile: ProviderProfile) -> View | None:
    """The view of a compile that may read a tail: built-ins only (a plug-in may read any of
    the history), with a step that trims (without one, all of it is sent)."""
    if not built_in(spec, registry) or not any(p.name in TRIMMING for p in spec.decorators):
        return None
    named = [spec.base.name, spec.base.params, profile.output, profile.encoding]
    return View(hashlib.sha256(canonical_json(named)).hexdigest(), build_base(spec, registry))


@dataclass(frozen=True)
class Tail:
    """The newest part of a history, the digest of the rest, and what its ids ask of it."""

    stored: Stored
    version: int  # the history's, when read
    items: Sequence[Item]  # the digest's needed rounds, then the tail, in seq order
    ids: tuple[str, ...]  # the tool call ids the tail holds (``tool_ids``), as read
    asked: frozenset[str]  # what the digest's ids were asked about (``candidate_ids``)
    calls: frozenset[str]
    held: frozenset[str]
    size: int  # what keeping it costs, estimated in bytes

    def reread(self, items: Sequence[Item]) -> list[Item]:
        return [i for i in items if i.seq < self.stored.digest.upto]

    def earlier(self, items: Sequence[Item]) -> Earlier:
        return earlier(self.asked, set(self.calls), set(self.held), self.reread(items))

    def elided(self, items: Sequence[Item]) -> Elided:
        return self.stored.digest.elided(self.earlier(items))

    @property
    def tokens(self) -> int:
        """The tail's stored tokens."""
        return sum(i.tokens for i in self.items if i.seq >= self.stored.digest.upto)

    @property
    def after(self) -> int:
        """The first seq a later read of the same history and digest reads from."""
        last = self.items[-1].seq if self.items else 0
        return max(last + 1, self.stored.digest.upto)


async def read_tail(
    db: AsyncSession,
    row: SessionRow,
    view: View,
    execution_id: str | None,
    profile: ProviderProfile,
    cache: MessageCache,
    tenant: TenantId,
) -> Tail | None:
    """The tail to compile with the view's digest of the session ``row``'s history, if there is
    one for this history and this execution: what the last read of it kept and the rows stored
    since, or read after the digest (the items parsed, from the ``cache`` of them when they are
    there); checked to be of the same history (a compaction between two reads changes it)."""
    pk, version = SessionPk(row.pk), row.history_version
    key = (tenant, pk, view.key)
    kept = cache.tails.get(key)
    if kept is not None and not await _current(db, kept, (pk, view.key, version)):
        kept = None
    stored = kept.stored if kept else await digests.load(db, pk, view.key, version)
    if stored is None or not stored.digest.serves(execution_id):
        return None
    tail = await _read(db, (pk, view.key, version), stored, kept, profile, cache)
    if await digests.history_version(db, pk) != version:
        return None
    cache.tails.put(key, tail, tail.size, replace=True)
    return tail


async def _current(db: AsyncSession, kept: Tail, at: tuple[SessionPk, str, int]) -> bool:
    """Whether ``kept`` is of the history ``at`` (a session, a view and a history version) and
    of the view's digest as it is."""
    pk, view_key, version = at
    return kept.version == version and await digests.unmoved(db, pk, view_key, kept.stored)


async def _read(
    db: AsyncSession,
    at: tuple[SessionPk, str, int],
    stored: Stored,
    kept: Tail | None,
    profile: ProviderProfile,
    cache: MessageCache,
) -> Tail:
    """``kept`` and what was stored after it, or (without it) the tail after ``stored``, of
    the history ``at`` (a session, a view and a history version)."""
    (pk, view_key, version), digest, encoding = at, stored.digest, profile.encoding
    if kept is None:
        rows = await digests.rows_from(db, pk, digest.needed, digest.upto, encoding)
    else:
        rows = await digests.rows_from(db, pk, (), kept.after, encoding)
    history = (pk, version)
    if len(rows) <= FEW_ROWS:
        new = items_of(rows, history, cache)
    else:
        new = await cpu.run_sync(items_of, rows, history, cache)
    ids = (*(kept.ids if kept else ()), *tool_ids(new, digest.upto))
    asked = candidate_ids(ids, profile.output, digest)
    new_asked = asked - (kept.asked if kept else set())
    calls, held = await digests.ids_among(db, pk, view_key, stored, new_asked)
    items = (*kept.items, *new) if kept else tuple(new)
    if kept is not None:
        calls, held = calls | kept.calls, held | kept.held
    size = (kept.size if kept else 0) + sum(BYTES_PER_TOKEN * i.tokens + OVERHEAD for i in new)
    return Tail(stored, version, items, ids, asked, frozenset(calls), frozenset(held), size)
