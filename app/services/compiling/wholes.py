"""A short history read whole, kept for the session's next compile.

Within a history version stored rows are only appended (a compaction, the one thing that
deletes or rewrites them, moves the version), and seqs are reserved under the session's row
lock, so rows commit in seq order. What a full compile read of a history short enough to read
whole (``tails.long_history`` is false) is therefore still the history's opening while the
version is the same: the next compile reads only the rows stored after it, as a long history's
kept tail does (``tails``). Kept in ``MessageCache.tails``, by tenant, session and encoding.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import cast

from sqlalchemy.ext.asyncio import AsyncSession

from app.domain.compilers.base import Item
from app.domain.sessions import SessionPk, TenantId
from app.services.compiling.stored import BYTES_PER_TOKEN, OVERHEAD, few, items_of
from app.services.compiling.tails import ONE_TAIL_SHARE
from app.services.sessions.cache import MessageCache
from app.services.tenancy import cpu
from app.storage import compiles, digests


@dataclass(frozen=True)
class Whole:
    """A history's stored messages as read, parsed."""

    version: int  # the history's, when read
    items: tuple[Item, ...]
    size: int  # what keeping it costs, estimated in bytes
    kept: bool = False  # grown from one kept from an earlier compile

    @property
    def after(self) -> int:
        """The last seq read (0 when none)."""
        return self.items[-1].seq if self.items else 0


async def read_whole(
    db: AsyncSession,
    cache: MessageCache,
    tenant: TenantId,
    at: tuple[SessionPk, int],
    encoding: str,
) -> Whole:
    """The stored messages of the history ``at`` (a session's pk and its history version):
    what the last whole read of it kept and the rows stored since, or all of them; kept for the
    next compile."""
    pk, version = at
    key = (tenant, pk, f"whole:{encoding}")
    found = cast(Whole | None, cache.tails.get(key)) if cache.tails.max_bytes else None
    kept = found if found is not None and found.version == version else None
    rows = await compiles.rows_after(db, pk, kept.after if kept else 0, encoding)
    if kept is not None and await digests.history_version(db, pk) != version:
        # A compaction since the session was read: its rows are of another history. Read them
        # all, as a compile that kept nothing would.
        kept = None
        rows = await compiles.rows_after(db, pk, 0, encoding)
    new = items_of(rows, at, cache) if few(rows) else await cpu.run_sync(items_of, rows, at, cache)
    whole = _grown(kept, version, new)
    if whole.size <= cache.tails.max_bytes // ONE_TAIL_SHARE:
        cache.tails.put(key, whole, whole.size, replace=True)
    else:
        cache.tails.pop(key)
    return whole


def _grown(kept: Whole | None, version: int, new: Sequence[Item]) -> Whole:
    """``kept`` (or nothing) with the ``new`` items after it."""
    size = sum(BYTES_PER_TOKEN * i.tokens + OVERHEAD for i in new)
    if kept is None:
        return Whole(version, tuple(new), OVERHEAD + size)
    return Whole(version, (*kept.items, *new), kept.size + size, kept=True)
