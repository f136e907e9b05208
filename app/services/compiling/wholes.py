"""A short history read whole, kept for the session's next compile.

Within a history version stored rows are only appended (a compaction, the one thing that
deletes or rewrites them, moves the version), and seqs are reserved under the session's row
lock, so rows commit in seq order. What a full compile read of a history short enough to read
whole (``tails.long_history`` is false) is therefore still the history's opening while the
version is the same: the next compile reads only the rows stored after it, as a long history's
kept tail does (``tails``). Kept in ``MessageCache.tails``, by tenant, session and encoding.

The rows since are read from the last one kept on, which must be the row kept (its seq and the
time it was written: a database restored from an older copy reuses seqs), with the history's
version in the same statement (a compaction between the session's read and theirs rewrites the
rows). Either failing, all the rows are read, as without a kept read. Rows are always read with
the version they are of, and kept under it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, cast

from sqlalchemy import Row
from sqlalchemy.ext.asyncio import AsyncSession

from app.domain.compilers.base import Item
from app.domain.sessions import SessionPk, TenantId
from app.services.compiling.stored import OVERHEAD, kept_bytes, parse
from app.services.compiling.tails import keep_read, kept_read
from app.services.sessions.cache import MessageCache
from app.storage import compiles


@dataclass(frozen=True)
class Whole:
    """A history's stored messages as read, parsed."""

    version: int  # the history's, when read
    items: tuple[Item, ...]
    size: int  # what keeping it costs, estimated in bytes
    last_at: Any = None  # when the last row read was written
    kept: bool = False  # grown from one kept from an earlier compile

    @property
    def after(self) -> int:
        """The last seq read (0 when none)."""
        return self.items[-1].seq if self.items else 0

    def continued_by(self, rows: Sequence[Row[Any]]) -> bool:
        """Whether ``rows``, read from the last seq read on, start with the very row read last
        (not another written since at its seq: a database restored from an older copy)."""
        if not self.items:
            return True
        return bool(rows) and rows[0].seq == self.after and rows[0].at == self.last_at


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
    found = cast(Whole | None, kept_read(cache, key))
    kept = found if found is not None and found.version == version else None
    after = max(kept.after - 1, 0) if kept else 0
    now, rows = await compiles.versioned_rows_after(db, pk, after, encoding)
    if kept is not None:
        if now == version and kept.continued_by(rows):
            rows = rows[1:] if kept.items else rows
        else:  # rewritten since (a compaction, a restore): all its rows
            kept = None
            now, rows = await compiles.versioned_rows_after(db, pk, 0, encoding)
    version = version if now is None else now  # the rows' own (None: the session is gone)
    new = await parse(rows, (pk, version), cache)
    whole = _grown(kept, version, new, rows[-1].at if rows else None)
    keep_read(cache, key, whole, whole.size)
    return whole


def _grown(kept: Whole | None, version: int, new: Sequence[Item], last_at: Any) -> Whole:
    """``kept`` (or nothing) with the ``new`` items after it, the last written at ``last_at``."""
    size = kept_bytes(new)
    if kept is None:
        return Whole(version, tuple(new), OVERHEAD + size, last_at)
    if not new:
        return replace(kept, kept=True)
    return Whole(version, (*kept.items, *new), kept.size + size, last_at, kept=True)
