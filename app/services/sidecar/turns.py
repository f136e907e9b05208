"""A sidecar turn's two writes: before it, which session and what is new; after it, the new
messages with the upstream's reply and its usage, in one transaction.

Nothing of a turn is stored until its model call succeeded (the new messages are compiled as
``pending``, app/services/compiling/): an upstream error or an agent gone mid-stream leaves the
session as it was, and the agent's retry finds it so. Only a fork writes before the call: it
stores the agent's history, which is what it is whatever the upstream answers.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from app.domain.errors import Conflict, NotFound
from app.domain.messages import Message
from app.domain.models import Catalog
from app.domain.sessions import SessionPk, TenantId
from app.domain.tokens import TokenCounter
from app.services.sessions import add_session
from app.services.sessions.cache import Entry
from app.services.sessions.calibration import learn
from app.services.sidecar import threads
from app.services.sidecar.threads import History, Sent
from app.storage import queries
from app.storage.models import SessionRow


@dataclass(frozen=True)
class Opened:
    """Where a turn stands once its history is matched to the stored one."""

    session_id: str
    history: History  # the request's, parsed (from where the session's part ends, at least)
    start: int  # the request's items from here on are new
    turns: int  # the thread's stored turns when read: a turn stored since is a race
    forked_to: str | None = None  # a fork: where the earlier history moved

    @property
    def new(self) -> Sequence[Entry]:
        """The request's messages the session does not hold, parsed and counted."""
        return self.history.entries[self.start - self.history.offset :]


async def open_turn(
    db: AsyncSession,
    counter: TokenCounter,
    tenant: TenantId,
    session_id: str,
    fields: Callable[[], Awaitable[dict[str, Any]]],
    sent: Sent,
    now: datetime,
    catalog: Catalog,
) -> Opened:
    """The session ``session_id`` (created with ``fields`` when missing), matched against the
    request's history ``sent``; a history that does not extend it forks it, unless it is
    another conversation (another root): that one continues the session of its root beside it
    (``<id>:thread-<n>``, made when first seen).

    The usual turn (a thread that the history extends) only reads, and parses only what follows
    the part the thread holds; a new session, a first thread or a fork write, under the
    session's lock, after matching again."""
    row = await queries.session_row(db, tenant, session_id)
    if row is not None:
        thread = await threads.thread_row(db, SessionPk(row.pk))
        if thread is not None and await threads.held(thread, sent):
            history = await sent.parse(thread.sent)
            start = await threads.new_start(db, row, thread, history)
            if start is not None:
                await db.commit()  # ends the reads
                return Opened(session_id, history, start, thread.turns)
        await db.commit()
    else:
        try:
            row = await add_session(db, tenant, session_id, await fields(), now, now, 0, catalog)
        except Conflict:  # created by a racing request since: use it
            row = await queries.session_row(db, tenant, session_id)
            if row is None:
                raise
    history = await sent.parse(0)
    pk = SessionPk(row.pk)
    if not await queries.lock_session(db, pk):
        raise NotFound("session", session_id)
    await db.refresh(row)
    thread = await threads.thread_row(db, pk)
    start = await threads.new_start(db, row, thread, history)
    forked_to = None
    beside = None
    if start is None and threads.other_root(row, history):
        beside = await _beside(db, tenant, row, history)
    if beside is not None:
        await db.commit()
        made, meta = fields, beside[1]

        async def beside_fields() -> dict[str, Any]:
            return {**(await made()), "metadata": meta}

        return await open_turn(db, counter, tenant, beside[0], beside_fields, sent, now, catalog)
    if start is None:
        row, forked_to = await threads.fork(db, counter, tenant, row, thread, history, now, catalog)
        start, turns = len(history.items), 0
    else:
        turns = thread.turns if thread else 0
        if thread is None:
            await threads.start_thread(db, row, history, start, now)
            row.meta = {**row.meta, threads.ROOT: threads.root(history)}
    await db.commit()
    return Opened(session_id, history, start, turns, forked_to)


async def _beside(
    db: AsyncSession, tenant: TenantId, row: SessionRow, history: History
) -> tuple[str, dict[str, Any]] | None:
    """The session of the conversation ``history`` starts, beside the one of ``row`` (under its
    lock): the one of its root, or a new one (its id and metadata); None past ``MAX_THREADS``
    (it forks then, as a history of the same root does)."""
    root, count = threads.root(history), int(row.meta.get(threads.THREADS, 0))
    for n in range(1, count + 1):
        sibling = await queries.session_row(db, tenant, f"{row.id}{threads.THREAD}{n}")
        if sibling is not None and sibling.meta.get(threads.ROOT) == root:
            return sibling.id, sibling.meta
    new = f"{row.id}{threads.THREAD}{count + 1}"
    if count >= threads.MAX_THREADS or len(new) > threads.MAX_THREAD_ID:
        return None  # its forks would need a longer id
    row.meta = {**row.meta, threads.THREADS: count + 1}
    return new, {threads.THREAD_OF: row.id, threads.ROOT: root}


@dataclass(frozen=True)
class Stored:
    """What a turn stored: the seqs of its new messages and reply, or where a race forked it."""

    first_seq: int | None
    last_seq: int | None
    forked_to: str | None = None


async def store_turn(
    db: AsyncSession,
    counter: TokenCounter,
    tenant: TenantId,
    opened: Opened,
    sent: Sent,
    reply: Message | Sequence[Message],
    compile_id: str,
    usage: dict[str, int] | None,
    now: datetime,
    catalog: Catalog,
    teaches: bool = True,
) -> Stored:
    """Store the turn: the request's new messages and the ``reply`` (one message, or the
    several a Responses output makes), the usage on the compile
    (what reactive compaction reads, and unless not ``teaches`` what calibrates its counts:
    not when the usage is of a longer request than the compile's), and the thread moved on;
    one transaction.

    A turn of the same session stored since this one opened (an agent racing itself) is
    checked again: when the history still extends the session, only what is new to it is
    stored; otherwise it forks, as it would have at the start."""
    row = await queries.session_row(db, tenant, opened.session_id)
    if row is None:
        raise NotFound("session", opened.session_id)
    pk = SessionPk(row.pk)
    if not await queries.lock_session(db, pk):
        raise NotFound("session", opened.session_id)
    thread = await threads.thread_row(db, pk)
    history, start = opened.history, opened.start
    forked_to = None
    if thread is None or thread.turns != opened.turns:
        history = history if history.offset == 0 else await sent.parse(0)
        found = await threads.new_start(db, row, thread, history)
        if found is None:
            row, forked_to = await threads.fork(
                db, counter, tenant, row, thread, history, now, catalog
            )
            pk, found = SessionPk(row.pk), len(history.items)
            thread = await threads.thread_row(db, pk)
        elif thread is None:
            thread = await threads.start_thread(db, row, history, found, now)
        start = found
    assert thread is not None
    new = list(history.entries[start - history.offset :])
    replies = [reply] if isinstance(reply, Message) else list(reply)
    messages: list[Message] = [m for m, _ in new] + replies
    counts: list[dict[str, int]] = [c for _, c in new] + [{} for _ in replies]
    first, last = await threads.store(db, counter, pk, messages, counts, now) or (None, None)
    await threads.advance(thread, history, replies, now)
    compiled = await queries.compile_row(db, pk, compile_id)
    if compiled is not None:  # not after a racing fork: that compile was of the other history
        compiled.reported_at = compiled.reported_at or now
        compiled.acknowledged_at = compiled.acknowledged_at or now
        if teaches:
            await learn(db, tenant, pk, compiled, usage, now)
        if usage:
            compiled.usage = usage
    await db.commit()
    return Stored(first, last, forked_to)


async def record_failure(
    db: AsyncSession, tenant: TenantId, session_id: str, compile_id: str, kind: str, now: datetime
) -> None:
    """The turn's model call failed (``kind``: ``prompt_too_long`` or ``error``): said on its
    compile, as an acknowledgement with ``error_kind`` says it; nothing else is written."""
    row = await queries.session_row(db, tenant, session_id)
    compiled = None if row is None else await queries.compile_row(db, SessionPk(row.pk), compile_id)
    if compiled is not None:
        compiled.reported_at = compiled.reported_at or now
        compiled.error_kind = kind
        await db.commit()
