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
from app.domain.sessions import SessionPk, TenantId
from app.services.sessions import Stamp, add_session
from app.services.sessions.cache import Entry
from app.services.sessions.calibration import learn
from app.services.sessions.messages import Writer
from app.services.sidecar import threads
from app.services.sidecar.threads import History, Sent
from app.storage import queries
from app.storage.models import ProxyThreadRow, SessionRow


@dataclass(frozen=True)
class Opened:
    """Where a turn stands once its history is matched to the stored one."""

    session_id: str
    history: History  # the request's, parsed (from where the session's part ends, at least)
    start: int  # the request's items from here on are new
    turns: int  # the thread's stored turns when read: a turn stored since is a race
    forked_to: str | None = None  # a fork: where the earlier history moved
    # A turn that only read: the session row and its tenant's name as read, for the compile.
    read: tuple[SessionRow, str] | None = None

    @property
    def new(self) -> Sequence[Entry]:
        """The request's messages the session does not hold, parsed and counted."""
        return self.history.entries[self.start - self.history.offset :]


Fields = Callable[[], Awaitable[dict[str, Any]]]


async def open_turn(w: Writer, session_id: str, fields: Fields, sent: Sent) -> Opened:
    """The session ``session_id`` (created with ``fields`` when missing), matched against the
    request's history ``sent``; a history that does not extend it forks it, unless it is
    another conversation (another root): that one continues a conversation beside it
    (``<id>:thread-<n>``, made when first seen).

    The usual turn (a thread that the history extends) only reads, and parses only what follows
    the part the thread holds; a new session, a first thread or a fork write, under the
    session's lock, after matching again."""
    found = await queries.session_and_thread(w.db, w.tenant, session_id)
    if found is not None and (opened := await _extending(w.db, *found, session_id, sent)):
        return opened
    row = found[0] if found is not None else await _made(w, session_id, fields)
    history = await sent.parse(0)
    if not await queries.lock_session(w.db, SessionPk(row.pk)):
        raise NotFound("session", session_id)
    await w.db.refresh(row)
    thread = await threads.thread_row(w.db, SessionPk(row.pk))
    start = await threads.new_start(w.db, row, thread, history)
    if start is None and threads.other_root(thread, history):
        beside = await _beside(w, row, history)
        if beside is not None:
            await w.db.commit()
            return await open_turn(w, beside[0], _with_metadata(fields, beside[1]), sent)
    return await _matched(w, row, thread, history, start)


async def _extending(
    db: AsyncSession,
    row: SessionRow,
    thread: ProxyThreadRow | None,
    tenant_name: str,
    session_id: str,
    sent: Sent,
) -> Opened | None:
    """The turn, when its history extends the session's ``thread`` (read only); None
    otherwise."""
    opened = None
    if thread is not None and await threads.held(thread, sent):
        history = await sent.parse(thread.sent)
        start = await threads.new_start(db, row, thread, history)
        if start is not None:
            opened = Opened(session_id, history, start, thread.turns, read=(row, tenant_name))
    await db.commit()  # ends the reads
    return opened


async def _made(w: Writer, session_id: str, fields: Fields) -> SessionRow:
    """The session ``session_id``, made with ``fields``, or made by a racing request since."""
    try:
        made = await fields()
        return await add_session(w.db, w.tenant, session_id, made, Stamp.new(w.now), w.catalog)
    except Conflict:
        row = await queries.session_row(w.db, w.tenant, session_id)
        if row is None:
            raise
        return row


async def _matched(
    w: Writer,
    row: SessionRow,
    thread: ProxyThreadRow | None,
    history: History,
    start: int | None,
) -> Opened:
    """The turn of ``history`` on the locked session ``row``: a fork when it does not extend
    it (``start`` None), the session's first thread when it has none; committed."""
    forked_to, turns = None, thread.turns if thread else 0
    if start is None:
        row, forked_to = await threads.fork(w, row, thread, history)
        start, turns = len(history.items), 0
    elif thread is None:
        await threads.start_thread(w.db, row, history, start, w.now)
    await w.db.commit()
    return Opened(row.id, history, start, turns, forked_to)


def _with_metadata(fields: Fields, metadata: dict[str, Any]) -> Fields:
    async def made() -> dict[str, Any]:
        return {**(await fields()), "metadata": metadata}

    return made


async def _beside(
    w: Writer, row: SessionRow, history: History
) -> tuple[str, dict[str, Any]] | None:
    """The session of the conversation ``history`` belongs to, beside the one of ``row`` (under
    its lock), and its metadata: the one of its root that it extends, else a new one, else
    (past ``MAX_THREADS``) the latest of its root, which it forks; None when there is none of
    its root either (it forks ``row`` then)."""
    root = threads.root(history)
    found = await queries.threads_beside(w.db, w.tenant, row.id, root, threads.MAX_THREADS)
    for sibling, thread in found:
        if await threads.extends(thread, history):
            return sibling.id, sibling.meta
    count = int(row.meta.get(threads.THREADS, 0))
    new = f"{row.id}{threads.THREAD}{count + 1}"
    if count < threads.MAX_THREADS and len(new) <= threads.MAX_THREAD_ID:
        row.meta = {**row.meta, threads.THREADS: count + 1}
        return new, {threads.THREAD_OF: row.id}
    return (found[0][0].id, found[0][0].meta) if found else None


@dataclass(frozen=True)
class Stored:
    """What a turn stored: the seqs of its new messages and reply, or where a race forked it."""

    first_seq: int | None
    last_seq: int | None
    forked_to: str | None = None


@dataclass(frozen=True)
class Outcome:
    """What the upstream answered a turn: the ``reply`` (one message, or the several a Responses
    output makes) and its ``usage``, for the compile ``compile_id``; ``teaches``: whether the
    usage calibrates the compile's counts (not when it is of a longer request than the
    compile's)."""

    reply: Sequence[Message]
    compile_id: str
    usage: dict[str, int] | None
    teaches: bool = True


async def store_turn(w: Writer, opened: Opened, sent: Sent, outcome: Outcome) -> Stored:
    """Store the turn: the request's new messages and the reply, the usage on the compile (what
    reactive compaction reads, and what calibrates its counts), and the thread moved on; one
    transaction.

    A turn of the same session stored since this one opened (an agent racing itself) is
    checked again: when the history still extends the session, only what is new to it is
    stored; otherwise it forks, as it would have at the start."""
    row = await queries.session_row(w.db, w.tenant, opened.session_id)
    if row is None or not await queries.lock_session(w.db, SessionPk(row.pk)):
        raise NotFound("session", opened.session_id)
    thread = await threads.thread_row(w.db, SessionPk(row.pk))
    history, start, forked_to = opened.history, opened.start, None
    if thread is None or thread.turns != opened.turns:
        history = history if history.offset == 0 else await sent.parse(0)
        row, thread, start, forked_to = await _rematched(w, row, thread, history)
    new = list(history.entries[start - history.offset :])
    replies = list(outcome.reply)
    messages: list[Message] = [m for m, _ in new] + replies
    counts: list[dict[str, int]] = [c for _, c in new] + [{} for _ in replies]
    pk = SessionPk(row.pk)
    first, last = await threads.store(w, pk, messages, counts) or (None, None)
    await threads.advance(thread, history, replies, w.now)
    await _reported(w, pk, outcome)
    await w.db.commit()
    return Stored(first, last, forked_to)


async def _rematched(
    w: Writer, row: SessionRow, thread: ProxyThreadRow | None, history: History
) -> tuple[SessionRow, ProxyThreadRow, int, str | None]:
    """A turn raced by another of the same session, matched again (``history`` parsed whole):
    the session and thread it goes on, where its new part starts, and where a fork moved the
    history it does not extend."""
    found = await threads.new_start(w.db, row, thread, history)
    if found is None:
        row, forked_to = await threads.fork(w, row, thread, history)
        forked = await threads.thread_row(w.db, SessionPk(row.pk))
        assert forked is not None
        return row, forked, len(history.items), forked_to
    if thread is None:
        thread = await threads.start_thread(w.db, row, history, found, w.now)
    return row, thread, found, None


async def _reported(w: Writer, pk: SessionPk, outcome: Outcome) -> None:
    """The outcome said on its compile: reported and acknowledged, its usage and what it
    teaches the calibration; not after a racing fork (that compile was of the other history)."""
    compiled = await queries.compile_row(w.db, pk, outcome.compile_id)
    if compiled is None:
        return
    compiled.reported_at = compiled.reported_at or w.now
    compiled.acknowledged_at = compiled.acknowledged_at or w.now
    if outcome.teaches:
        await learn(w.db, w.tenant, pk, compiled, outcome.usage, w.now)
    if outcome.usage:
        compiled.usage = outcome.usage


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
