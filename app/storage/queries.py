"""The queries the service needs. Every session-level query takes the tenant explicitly."""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, cast

from sqlalchemy import (
    BindParameter,
    Insert,
    Select,
    Table,
    bindparam,
    case,
    delete,
    func,
    or_,
    select,
    update,
)
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import aliased

from app.domain.sessions import SessionPk, TenantId
from app.storage.models import (
    ApiKeyRow,
    CompactionRow,
    CompileRow,
    DigestIdRow,
    DigestRow,
    EventRow,
    IdempotencyKeyRow,
    MessageRow,
    PayloadRow,
    PreparedCompactionRow,
    ProxyThreadRow,
    SessionRow,
    TenantRow,
    ToolPartRow,
)

# Bound parameters per statement stay well under the databases' limits.
CHUNK = 500


async def tenant_by_name(db: AsyncSession, name: str) -> TenantRow | None:
    return await db.scalar(select(TenantRow).where(TenantRow.name == name))


async def key_by_hash(db: AsyncSession, key_hash: str) -> ApiKeyRow | None:
    return await db.scalar(select(ApiKeyRow).where(ApiKeyRow.key_hash == key_hash))


async def list_keys(db: AsyncSession) -> Sequence[tuple[ApiKeyRow, str]]:
    rows = await db.execute(
        select(ApiKeyRow, TenantRow.name)
        .join(TenantRow, TenantRow.id == ApiKeyRow.tenant_id)
        .order_by(ApiKeyRow.created_at)
    )
    return [(key, name) for key, name in rows]


# The statements of every turn, built once: building one costs less than its cache lookup,
# which a statement made anew pays each time (about 0.1 ms).
_SESSION_ROW = select(SessionRow).where(
    SessionRow.tenant_id == bindparam("tenant"), SessionRow.id == bindparam("id")
)
_SESSION_THREAD = (
    select(SessionRow, ProxyThreadRow, TenantRow.name)
    .join(TenantRow, TenantRow.id == SessionRow.tenant_id)
    .outerjoin(ProxyThreadRow, ProxyThreadRow.session_pk == SessionRow.pk)
    .where(SessionRow.tenant_id == bindparam("tenant"), SessionRow.id == bindparam("id"))
    .execution_options(populate_existing=True)
)
_COMPILE_ROW = select(CompileRow).where(
    CompileRow.id == bindparam("id"), CompileRow.session_pk == bindparam("pk")
)
_TENANT_NAME = select(TenantRow.name).where(TenantRow.id == bindparam("tenant"))
_LOCK_SESSION = (  # a write that changes nothing: no object of the session to bring in step
    update(SessionRow)
    .where(SessionRow.pk == bindparam("session"))
    .values(last_seq=SessionRow.last_seq)
    .execution_options(synchronize_session=False)
)


async def session_row(db: AsyncSession, tenant: TenantId, session_id: str) -> SessionRow | None:
    return await db.scalar(_SESSION_ROW, {"tenant": tenant, "id": session_id})


async def session_and_thread(
    db: AsyncSession, tenant: TenantId, session_id: str
) -> tuple[SessionRow, ProxyThreadRow | None, str] | None:
    """The session ``session_id``, its sidecar thread if it has one, and its tenant's name (one
    query)."""
    found = (await db.execute(_SESSION_THREAD, {"tenant": tenant, "id": session_id})).first()
    return None if found is None else (found[0], found[1], found[2])


async def threads_beside(
    db: AsyncSession, tenant: TenantId, family: str, root: str, limit: int
) -> Sequence[tuple[SessionRow, ProxyThreadRow]]:
    """The sessions of the conversations beside the session ``family`` whose root is ``root``
    (app/services/sidecar/threads.py), with their threads, the latest first."""
    query = (
        select(SessionRow, ProxyThreadRow)
        .join(ProxyThreadRow, ProxyThreadRow.session_pk == SessionRow.pk)
        .where(ProxyThreadRow.family == family, ProxyThreadRow.root == root)
        .where(SessionRow.tenant_id == tenant)
        .order_by(ProxyThreadRow.updated_at.desc())
        .limit(limit)
    )
    return [(row, thread) for row, thread in (await db.execute(query)).all()]


async def session_rows(
    db: AsyncSession, tenant: TenantId, after_id: str | None, limit: int
) -> Sequence[SessionRow]:
    query = select(SessionRow).where(SessionRow.tenant_id == tenant)
    if after_id is not None:
        query = query.where(SessionRow.id > after_id)
    return (await db.scalars(query.order_by(SessionRow.id).limit(limit))).all()


async def delete_session(db: AsyncSession, tenant: TenantId, session_id: str) -> bool:
    """Delete the session (its rows cascade); False when there was none."""
    result = await db.execute(
        delete(SessionRow).where(SessionRow.tenant_id == tenant, SessionRow.id == session_id)
    )
    return bool(getattr(result, "rowcount", 0))


# The session column that keeps the running token total of each encoding.
TOTAL_COLUMNS = {"o200k_base": "tokens_o200k", "cl100k_base": "tokens_cl100k"}
Counts = Mapping[str, int]


def totals(row: SessionRow) -> dict[str, int]:
    """A session's running token totals by encoding (of its live messages)."""
    return {encoding: int(getattr(row, column)) for encoding, column in TOTAL_COLUMNS.items()}


def _moved(added: Sequence[Counts], removed: Sequence[Counts]) -> dict[str, Any]:
    """The session's totals when messages counted ``added`` come and ``removed`` go."""
    values: dict[str, Any] = {
        "message_count": SessionRow.message_count + (len(added) - len(removed))
    }
    for encoding, column in TOTAL_COLUMNS.items():
        delta = sum(c[encoding] for c in added) - sum(c[encoding] for c in removed)
        values[column] = getattr(SessionRow, column) + delta
    return values


async def reserve_seqs(db: AsyncSession, pk: SessionPk, counts: Sequence[Counts]) -> int | None:
    """Take a seq for each message counted ``counts``, add them to the session's totals, and
    return the new last seq (None: the session is gone).

    The update row-locks the session until commit, so concurrent appends queue and seqs stay
    gap-free (a rolled-back append gives its seqs back, and its totals).
    """
    last = await db.scalar(
        update(SessionRow)
        .where(SessionRow.pk == pk)
        .values(last_seq=SessionRow.last_seq + len(counts), **_moved(counts, ()))
        .returning(SessionRow.last_seq)
    )
    return None if last is None else int(last)


async def move_totals(
    db: AsyncSession, pk: SessionPk, added: Sequence[Counts], removed: Sequence[Counts]
) -> None:
    """Messages counted ``added`` replace those counted ``removed`` in the session's totals
    (in the transaction that writes them)."""
    await db.execute(update(SessionRow).where(SessionRow.pk == pk).values(**_moved(added, removed)))


async def stored_totals(db: AsyncSession, pk: SessionPk) -> tuple[int, dict[str, int]]:
    """The session's message count and token totals by encoding, as stored now."""
    columns = [getattr(SessionRow, c) for c in TOTAL_COLUMNS.values()]
    query = select(SessionRow.message_count, *columns).where(SessionRow.pk == pk)
    found = (await db.execute(query)).one_or_none()
    if found is None:
        return 0, dict.fromkeys(TOTAL_COLUMNS, 0)
    count, *tokens = found
    return int(count), {e: int(t) for e, t in zip(TOTAL_COLUMNS, tokens, strict=True)}


async def message_page(
    db: AsyncSession, pk: SessionPk, after_seq: int, limit: int, section: str | None
) -> Sequence[MessageRow]:
    query = select(MessageRow).where(MessageRow.session_pk == pk, MessageRow.seq > after_seq)
    if section is not None:
        query = query.where(MessageRow.section == section)
    return (await db.scalars(query.order_by(MessageRow.seq).limit(limit))).all()


async def forget_idempotency_key(
    db: AsyncSession, tenant: TenantId, key: str, before: datetime
) -> None:
    """Delete the tenant's ``key`` if it was stored before ``before`` (expired: it is used
    again as a new key); one row by primary key. The retention sweep deletes the others."""
    await db.execute(
        delete(IdempotencyKeyRow).where(
            IdempotencyKeyRow.tenant_id == tenant,
            IdempotencyKeyRow.key == key,
            IdempotencyKeyRow.created_at < before,
        )
    )


async def keys_matching(db: AsyncSession, id_or_prefix: str) -> Sequence[ApiKeyRow]:
    return (
        await db.scalars(
            select(ApiKeyRow).where(
                or_(ApiKeyRow.id == id_or_prefix, ApiKeyRow.prefix == id_or_prefix)
            )
        )
    ).all()


async def advance_cursor(
    db: AsyncSession, pk: SessionPk, seq: int, provider_session_id: str | None
) -> None:
    """Move the cursor up to ``seq``, never back, in one statement (acknowledgements race)."""
    cursor, held = SessionRow.cursor_seq, SessionRow.provider_session_id
    moves = or_(cursor.is_(None), cursor < seq)
    values: dict[str, Any] = {"cursor_seq": case((moves, seq), else_=cursor)}
    if provider_session_id is not None:  # the newest acknowledged compile's session wins
        values["provider_session_id"] = case(
            (or_(moves, held.is_(None)), provider_session_id), else_=held
        )
    await db.execute(update(SessionRow).where(SessionRow.pk == pk).values(**values))


async def compile_row(db: AsyncSession, pk: SessionPk, compile_id: str) -> CompileRow | None:
    return await db.scalar(_COMPILE_ROW, {"id": compile_id, "pk": pk})


async def tenant_name(db: AsyncSession, tenant: TenantId) -> str:
    return (await db.scalar(_TENANT_NAME, {"tenant": tenant})) or tenant


async def idempotency_row(db: AsyncSession, tenant: TenantId, key: str) -> IdempotencyKeyRow | None:
    return await db.get(IdempotencyKeyRow, (tenant, key))


async def all_messages(db: AsyncSession, pk: SessionPk) -> Sequence[MessageRow]:
    """Every stored message of a session, in seq order."""
    query = select(MessageRow).where(MessageRow.session_pk == pk).order_by(MessageRow.seq)
    return (await db.scalars(query)).all()


async def tool_parts(db: AsyncSession, pk: SessionPk, call_id: str) -> Sequence[ToolPartRow]:
    """Where the calls and results of ``call_id`` sit, in seq order."""
    query = (
        select(ToolPartRow)
        .where(ToolPartRow.session_pk == pk, ToolPartRow.call_id == call_id)
        .order_by(ToolPartRow.seq, ToolPartRow.idx)
    )
    return (await db.scalars(query)).all()


async def messages_at(db: AsyncSession, pk: SessionPk, seqs: Sequence[int]) -> list[MessageRow]:
    """The stored messages at ``seqs``, in seq order."""
    found: list[MessageRow] = []
    for start in range(0, len(seqs), CHUNK):
        chunk = seqs[start : start + CHUNK]
        query = select(MessageRow).where(MessageRow.session_pk == pk, MessageRow.seq.in_(chunk))
        found += (await db.scalars(query)).all()
    return sorted(found, key=lambda row: row.seq)


async def payload(db: AsyncSession, pk: SessionPk, sha256: str) -> PayloadRow | None:
    return await db.get(PayloadRow, (pk, sha256))


async def stored_payloads(db: AsyncSession, pk: SessionPk, shas: Sequence[str]) -> set[str]:
    """Which of ``shas`` the session keeps already."""
    found: set[str] = set()
    for start in range(0, len(shas), CHUNK):
        chunk = shas[start : start + CHUNK]
        query = select(PayloadRow.sha256).where(
            PayloadRow.session_pk == pk, PayloadRow.sha256.in_(chunk)
        )
        found.update((await db.scalars(query)).all())
    return found


async def add_payloads(db: AsyncSession, rows: Sequence[dict[str, Any]]) -> None:
    """Insert payload rows; one a concurrent compile inserted first is left as it is."""
    await insert_new(db, PayloadRow, rows)


async def insert_new(db: AsyncSession, model: type[Any], rows: Sequence[dict[str, Any]]) -> None:
    """Insert ``rows`` of ``model``'s table, leaving a row whose key is there already as it is:
    one statement per dialect and table, compiled once, its rows handed to the driver's
    ``executemany`` in order (a statement with the rows' values in it is cached nowhere: it was
    compiled anew for each batch, milliseconds of CPU on the event loop for a hundred rows).
    Every row has the same keys, and they are column names (the first row's name the columns:
    a key another row lacks fails, one only it has is dropped)."""
    statement = _insert_new(db.get_bind().dialect.name, cast(Table, model.__table__))
    for start in range(0, len(rows), CHUNK):
        await db.execute(statement, rows[start : start + CHUNK])


@functools.cache
def _insert_new(dialect: str, table: Table) -> Insert:
    insert = postgresql.insert if dialect == "postgresql" else sqlite.insert
    return insert(table).on_conflict_do_nothing()


async def delete_messages(db: AsyncSession, pk: SessionPk, rows: Sequence[MessageRow]) -> None:
    """Delete the stored ``rows`` in a few statements by seq (not one ORM delete a row, which
    costs seconds at thousands of messages) and leave them out of the session."""
    seqs = [row.seq for row in rows]
    for start in range(0, len(seqs), CHUNK):
        chunk = seqs[start : start + CHUNK]
        query = delete(MessageRow).where(MessageRow.session_pk == pk, MessageRow.seq.in_(chunk))
        await db.execute(query.execution_options(synchronize_session=False))
    for row in rows:
        db.expunge(row)


async def present_seqs(db: AsyncSession, pk: SessionPk, seqs: Sequence[int]) -> int:
    """How many of ``seqs`` are stored messages now."""
    found = 0
    for start in range(0, len(seqs), CHUNK):
        chunk = seqs[start : start + CHUNK]
        query = select(func.count()).where(MessageRow.session_pk == pk, MessageRow.seq.in_(chunk))
        found += int(await db.scalar(query) or 0)
    return found


async def compaction_rows(db: AsyncSession, pk: SessionPk) -> Sequence[CompactionRow]:
    query = select(CompactionRow).where(CompactionRow.session_pk == pk)
    return (await db.scalars(query.order_by(CompactionRow.created_at, CompactionRow.id))).all()


async def compaction_row(db: AsyncSession, pk: SessionPk, cid: str) -> CompactionRow | None:
    return await db.scalar(
        select(CompactionRow).where(CompactionRow.id == cid, CompactionRow.session_pk == pk)
    )


async def archived_covering(
    db: AsyncSession, pk: SessionPk, seqs: Sequence[int]
) -> Sequence[CompactionRow]:
    """The compactions whose seq range covers any of ``seqs``."""
    if not seqs:
        return []
    query = select(CompactionRow).where(
        CompactionRow.session_pk == pk,
        CompactionRow.seq_from <= max(seqs),
        CompactionRow.seq_to >= min(seqs),
    )
    return (await db.scalars(query)).all()


def _unacted_report() -> Select[tuple[dict[str, Any] | None, str | None, bool]]:
    later = aliased(CompileRow)
    pk: BindParameter[str] = bindparam("pk")
    since = select(later.id).where(
        later.session_pk == pk, later.created_at > CompileRow.reported_at
    )
    return (
        select(CompileRow.usage, CompileRow.error_kind, since.exists())
        .where(CompileRow.session_pk == pk, CompileRow.reported_at.is_not(None))
        .order_by(CompileRow.reported_at.desc())
        .limit(1)
    )


_UNACTED_REPORT = _unacted_report()


async def unacted_report(
    db: AsyncSession, pk: SessionPk
) -> tuple[dict[str, Any] | None, str | None] | None:
    """The usage and error kind of the compile whose outcome the caller reported last, when no
    compile of the session was made since that report (one query); None otherwise."""
    found = (await db.execute(_UNACTED_REPORT, {"pk": pk})).one_or_none()
    return None if found is None or found[2] else (found[0], found[1])


async def rewrite_history(db: AsyncSession, pk: SessionPk) -> None:
    """Count a rewrite of the history (a compaction): the digests of it before and their ids
    are dropped (a job still making one keeps nothing: it saves only for the version it read),
    and so is a compaction prepared of it."""
    await db.execute(
        update(SessionRow)
        .where(SessionRow.pk == pk)
        .values(history_version=SessionRow.history_version + 1)
    )
    await db.execute(delete(DigestIdRow).where(DigestIdRow.session_pk == pk))
    await db.execute(delete(DigestRow).where(DigestRow.session_pk == pk))
    await db.execute(delete(PreparedCompactionRow).where(PreparedCompactionRow.session_pk == pk))


async def end_provider_session(db: AsyncSession, pk: SessionPk) -> None:
    """Clear the cursor and the provider session id: the next compile is full."""
    await db.execute(
        update(SessionRow)
        .where(SessionRow.pk == pk)
        .values(cursor_seq=None, provider_session_id=None)
    )


async def lock_session(db: AsyncSession, pk: SessionPk) -> bool:
    """Lock the session until commit, as a write that changes nothing: the row lock on Postgres,
    the database's write lock on SQLite (so what is read next cannot change before commit).
    False when the session is gone."""
    done = await db.execute(_LOCK_SESSION, {"session": pk})
    return bool(getattr(done, "rowcount", 0))


async def event_rows(
    db: AsyncSession, pk: SessionPk, after_id: int, limit: int
) -> Sequence[EventRow]:
    query = select(EventRow).where(EventRow.session_pk == pk, EventRow.id > after_id)
    return (await db.scalars(query.order_by(EventRow.id).limit(limit))).all()


async def last_event_id(db: AsyncSession, pk: SessionPk) -> int:
    """The session's newest event id, 0 when it has none."""
    found = await db.scalar(select(func.max(EventRow.id)).where(EventRow.session_pk == pk))
    return int(found or 0)


async def has_provider_session(db: AsyncSession, pk: SessionPk) -> bool:
    """Whether a provider session holds part of the history (a cursor or a session id), as
    stored now."""
    query = select(SessionRow.cursor_seq, SessionRow.provider_session_id).where(SessionRow.pk == pk)
    row = (await db.execute(query)).one_or_none()
    return row is not None and (row[0] is not None or row[1] is not None)


async def compiled_since(db: AsyncSession, pk: SessionPk, when: datetime) -> bool:
    """Whether the session was compiled after ``when``."""
    query = select(CompileRow.id).where(CompileRow.session_pk == pk, CompileRow.created_at > when)
    return (await db.scalar(query.limit(1))) is not None


async def last_compaction_at(db: AsyncSession, pk: SessionPk) -> datetime | None:
    """When the session was last compacted."""
    query = select(func.max(CompactionRow.created_at)).where(CompactionRow.session_pk == pk)
    found: datetime | None = await db.scalar(query)
    return found


async def last_reset_at(db: AsyncSession, pk: SessionPk) -> datetime | None:
    """When a compaction last ended the provider session."""
    query = select(func.max(CompactionRow.created_at)).where(
        CompactionRow.session_pk == pk, CompactionRow.resets_provider_session.is_(True)
    )
    found: datetime | None = await db.scalar(query)
    return found
