"""Reading the tail of a long history: its newest part and the digest of the rest.

A session compile that trims reads the newest part of a long history and a digest of the rest
(app/domain/compilers/digests.py; made and moved forward by ``digesting``). What it read is kept
(``MessageCache.tails``, by tenant, session and the key its digest is kept under), so the next
compile of the same history with the same digest reads only the rows stored since, and asks the
digest's ids only about the ids they add: within a history version stored rows are only
appended (a compaction that rewrites any moves the version), and a digest's generation and upto
name what it holds.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, cast

from sqlalchemy import Row
from sqlalchemy.ext.asyncio import AsyncSession

from app.domain.compilers.base import Compiler, Elided, Item
from app.domain.compilers.digests import Candidates, earlier
from app.domain.compilers.registry import Registry, build_base, built_in
from app.domain.compilers.spec import CompilerSpec
from app.domain.providers import ProviderProfile
from app.domain.sessions import SessionPk, TenantId
from app.domain.validity.repair import Earlier
from app.services.compiling.stored import OVERHEAD, kept_bytes, parse, tool_ids
from app.services.sessions.cache import MessageCache, canonical_json
from app.storage import digests
from app.storage.digests import Place, Stored
from app.storage.models import SessionRow

# A digest keeps this many context windows of rounds after it (or as many times what the compile
# sent, if more), and is moved forward once the tail read with it has MOVE_AT times that: a
# compile reads 1.1 to 1.65 windows of a long history.
KEEP_WINDOWS = 1.1
MOVE_AT = 1.5
TRIMMING = frozenset({"token_limit", "window"})
# What keeping an id (a string in a set) costs, estimated in bytes.
ID_BYTES = 64
# One tail takes at most this share of what tails may take.
ONE_TAIL_SHARE = 8
# What a tail is kept by: its tenant, its session's pk and its digest's key (``keys``).
Key = tuple[str, str, str]


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


def own_key(view_key: str, execution_id: str) -> str:
    """The key a view's digest for one execution is kept under when that execution has trace
    messages in the history (shown below its upto, the digest serves no compile of another)."""
    return hashlib.sha256(f"{view_key}\x1f{execution_id}".encode()).hexdigest()


def keys(view_key: str, execution_id: str | None) -> tuple[str, ...]:
    """Where a compile for ``execution_id`` looks for its view's digest, in order."""
    return (view_key,) if execution_id is None else (own_key(view_key, execution_id), view_key)


@dataclass(frozen=True)
class Tail:
    """The newest part of a history, the digest of the rest, and what its ids ask of it."""

    stored: Stored
    version: int  # the history's, when read
    items: Sequence[Item]  # the digest's needed rounds, then the tail, in seq order
    # What the digest's ids were asked about: ``candidate_ids`` of the tool call ids the tail
    # holds (``tool_ids``), as read.
    candidates: Candidates
    calls: frozenset[str]
    held: frozenset[str]
    size: int  # what keeping it costs, estimated in bytes
    tokens: int = 0  # its stored tokens (of the items from the digest's upto on)
    kept: bool = False  # grown from a tail kept from an earlier compile

    def reread(self, items: Sequence[Item]) -> list[Item]:
        return [i for i in items if i.seq < self.stored.digest.upto]

    def earlier(self, items: Sequence[Item]) -> Earlier:
        return earlier(self.candidates.asked, self.calls, self.held, self.reread(items))

    def elided(self, items: Sequence[Item]) -> Elided:
        return self.stored.digest.elided(self.earlier(items))

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
    one for this history and this execution (its own, else the view's: ``keys``): what the last
    read of it kept and the rows stored since, or read after the digest (the items parsed, from
    the ``cache`` of them when they are there). Each read checks, in its own statement, that the
    history and the digest are still those it reads for (``digests.rows_still``, ``ids_still``):
    a compaction or a new digest between two reads changes them."""
    for view_key in keys(view.key, execution_id):
        at = Place(SessionPk(row.pk), view_key, row.history_version)
        key = (tenant, at.pk, view_key)
        kept = _reusable(cache, key, at, execution_id)
        tail = None if kept is None else await _read(db, at, kept.stored, kept, profile, cache)
        if tail is None:
            if kept is not None:  # not the digest's any more
                cache.tails.pop(key)
            stored = await digests.load(db, at.pk, view_key, at.version)
            if stored is None or not stored.digest.serves(execution_id):
                continue
            tail = await _read(db, at, stored, None, profile, cache)
        if tail is None:
            cache.tails.pop(key)
            return None
        keep_read(cache, key, tail, tail.size)
        return tail
    return None


def _reusable(cache: MessageCache, key: Key, at: Place, execution_id: str | None) -> Tail | None:
    """The tail kept under ``key``, if it is of the history ``at`` and serves the compile; the
    reads that grow it check it is still the digest's."""
    kept = cast(Tail | None, kept_read(cache, key))
    if kept is None or kept.version != at.version:
        return None
    return kept if kept.stored.digest.serves(execution_id) else None


async def _read(
    db: AsyncSession,
    at: Place,
    stored: Stored,
    kept: Tail | None,
    profile: ProviderProfile,
    cache: MessageCache,
) -> Tail | None:
    """``kept`` and the rows stored since, or (without it) the tail after ``stored`` read
    anew: its needed rounds and the rows from its upto on (None: the history or the digest is
    not what ``stored`` says any more)."""
    if kept is not None:
        rows = await digests.rows_still(db, at, stored, (), kept.after, profile.encoding)
        grown = None if rows is None else await _grown(db, at, kept, rows, profile, cache)
        return None if grown is None else replace(grown, kept=True)
    digest = stored.digest
    rows = await digests.rows_still(db, at, stored, digest.needed, digest.upto, profile.encoding)
    if rows is None:
        return None
    return await _grown(db, at, _empty(stored, at.version), rows, profile, cache)


def kept_read(cache: MessageCache, key: Key) -> object | None:
    """What a compile's read kept under ``key`` (a tail, or a short history read whole: none
    looked up when nothing is kept)."""
    return cache.tails.get(key) if cache.tails.max_bytes else None


def keep_read(cache: MessageCache, key: Key, read: object, size: int) -> None:
    """Keep ``read`` (of ``size`` estimated bytes) under ``key`` for the next compile, unless it
    would take more than a share of what kept reads may."""
    if size <= cache.tails.max_bytes // ONE_TAIL_SHARE:
        cache.tails.put(key, read, size, replace=True)
    else:
        cache.tails.pop(key)


def _empty(stored: Stored, version: int) -> Tail:
    """A tail of ``stored`` with nothing read yet."""
    digest = stored.digest
    ranges = len(digest.needed) + len(digest.invalid) + len(digest.gap)
    size = OVERHEAD + ID_BYTES * (len(digest.suffixes) + len(digest.traces) + ranges)
    none: frozenset[str] = frozenset()
    return Tail(stored, version, (), Candidates(), none, none, size)


async def _grown(
    db: AsyncSession,
    at: Place,
    tail: Tail,
    rows: Sequence[Row[Any]],
    profile: ProviderProfile,
    cache: MessageCache,
) -> Tail | None:
    """``tail`` with the stored ``rows`` after it, and what the digest's ids answer about the
    ids they add (None: the history or the digest changed since the tail was read)."""
    stored = tail.stored
    new = await parse(rows, (at.pk, at.version), cache)
    ids = tool_ids(new, stored.digest.upto)
    candidates = tail.candidates.more(ids, profile.output, stored.digest)
    asked = candidates.asked - tail.candidates.asked
    found = await digests.ids_still(db, at, stored, asked)
    if found is None:
        return None
    calls, held = found
    added = 2 * len(ids) + len(asked) + len(calls) + len(held)  # an id, and a use of its base
    size = tail.size + ID_BYTES * added + kept_bytes(new)
    items = (*tail.items, *new)
    return replace(
        tail,
        items=items,
        candidates=candidates,
        tokens=tail.tokens + sum(i.tokens for i in new if i.seq >= stored.digest.upto),
        calls=tail.calls | calls,
        held=tail.held | held,
        size=size,
    )
