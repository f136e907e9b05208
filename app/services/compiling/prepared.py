"""A write that moved a session's digest compiles the session as a compile with no options would.

The append (or import) that makes or moves the digest of a session's own view (``catching_up``)
leaves the first compile after it a tail it has not read and messages it has not shaped: after
a bulk write, a compile several times dearer than the ones after it. So the write, having moved
the digest, runs that compile too (``session.compile_view``: the session's compiler and profile,
no options), and keeps what it made as every compile keeps it: the tail it read
(``MessageCache.tails``, which a compile of the same view with other options grows) and its
output (``MessageCache.views``, which the same compile answers from). It records nothing, runs
no compaction and leaves the cursor where it is. Only a repeatable compile that reads a tail is
prepared (its output may be kept), and only when kept outputs are on; a failure costs the write
nothing but the next compile doing the work.
"""

from __future__ import annotations

import logging
from typing import Literal

from app.services.compiling.request import Context, Options
from app.services.compiling.session import compile_view, load, plan_for
from app.storage.db import autocommit

log = logging.getLogger(__name__)
Outcome = Literal["prepared", "none", "failed"]


async def prepare(ctx: Context, session_id: str) -> Outcome:
    """Compile the session ``session_id`` as a compile with no options would and keep the
    output (none: that compile's output is not kept, or it reads no tail)."""
    options = Options()
    try:
        await autocommit(ctx.session)
        loaded = await load(ctx, session_id, options)
        plan = await plan_for(ctx, loaded, options)
        if plan.key is None or plan.view is None:
            return "none"
        await compile_view(ctx, loaded, plan, options)
        return "prepared"
    except Exception:  # the write is committed: a compile not prepared is one still to make
        log.warning("the compile of session %s could not be prepared", session_id, exc_info=True)
        return "failed"
