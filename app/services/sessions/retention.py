"""Storage that does not grow with use: the sweep that deletes expired idempotency keys and
compile records no acknowledgement or report needs any more (app/storage/retention.py), in
small batches of short transactions, beside the requests.

Each batch is one transaction of one select and one delete by primary key, so an append waits
on it at most for one batch (SQLite's single writer), and never for the whole backlog.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import anyio
import anyio.lowlevel
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.storage import retention as store

log = logging.getLogger("ctxc")

BATCH = 500  # rows a batch deletes at most


@dataclass(frozen=True)
class Retention:
    """How long idempotency keys and compile records are kept, and the batch size."""

    keys: timedelta
    compiles: timedelta
    batch: int = BATCH


@dataclass(frozen=True)
class Pruned:
    keys: int
    compiles: int
    batches: int  # transactions that deleted something


async def prune(
    maker: async_sessionmaker[AsyncSession], retention: Retention, now: datetime
) -> Pruned:
    """Delete every idempotency key and compile record past ``retention`` at ``now``, a batch
    a transaction, until none is left."""
    async with maker() as db:
        keys, key_batches = await _prune_keys(db, now - retention.keys, retention.batch)
        compiles, batches = await _prune_compiles(db, now - retention.compiles, retention.batch)
    return Pruned(keys, compiles, key_batches + batches)


async def _prune_keys(db: AsyncSession, before: datetime, batch: int) -> tuple[int, int]:
    """The keys stored before ``before`` deleted: how many, in how many batches."""
    total = batches = 0
    while deleted := await store.delete_expired_keys(db, before, batch):
        await db.commit()
        total, batches = total + deleted, batches + 1
        await anyio.lowlevel.checkpoint()  # requests run between batches
    await db.commit()
    return total, batches


async def _prune_compiles(db: AsyncSession, before: datetime, batch: int) -> tuple[int, int]:
    """The compiles stored before ``before`` that are not kept, deleted: how many, in how
    many batches."""
    total = batches = 0
    after: tuple[datetime, str] | None = None
    while True:
        deleted, after = await store.delete_old_compiles(db, before, after, batch)
        await db.commit()
        total, batches = total + deleted, batches + bool(deleted)
        if after is None:
            return total, batches
        await anyio.lowlevel.checkpoint()


async def prune_forever(
    maker: async_sessionmaker[AsyncSession], retention: Retention, seconds: float
) -> None:
    """``prune`` now and then every ``seconds``, for the life of the process."""
    while True:
        try:
            pruned = await prune(maker, retention, datetime.now(UTC))
            if pruned.keys or pruned.compiles:
                log.info(
                    "retention: deleted %d idempotency key(s), %d compile record(s)",
                    pruned.keys,
                    pruned.compiles,
                )
        except Exception:  # the database may be away for a while: the next round retries
            log.exception("the retention sweep failed")
        await anyio.sleep(seconds)
