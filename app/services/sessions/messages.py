"""Appending and reading messages."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession

from app.domain.errors import Conflict, InvalidInput, NotFound
from app.domain.formats.convert import Format, parse_messages
from app.domain.messages import Message, ToolCallPart, ToolResultPart
from app.domain.models import Catalog
from app.domain.sessions import SessionPk, TenantId
from app.domain.summaries.constraints import marking_problems
from app.domain.tokens import TokenCounter
from app.services.sessions import readable_profile, require_session, session_profile
from app.services.tenancy import cpu
from app.storage import queries
from app.storage.models import IdempotencyKeyRow, MessageRow, ToolPartRow


@dataclass(frozen=True)
class Writer:
    """What a write of messages needs: the transaction, the tenant, the counter that completes
    the counts of what is stored, the catalog of providers and the write's time."""

    db: AsyncSession
    tenant: TenantId
    counter: TokenCounter
    catalog: Catalog
    now: datetime


@dataclass(frozen=True)
class Idempotency:
    """An Idempotency-Key, the fingerprint of its request, and how long it is remembered."""

    key: str
    fingerprint: str
    ttl: timedelta


@dataclass(frozen=True)
class StoredMessage:
    seq: int
    section: str
    tokens: int
    created_at: datetime
    message: Message


@dataclass(frozen=True)
class Batch:
    """A posted batch, before parsing."""

    format: Format
    section: str
    messages: list[Any]
    system: Any = None
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Appended:
    """The answer to an append; ``replayed`` when an Idempotency-Key retry wrote nothing."""

    answer: dict[str, Any]
    counts: list[dict[str, int]]
    replayed: bool


# Rows flushed at a time by a big append (see `append_messages`).
FLUSH_ROWS = 500
_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"))


def fingerprint(method: str, path: str, body: Any) -> str:
    """A stable hash of a request: same method, path and JSON body give the same value.

    The hash of ``json.dumps([method, path, body], sort_keys=True, separators=(",", ":"))``,
    encoded piece by piece (not in one C call: a big body in a worker thread must not hold the
    GIL from start to end)."""
    digest, pieces = hashlib.sha256(), []
    for piece in _CANONICAL.iterencode([method, path, body]):
        pieces.append(piece)
        if len(pieces) == 4096:
            digest.update("".join(pieces).encode())
            pieces.clear()
    digest.update("".join(pieces).encode())
    return digest.hexdigest()


def prepare(counter: TokenCounter, batch: Batch) -> tuple[list[Message], list[dict[str, int]]]:
    """Parse and count a batch: CPU work, done once and before the transaction."""
    parsed = parse_messages(batch.format, batch.messages, batch.system)
    if batch.metadata:
        parsed = [m.model_copy(update={"metadata": batch.metadata | m.metadata}) for m in parsed]
    check_marks(parsed, len(parsed) - len(batch.messages))
    return parsed, [counter.count_all(m) for m in parsed]


def check_marks(messages: list[Message], lead: int) -> None:
    """InvalidInput naming each bad constraint mark (``[i, "metadata", "constraints", j]``);
    ``lead``: messages ahead of the body's (a separate system prompt)."""
    problems = [
        ((max(0, i - lead), *path), message)
        for i, m in enumerate(messages)
        if "constraint" in m.metadata or "constraints" in m.metadata
        for path, message in marking_problems(m)
    ]
    if problems:
        raise InvalidInput(problems)


async def append_messages(
    w: Writer, session_id: str, batch: Batch, idempotency: Idempotency | None
) -> Appended:
    """Store a batch with consecutive seqs in one transaction.

    With an Idempotency-Key, a retry of the same request answers as the first time and writes
    nothing; keys expire after ``idempotency.ttl`` (a retry after it is a new request; the
    retention sweep deletes them) and vanish with their session.
    """
    db = w.db
    messages, counts = await cpu.run_sync(prepare, w.counter, batch)
    row = await require_session(db, w.tenant, session_id)
    if idempotency is not None:
        replay = await _replay(db, w.tenant, idempotency, w.now)
        if replay is not None:
            return Appended(replay, counts, replayed=True)
    pk = SessionPk(row.pk)
    seqs = await insert_messages(db, pk, batch.section, messages, counts, w.now)
    if seqs is None:
        raise NotFound("session", session_id)
    encoding = session_profile(row, w.catalog).encoding
    answer = _answer(session_id, batch.section, seqs, counts, encoding)
    if idempotency is not None:
        await _remember(w, pk, idempotency, answer)
    try:
        await db.commit()
    except IntegrityError:
        # A concurrent request with the same key won the race: answer as its retry would.
        await db.rollback()
        replay = await _replay(db, w.tenant, idempotency, w.now) if idempotency else None
        if replay is None:
            raise
        return Appended(replay, counts, replayed=True)
    return Appended(answer, counts, replayed=False)


def _answer(
    session_id: str,
    section: str,
    seqs: tuple[int, int],
    counts: Sequence[dict[str, int]],
    encoding: str,
) -> dict[str, Any]:
    """What an append answers (and its key replays): the seqs stored and their tokens."""
    first, last = seqs
    return {
        "session_id": session_id,
        "section": section,
        "first_seq": first,
        "last_seq": last,
        "encoding": encoding,
        "messages": [{"seq": first + i, "tokens": c[encoding]} for i, c in enumerate(counts)],
        "tokens": sum(c[encoding] for c in counts),
    }


async def _remember(
    w: Writer, pk: SessionPk, idempotency: Idempotency, answer: dict[str, Any]
) -> None:
    """The key kept with the answer it replays (its expired self deleted first)."""
    await queries.forget_idempotency_key(w.db, w.tenant, idempotency.key, w.now - idempotency.ttl)
    w.db.add(
        IdempotencyKeyRow(
            tenant_id=w.tenant,
            key=idempotency.key,
            session_pk=pk,
            fingerprint=idempotency.fingerprint,
            status=201,
            response=answer,
            created_at=w.now,
        )
    )


async def insert_messages(
    db: AsyncSession,
    pk: SessionPk,
    section: str,
    messages: Sequence[Message],
    counts: Sequence[dict[str, int]],
    now: datetime,
) -> tuple[int, int] | None:
    """Add ``messages`` (counted ``counts`` in every encoding) after the session's last seq in
    the caller's transaction: their first and last seq (None: the session is gone)."""
    last = await queries.reserve_seqs(db, pk, counts)
    if last is None:
        return None
    first = last - len(messages) + 1
    new = [
        NewMessage(first + i, section, m, c, now)
        for i, (m, c) in enumerate(zip(messages, counts, strict=True))
    ]
    # Building and flushing thousands of rows is CPU work on the event loop (the ORM runs
    # there): the rows are built in a worker thread and flushed a slice at a time, so other
    # requests run between slices.
    rows = await cpu.run_sync(message_rows, pk, new)
    for start in range(0, len(rows), FLUSH_ROWS):
        db.add_all(rows[start : start + FLUSH_ROWS])
        if len(rows) > FLUSH_ROWS:
            await db.flush()
    return first, last


async def _replay(
    db: AsyncSession, tenant: TenantId, idempotency: Idempotency, now: datetime
) -> dict[str, Any] | None:
    stored = await queries.idempotency_row(db, tenant, idempotency.key)
    if stored is None or stored.created_at < now - idempotency.ttl:
        return None
    if stored.fingerprint != idempotency.fingerprint:
        raise Conflict(
            f"Idempotency-Key {idempotency.key!r} was already used with a different request"
        )
    return stored.response


@dataclass(frozen=True)
class NewMessage:
    """A message about to be stored, with its place and its counts in every encoding."""

    seq: int
    section: str
    message: Message
    counts: dict[str, int]
    created_at: datetime


def message_rows(pk: SessionPk, new: Sequence[NewMessage]) -> list[MessageRow | ToolPartRow]:
    """The rows that store ``new`` (messages and their tool call/result index)."""
    rows: list[MessageRow | ToolPartRow] = []
    for seq, section, message, count, created_at in (
        (n.seq, n.section, n.message, n.counts, n.created_at) for n in new
    ):
        doc = message.to_json()
        rows.append(
            MessageRow(
                session_pk=pk,
                seq=seq,
                section=section,
                role=message.role,
                name=message.name,
                content=doc.get("content", []),
                meta=message.metadata,
                tokens_o200k=count["o200k_base"],
                tokens_cl100k=count["cl100k_base"],
                created_at=created_at,
            )
        )
        rows += [ToolPartRow(**values) for values in tool_parts(pk, seq, message)]
    return rows


def tool_parts(pk: SessionPk, seq: int, message: Message) -> list[dict[str, Any]]:
    """The tool part index rows of a message (where each call and result sits), as values."""
    rows = []
    tool: str | None
    for idx, part in enumerate(message.content):
        match part:
            case ToolCallPart(id=call_id, name=name):
                kind, tool = "call", name
            case ToolResultPart(call_id=call_id):
                kind, tool = "result", None
            case _:
                continue
        rows.append(
            {
                "session_pk": pk,
                "seq": seq,
                "idx": idx,
                "kind": kind,
                "call_id": call_id,
                "tool_name": tool,
            }
        )
    return rows


def stored_message(row: MessageRow, encoding: str) -> StoredMessage:
    """The domain view of a stored row."""
    message = Message.model_validate(
        {"role": row.role, "content": row.content, "name": row.name, "metadata": row.meta}
    )
    return StoredMessage(row.seq, row.section, row.tokens(encoding), row.created_at, message)


async def read_messages(
    db: AsyncSession,
    tenant: TenantId,
    session_id: str,
    after_seq: int,
    limit: int,
    section: str | None,
    catalog: Catalog,
) -> list[StoredMessage]:
    """A page of messages in seq order."""
    row = await require_session(db, tenant, session_id)
    encoding = readable_profile(row, catalog).encoding
    rows = await queries.message_page(db, SessionPk(row.pk), after_seq, limit, section)
    return [stored_message(r, encoding) for r in rows]
