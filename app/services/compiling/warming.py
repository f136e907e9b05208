"""A write that moved a session's digest warms the compile with no options for the next reader.

The append (or import) that makes or moves the digest of a session's own view (``catching_up``)
leaves the first compile after it a tail it has not read and messages it has not shaped: after
a bulk write, a compile several times dearer than the ones after it. So the write, having moved
the digest, runs that compile too, from the tail (``session.compile_tail``: the session's compiler
and profile, no options), in its own request on its tenant's CPU slots, and keeps what it made as
a compile keeps it: the tail it read (``MessageCache.tails``, which a compile of the same view
with other options grows) and its output (``MessageCache.views``, which the same compile answers
from). One warmed output is kept per session: the one the last write warmed replaces it. It
records nothing, runs no compaction and leaves the cursor where it is. Only a repeatable compile
that reads a tail is warmed (the caches are a worker's: a compile answered by another worker
does the work); a history the tail is not enough for is not read whole on the write's path; a
failure costs the write nothing but the next compile doing the work.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Literal

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.domain.compiling import NothingToSend
from app.domain.errors import NotFound
from app.services.compiling import remembered
from app.services.compiling.request import Context, Options
from app.services.compiling.session import compile_tail, load, plan_for
from app.storage.db import autocommit

log = logging.getLogger(__name__)
Outcome = Literal["warmed", "none", "failed"]


async def warm(
    maker: async_sessionmaker[AsyncSession],
    context: Callable[[AsyncSession], Context],
    session_id: str,
) -> Outcome:
    """Compile the session ``session_id`` from its tail as a compile with no options would, in
    a database session of ``maker`` (``context``: the compile's context in it), and keep the
    output (none: that output is not kept, or the tail is not enough)."""
    try:
        async with maker() as db:
            return await _warm(context(db), session_id)
    except (NotFound, NothingToSend):  # deleted since the write, or nothing to send yet
        return "none"
    except Exception:  # the write is committed: a compile not warmed is one still to make
        log.warning("the compile of session %s could not be warmed", session_id, exc_info=True)
        return "failed"


async def _warm(ctx: Context, session_id: str) -> Outcome:
    options = Options()
    await autocommit(ctx.session)
    loaded = await load(ctx, session_id, options)
    plan = await plan_for(ctx, loaded, options)
    if plan.key is None or (compiled := await compile_tail(ctx, loaded, plan, options)) is None:
        return "none"
    cache, session = ctx.cache, (str(ctx.tenant), str(loaded.pk))
    if (before := cache.warmed.get(session)) is not None:
        cache.views.pop(before)
    cache.views.put(plan.key, compiled.output, remembered.size_of(compiled.output))
    cache.warmed[session] = plan.key
    return "warmed"
