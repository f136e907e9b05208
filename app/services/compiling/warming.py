"""A write that moved a session's digest warms the compile with no options for the next reader.

The append (or import) that makes or moves the digest of a session's own view (``catching_up``)
leaves the first compile after it a tail it has not read and messages it has not shaped: after
a bulk write, a compile several times dearer than the ones after it. So the write, having moved
the digest, runs that compile too, from the tail (``session.compile_tail``: the session's compiler
and profile, no options), in its own request on its tenant's CPU slots, and keeps what it made as
a compile keeps it: the tail it read (``MessageCache.tails``, which a compile of the same view
with other options grows) and its output (``MessageCache.views``, which the same compile answers
from). One warmed output is kept per session: the one the last write warmed replaces it (a
write that warms an older state of the session after a later write warmed keeps nothing). It
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

from app.domain.compiling import NothingToSend, Output
from app.domain.errors import NotFound
from app.services.compiling import remembered
from app.services.compiling.remembered import ViewKey
from app.services.compiling.request import Context, Options
from app.services.compiling.session import compile_tail, load, plan_for
from app.services.sessions.cache import MessageCache
from app.storage.db import autocommit

log = logging.getLogger(__name__)
Outcome = Literal["warmed", "none", "failed"]
State = tuple[int, int]  # a session's history version and last seq


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
    session = (str(ctx.tenant), str(loaded.pk))
    state = (loaded.row.history_version, loaded.row.last_seq)
    return "warmed" if _keep(ctx.cache, session, state, plan.key, compiled.output) else "none"


def _keep(
    cache: MessageCache, session: tuple[str, str], state: State, key: ViewKey, output: Output
) -> bool:
    """Keep ``output`` as the session's warmed one in place of the one before, unless a write
    of a later ``state`` (history version, last seq) warmed first."""
    before = cache.warmed.get(session)
    if before is not None:
        if before[0] > state:
            return False
        cache.views.pop(before[1])
    cache.views.put(key, output, remembered.size_of(output))
    cache.warmed[session] = (state, key)
    return True
