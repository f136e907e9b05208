"""Digests of the older part of sessions' histories (app/domain/compilers/digests.py): read
with what a compile reads instead of that part, and written after the compile, serialised with
the session's other writes."""

from __future__ import annotations

import functools
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, cast

from sqlalchemy import (
    BindParameter,
    ColumnElement,
    Executable,
    Row,
    Select,
    String,
    Table,
    and_,
    any_,
    bindparam,
    delete,
    func,
    insert,
    select,
    union_all,
    update,
)
from sqlalchemy.dialects import postgresql
from sqlalchemy.ext.asyncio import AsyncSession

from app.domain.compilers.base import Ranges
from app.domain.compilers.digests import Digest
from app.domain.sessions import SessionPk
from app.domain.validity.repair import Ids
from app.storage import queries
from app.storage.compiles import ROW_COLUMNS
from app.storage.models import DigestIdRow, DigestRow, MessageRow, SessionRow

CHUNK = 500
_IDS = DigestIdRow.__table__.c
_ASKED: BindParameter[Any] = bindparam("asked", type_=postgresql.ARRAY(String))
# On SQLite: one parameter expanded into the list when the statement runs (a statement built
# once and cached, not one bound parameter object per id).
_ASKED_LIST: BindParameter[Any] = bindparam("asked", expanding=True)


_MESSAGES = MessageRow.__table__.c


@dataclass(frozen=True)
class Stored:
    """A session's digest, the key it is kept under (``view_key``: its view's, or its view's
    for one execution) and the generation its ids belong to."""

    digest: Digest
    generation: str
    view_key: str


async def load(db: AsyncSession, pk: SessionPk, view_key: str, version: int) -> Stored | None:
    """The digest of ``view_key``, if one was made of the history as it is (``version``: the
    session's compactions so far)."""
    query = select(DigestRow.generation, DigestRow.digest).where(
        DigestRow.session_pk == pk, DigestRow.view_key == view_key
    )
    found = (await db.execute(query)).first()
    if found is None or found.digest.get("version") != version:
        return None
    return Stored(Digest.from_json(found.digest), found.generation, view_key)


async def still(db: AsyncSession, at: Place, stored: Stored) -> bool:
    """Whether the history ``at`` is still at its version and ``stored`` still its view's
    digest, not moved forward or replaced since it was read (a generation and an upto name what
    a digest holds: its JSON is not read again). One query."""
    found = (await db.execute(_STILL, {"pk": at.pk, "view": at.view_key})).first()
    return found is not None and tuple(found) == _state(at, stored)


def _state(at: Place, stored: Stored) -> tuple[int, str, int]:
    """What ``still`` compares: the history's version, the digest's generation and upto."""
    return at.version, stored.generation, stored.digest.upto


# What a checked read of the ids of a session gone finds (no row): no state.
_GONE: Any = (None, None, None, None, None)
_PK: BindParameter[Any] = bindparam("pk", type_=MessageRow.__table__.c.session_pk.type)
_THE_DIGEST = (DigestRow.session_pk == SessionRow.pk) & (DigestRow.view_key == bindparam("view"))
_STILL = (
    select(SessionRow.history_version, DigestRow.generation, DigestRow.upto)
    .outerjoin(DigestRow, _THE_DIGEST)
    .where(SessionRow.pk == _PK)
)
# The same, as columns beside the rows of another statement (each evaluated once per part of
# a union, not per row).
_DIGEST_IS = (DigestRow.session_pk == _PK, DigestRow.view_key == bindparam("view"))
_STATE = (
    select(SessionRow.history_version).where(SessionRow.pk == _PK).scalar_subquery().label("v"),
    select(DigestRow.generation).where(*_DIGEST_IS).scalar_subquery().label("generation"),
    select(DigestRow.upto).where(*_DIGEST_IS).scalar_subquery().label("upto"),
)


def _among(asked: ColumnElement[bool], checked: bool) -> Select[Any]:
    """The ids of a digest's older part among those asked about, with their kind (``checked``:
    each row with what ``still`` checks, one with no id when none is among them)."""
    found = (
        _IDS.view_key == bindparam("view"),
        _IDS.generation == bindparam("generation"),
        _IDS.upto <= bindparam("upto"),
        asked,
    )
    if not checked:
        return select(_IDS.kind, _IDS.call_id).where(_IDS.session_pk == _PK, *found)
    joined = and_(_IDS.session_pk == SessionRow.pk, *found)
    return _STILL.add_columns(_IDS.kind, _IDS.call_id).outerjoin(DigestIdRow.__table__, joined)


_AMONG = {
    (postgres, checked): _among(asked, checked)
    for postgres, asked in (
        (True, _IDS.call_id == any_(_ASKED)),
        (False, _IDS.call_id.in_(_ASKED_LIST)),
    )
    for checked in (False, True)
}


async def rows_from(
    db: AsyncSession, pk: SessionPk, needed: Ranges, upto: int, encoding: str
) -> Sequence[Row[Any]]:
    """The stored messages from seq ``upto`` on and those in the ``needed`` ranges, in seq
    order, as ``compiles.rows_after`` gives them: one primary-key range scan each (an OR of
    the ranges can make SQLite, which keeps no statistics here, scan the whole session)."""
    params, ranges = _ranges(pk, needed, upto)
    return (await db.execute(_rows_from(encoding, ranges), params)).all()


async def rows_still(
    db: AsyncSession, at: Place, stored: Stored, needed: Ranges, upto: int, encoding: str
) -> Sequence[Row[Any]] | None:
    """``rows_from``, each row with what ``still`` checks, read in the same statement: the rows
    are of the history and digest it names, or None (they changed since ``stored`` was read).
    When no row is there, the check runs on its own."""
    params, ranges = _ranges(at.pk, needed, upto)
    params["view"] = at.view_key
    rows = (await db.execute(_rows_from(encoding, ranges, checked=True), params)).all()
    if not rows:
        return () if await still(db, at, stored) else None
    return rows if tuple(rows[0][-len(_STATE) :]) == _state(at, stored) else None


def _ranges(pk: SessionPk, needed: Ranges, upto: int) -> tuple[dict[str, Any], int]:
    """``_rows_from``'s parameters for the ``needed`` ranges below ``upto``, and their number."""
    wanted = [(first, last) for first, last in needed if first < upto]
    params: dict[str, Any] = {"pk": pk, "upto": upto}
    for n, (first, last) in enumerate(wanted):
        params |= {f"first_{n}": first, f"last_{n}": last}
    return params, len(wanted)


@functools.lru_cache(maxsize=64)
def _rows_from(encoding: str, ranges: int, checked: bool = False) -> Executable:
    """``rows_from``'s statement for ``ranges`` needed ranges (``checked``: with ``_STATE``),
    built once (and so compiled once and kept in SQLAlchemy's cache, its values bound as
    parameters)."""
    columns = (*ROW_COLUMNS[encoding], *(_STATE if checked else ()))
    scans = [
        select(*columns).where(
            _MESSAGES.session_pk == _PK,
            _MESSAGES.seq >= bindparam(f"first_{n}"),
            _MESSAGES.seq <= bindparam(f"last_{n}"),
        )
        for n in range(ranges)
    ]
    newest = select(*columns).where(_MESSAGES.session_pk == _PK, _MESSAGES.seq >= bindparam("upto"))
    return union_all(*scans, newest).order_by("seq") if scans else newest.order_by("seq")


async def tail_and_total(
    db: AsyncSession, pk: SessionPk, upto: int, encoding: str
) -> tuple[int, int]:
    """The stored tokens (in ``encoding``) of the messages from seq ``upto`` on, summed in the
    database (one primary-key range), and the session's stored total, in one statement (the
    one is of the other's snapshot; (0, 0) for a session gone)."""
    column = _MESSAGES.tokens_o200k if encoding == "o200k_base" else _MESSAGES.tokens_cl100k
    total = SessionRow.tokens_o200k if encoding == "o200k_base" else SessionRow.tokens_cl100k
    tail = select(func.coalesce(func.sum(column), 0)).where(
        _MESSAGES.session_pk == pk, _MESSAGES.seq >= upto
    )
    query = select(tail.scalar_subquery(), total).where(SessionRow.pk == pk)
    found = (await db.execute(query)).first()
    return (0, 0) if found is None else (int(found[0] or 0), int(found[1]))


async def ids_among(
    db: AsyncSession, pk: SessionPk, stored: Stored, asked: Iterable[str]
) -> tuple[set[str], set[str]]:
    """Of the ids ``asked`` about, those the digest's older part calls, and those it holds
    (one array parameter on Postgres, chunks of a list on SQLite)."""
    rows = await _among_rows(db, pk, stored, asked, checked=False)
    return _calls_held(rows)


async def ids_still(
    db: AsyncSession, at: Place, stored: Stored, asked: Iterable[str]
) -> tuple[set[str], set[str]] | None:
    """``ids_among``, each statement with what ``still`` checks: None when the history or its
    digest changed since ``stored`` was read (no statement when nothing is asked)."""
    rows = await _among_rows(db, at.pk, stored, asked, checked=True)
    state = _state(at, stored)
    if any(tuple(found[:3]) != state for found in rows):
        return None
    return _calls_held([found[3:] for found in rows if found[3] is not None])


async def _among_rows(
    db: AsyncSession, pk: SessionPk, stored: Stored, asked: Iterable[str], checked: bool
) -> list[Any]:
    """The rows of ``_AMONG``'s statement for the ids ``asked`` (in one statement on Postgres,
    chunks on SQLite); ``checked``: each chunk's with the state, ``_GONE`` for a session gone."""
    wanted = sorted(asked)
    postgres = db.get_bind().dialect.name == "postgresql"
    chunks = [wanted] if postgres else [wanted[n : n + CHUNK] for n in range(0, len(wanted), CHUNK)]
    query = _AMONG[postgres, checked]
    place = {"pk": pk, "view": stored.view_key, "generation": stored.generation}
    rows: list[Any] = []
    for chunk in chunks:
        if chunk:
            params = place | {"upto": stored.digest.upto, "asked": chunk}
            found = (await db.execute(query, params)).all()
            rows += [_GONE] if checked and not found else found
    return rows


def _calls_held(rows: Iterable[Any]) -> tuple[set[str], set[str]]:
    """Of (kind, call id) rows, the ids called and every id held."""
    calls: set[str] = set()
    held: set[str] = set()
    for kind, call_id in rows:
        held.add(call_id)
        if kind == "call":
            calls.add(call_id)
    return calls, held


async def history_version(db: AsyncSession, pk: SessionPk) -> int | None:
    """How many compactions rewrote the session's history (None: the session is gone)."""
    return await db.scalar(_VERSION, {"pk": pk})


# Built once, as the other statements of a compile (a statement made anew pays a cache lookup).
_VERSION = select(SessionRow.history_version).where(SessionRow.pk == bindparam("pk"))


@dataclass(frozen=True)
class Place:
    """Where a digest is kept: a session's history at one version, as one view compiles it."""

    pk: SessionPk
    view_key: str
    version: int


async def save(
    db: AsyncSession,
    at: Place,
    digest: Digest,
    ids: Ids,
    now: datetime,
    prior: Stored | None = None,
) -> bool:
    """Keep ``digest`` (made of the history ``at``) and the ids its part added, in one
    transaction under the session's lock; the caller commits. Without a ``prior`` it replaces
    the digest kept under ``at``'s key, made anew from the whole history; with one (what it was
    moved forward from) it moves that digest, unless another replaced or moved it first. False
    when nothing was kept (the history changed, the session is gone, or the prior is no longer
    there). A prior kept under another key is moved by making the digest anew under ``at``'s,
    its ids copied: the prior stays where it is."""
    if not await queries.lock_session(db, at.pk) or await history_version(db, at.pk) != at.version:
        return False
    data = digest.to_json() | {"version": at.version}
    if prior is None:
        generation = await _replace(db, at, digest.upto, data, now)
    elif prior.view_key != at.view_key:
        if not await still(db, Place(at.pk, prior.view_key, at.version), prior):
            return False
        generation = await _replace(db, at, digest.upto, data, now)
        await _copy_ids(db, at, prior, generation)
    elif await _move(db, at, prior, digest.upto, data, now):
        generation = prior.generation
    else:
        return False
    await _keep_ids(db, at, generation, digest.upto, ids)
    return True


async def _replace(
    db: AsyncSession, at: Place, upto: int, data: dict[str, Any], now: datetime
) -> str:
    """The digest under ``at``'s key (and its ids) replaced by a new generation's, made of
    ``data``."""
    generation = str(uuid.uuid4())
    ids = delete(DigestIdRow).where(
        DigestIdRow.session_pk == at.pk, DigestIdRow.view_key == at.view_key
    )
    await db.execute(ids)
    view = delete(DigestRow).where(DigestRow.session_pk == at.pk, DigestRow.view_key == at.view_key)
    await db.execute(view)
    row = DigestRow(
        session_pk=at.pk,
        view_key=at.view_key,
        generation=generation,
        upto=upto,
        digest=data,
        updated_at=now,
    )
    db.add(row)
    await db.flush()
    return generation


async def _move(
    db: AsyncSession,
    at: Place,
    prior: Stored,
    upto: int,
    data: dict[str, Any],
    now: datetime,
) -> bool:
    """``prior`` moved forward to ``upto``; False when another replaced or moved it first (a
    move from where it no longer is would keep beside this part's ids those of the other's,
    which another execution's view may have taken)."""
    moved = await db.execute(
        update(DigestRow)
        .where(
            DigestRow.session_pk == at.pk,
            DigestRow.view_key == at.view_key,
            DigestRow.generation == prior.generation,
            DigestRow.upto == prior.digest.upto,
        )
        .values(upto=upto, digest=data, updated_at=now)
    )
    return bool(getattr(moved, "rowcount", 0))


async def _copy_ids(db: AsyncSession, at: Place, prior: Stored, generation: str) -> None:
    """The ids of ``prior``'s older part, kept again for ``generation`` under ``at``'s key."""
    params = {
        "pk": at.pk,
        "view": prior.view_key,
        "generation": prior.generation,
        "upto": prior.digest.upto,
        "to_view": at.view_key,
        "to_generation": generation,
    }
    await db.execute(_COPY_IDS, params)


_COPY_IDS = insert(cast(Table, DigestIdRow.__table__)).from_select(
    [_IDS.session_pk, _IDS.view_key, _IDS.generation, _IDS.kind, _IDS.call_id, _IDS.upto],
    select(
        _IDS.session_pk,
        bindparam("to_view", type_=String),
        bindparam("to_generation", type_=String),
        _IDS.kind,
        _IDS.call_id,
        _IDS.upto,
    ).where(
        _IDS.session_pk == bindparam("pk"),
        _IDS.view_key == bindparam("view"),
        _IDS.generation == bindparam("generation"),
        _IDS.upto <= bindparam("upto"),
    ),
)


async def _keep_ids(db: AsyncSession, at: Place, generation: str, upto: int, ids: Ids) -> None:
    """The tool call ids (calls, and other ids taken) the digest's part up to ``upto`` holds."""
    rows = [("call", cid) for cid in ids.calls] + [("id", cid) for cid in ids.taken - ids.calls]
    values = [
        {
            "session_pk": at.pk,
            "view_key": at.view_key,
            "generation": generation,
            "kind": kind,
            "call_id": cid,
            "upto": upto,
        }
        for kind, cid in rows
    ]
    await queries.insert_new(db, DigestIdRow, values)
