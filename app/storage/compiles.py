"""The statements a session compile runs on every request.

They are built once, here: building a statement costs about as much as running it, and a delta
compile runs four. Core statements on the tables (the session row aside), so no ORM objects are
made for the messages.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, cast

from sqlalchemy import (
    BindParameter,
    Row,
    String,
    Table,
    Text,
    bindparam,
    func,
    insert,
    null,
    select,
    union_all,
)
from sqlalchemy import cast as sa_cast
from sqlalchemy.ext.asyncio import AsyncSession

from app.domain.sessions import SessionPk, TenantId
from app.storage.models import (
    CompileRow,
    MessageRow,
    PayloadRow,
    SessionRow,
    TenantRow,
    ToolPartRow,
)

_MESSAGES = MessageRow.__table__.c
_PARTS = ToolPartRow.__table__.c
_PK: BindParameter[Any] = bindparam("pk")
_AFTER: BindParameter[Any] = bindparam("after")
_SEQ: BindParameter[Any] = bindparam("seq")
_LOW: BindParameter[Any] = bindparam("low")

_SESSION = (
    select(SessionRow, TenantRow.name)
    .join(TenantRow, TenantRow.id == SessionRow.tenant_id)
    .where(SessionRow.tenant_id == bindparam("tenant"), SessionRow.id == bindparam("id"))
)


def _text(column: Any) -> Any:
    """A JSON column as the text it holds (``json`` keeps it as written on Postgres)."""
    return sa_cast(column, Text)


def _columns(tokens: Any) -> tuple[Any, ...]:
    return (
        _MESSAGES.seq,
        _MESSAGES.section,
        _MESSAGES.role,
        _MESSAGES.name,
        # As their JSON text: parsed when a compile does not hold them parsed already.
        _text(_MESSAGES.content).label("content"),
        _text(_MESSAGES.metadata).label("meta"),
        tokens.label("tokens"),
        _MESSAGES.created_at.label("at"),
    )


# What a compile reads of each message, with its tokens in each encoding.
ROW_COLUMNS = {
    "o200k_base": _columns(_MESSAGES.tokens_o200k),
    "cl100k_base": _columns(_MESSAGES.tokens_cl100k),
}
_ROWS_AFTER = {
    encoding: select(*columns)
    .where(_MESSAGES.session_pk == _PK, _MESSAGES.seq > _AFTER)
    .order_by(_MESSAGES.seq)
    for encoding, columns in ROW_COLUMNS.items()
}

# The same, each row with the history's version (read in the one statement: the rows are of it).
_VERSION = select(SessionRow.history_version).where(SessionRow.pk == _PK)
_VERSIONED_ROWS_AFTER = {
    encoding: select(_VERSION.scalar_subquery().label("version"), *columns)
    .where(_MESSAGES.session_pk == _PK, _MESSAGES.seq > _AFTER)
    .order_by(_MESSAGES.seq)
    for encoding, columns in ROW_COLUMNS.items()
}

_NO_TEXT: Any = null().cast(String)  # a column one side of a union does not have
# The roles and tool parts of the messages in (low, seq].
_WINDOW = union_all(
    select(_MESSAGES.seq, _MESSAGES.role, _NO_TEXT, _NO_TEXT).where(
        _MESSAGES.session_pk == _PK, _MESSAGES.seq > _LOW, _MESSAGES.seq <= _SEQ
    ),
    select(_PARTS.seq, _NO_TEXT, _PARTS.kind, _PARTS.call_id).where(
        _PARTS.session_pk == _PK, _PARTS.seq > _LOW, _PARTS.seq <= _SEQ
    ),
)
_LAST_ASSISTANT = select(func.max(_MESSAGES.seq)).where(
    _MESSAGES.session_pk == _PK, _MESSAGES.seq <= _LOW, _MESSAGES.role == "assistant"
)
_PARTS_FROM = select(_PARTS.seq, _PARTS.kind, _PARTS.call_id).where(
    _PARTS.session_pk == _PK, _PARTS.seq >= bindparam("first"), _PARTS.seq <= _SEQ
)
_INSERT = insert(cast(Table, CompileRow.__table__))
# The same, answering how many of the payloads ``vouched`` for the session keeps (a check that
# costs no statement of its own: ``insert_compile``).
_INSERT_COUNTING = _INSERT.returning(
    select(func.count())
    .where(
        PayloadRow.session_pk == bindparam("vouched_pk"),
        PayloadRow.sha256.in_(bindparam("vouched", expanding=True)),
    )
    .scalar_subquery()
)

# How far back from the cursor the last assistant message is looked for in one bounded read.
ROUND_LOOKBACK = 64


async def session_and_tenant_name(
    db: AsyncSession, tenant: TenantId, session_id: str
) -> tuple[SessionRow, str] | None:
    """The tenant's session row with the tenant's name, in one query."""
    found = (await db.execute(_SESSION, {"tenant": tenant, "id": session_id})).first()
    return None if found is None else (found[0], found[1])


async def rows_after(
    db: AsyncSession, pk: SessionPk, after_seq: int, encoding: str
) -> Sequence[Row[Any]]:
    """The stored messages after ``after_seq`` (0: all), in seq order, as plain rows:
    ``seq, section, role, name, content, meta`` and ``tokens`` in ``encoding``."""
    return (await db.execute(_ROWS_AFTER[encoding], {"pk": pk, "after": after_seq})).all()


async def versioned_rows_after(
    db: AsyncSession, pk: SessionPk, after_seq: int, encoding: str
) -> tuple[int | None, Sequence[Row[Any]]]:
    """``rows_after`` and the history's version they are of, read in one statement (when there
    are none, the version alone; None: the session is gone)."""
    rows = (await db.execute(_VERSIONED_ROWS_AFTER[encoding], {"pk": pk, "after": after_seq})).all()
    if rows:
        return rows[0].version, rows
    return await db.scalar(_VERSION, {"pk": pk}), ()


async def open_calls(db: AsyncSession, pk: SessionPk, seq: int) -> frozenset[str]:
    """The tool calls of the last assistant message at or before ``seq`` that no message up to
    ``seq`` answers: what a provider session holding the history through ``seq`` waits on.

    Roles and the tool part index are read as primary-key ranges, never message contents, so the
    cost does not grow with the history; only a round longer than the look-back needs a second
    query.
    """
    low = seq - ROUND_LOOKBACK
    rows = (await db.execute(_WINDOW, {"pk": pk, "low": low, "seq": seq})).all()
    starts = [at for at, role, _, _ in rows if role == "assistant"]
    if starts:
        return _unanswered(max(starts), [(at, kind, cid) for at, _, kind, cid in rows if kind])
    first = await db.scalar(_LAST_ASSISTANT, {"pk": pk, "low": low})
    if first is None:
        return frozenset()
    parts = await db.execute(_PARTS_FROM, {"pk": pk, "first": first, "seq": seq})
    return _unanswered(first, [(at, kind, cid) for at, kind, cid in parts])


def _unanswered(start: int, parts: Sequence[tuple[int, str, str]]) -> frozenset[str]:
    """The calls of the message at ``start`` minus the results after it."""
    calls = {cid for at, kind, cid in parts if at == start and kind == "call"}
    return frozenset(calls - {cid for at, kind, cid in parts if at > start and kind == "result"})


@dataclass(frozen=True)
class NewCompile:
    """A compile to record: its id and session, its mode, the first and last seq it sent, its
    token total and time; ``learning``: its raw estimate and count key, when a reported count
    of it teaches."""

    id: str
    pk: SessionPk
    mode: str
    seqs: tuple[int | None, int | None]
    token_total: int
    created_at: datetime
    learning: tuple[int, str] | None = None

    def values(self) -> dict[str, Any]:
        estimate, key = self.learning or (None, None)
        first, last = self.seqs
        return {
            "id": self.id,
            "session_pk": self.pk,
            "mode": self.mode,
            "seq_from": first,
            "seq_to": last,
            "token_total": self.token_total,
            "created_at": self.created_at,
            "estimate": estimate,
            "count_key": key,
        }


async def insert_compile(db: AsyncSession, new: NewCompile, vouched: Sequence[str] = ()) -> int:
    """Record ``new`` with one INSERT, which also answers how many of the payloads ``vouched``
    for (sha256s) the session keeps."""
    if not vouched:
        await db.execute(_INSERT, new.values())
        return 0
    counting = new.values() | {"vouched_pk": new.pk, "vouched": list(vouched)}
    return int((await db.execute(_INSERT_COUNTING, counting)).scalar_one())


async def session_exists(db: AsyncSession, pk: SessionPk) -> bool:
    """Whether the session is still stored (a concurrent request may have deleted it)."""
    return (await db.scalar(select(SessionRow.pk).where(SessionRow.pk == pk))) is not None
