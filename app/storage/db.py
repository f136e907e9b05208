"""Engine and sessionmaker for either database."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import orjson
from sqlalchemy import event
from sqlalchemy.engine import make_url
from sqlalchemy.exc import DisconnectionError
from sqlalchemy.ext.asyncio import (
    AsyncEngine,
    AsyncSession,
    async_sessionmaker,
    create_async_engine,
)

SQLITE_BUSY_TIMEOUT_S = 30.0
# Where orjson could read an integer as a float (past 64 bits): a run of 19 digits.
_DIGITS = re.compile(r"[0-9]{19}")
_DIGITS_BYTES = re.compile(rb"[0-9]{19}")
CONNECT_TIMEOUT_S = 10  # a Postgres server that does not answer: a fault after this, not a hang


def _sqlite_pragmas(dbapi_conn: Any, _record: Any) -> None:
    cursor = dbapi_conn.cursor()
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.close()


def _custom_plans(dbapi_conn: Any, _record: Any) -> None:
    # Postgres otherwise keeps, per connection and statement, a generic plan made once, while the
    # tables were small and maybe without statistics; such a plan once scanned a session's whole
    # tool part index on every delta compile (5 ms at 100,000 messages). Planning each execution
    # with its values costs tens of microseconds.
    try:
        dbapi_conn.run_async(lambda conn: conn.execute("SET plan_cache_mode = force_custom_plan"))
    except Exception as exc:
        # Terminated while being set up: asyncpg may then report a confused state, not the loss.
        if dbapi_conn.driver_connection.is_closed():
            raise DisconnectionError("the server closed a new connection") from exc
        raise


def _drop_closed(dbapi_conn: Any, _record: Any, _proxy: Any) -> None:
    # asyncpg notices at once when the server closes a connection (a restart, a terminated
    # backend, an idle timeout); the pool then hands out a fresh one. This replaces a ping,
    # which costs three round trips (BEGIN, ping, ROLLBACK) on every checkout.
    if dbapi_conn.driver_connection.is_closed():
        raise DisconnectionError("the server closed the connection")


def _file_id(path: str) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino


def _watch_sqlite_file(engine: AsyncEngine, path: str) -> None:
    """Refuse pooled connections to a SQLite file that was removed or replaced: an open
    connection would go on reading and writing the removed file, whose data nobody will ever
    see. The pool then opens the path again: a fault while it is gone, the new file when it is
    back (a restore)."""

    def remember(_dbapi_conn: Any, record: Any) -> None:
        record.info["file"] = _file_id(path)

    def check(_dbapi_conn: Any, record: Any, _proxy: Any) -> None:
        found = _file_id(path)
        if found is None or found != record.info.get("file"):
            error = DisconnectionError("the SQLite file was removed or replaced")
            error.invalidate_pool = True  # every pooled connection has the stale file open
            raise error

    event.listen(engine.sync_engine, "connect", remember)
    event.listen(engine.sync_engine, "checkout", check)


def ensure_sqlite_dir(url: str) -> None:
    """Create the folder of a SQLite file so a fresh checkout needs no set-up."""
    database = make_url(url).database
    if database and database != ":memory:":
        Path(database).expanduser().parent.mkdir(parents=True, exist_ok=True)


def create_engine(
    url: str, pool_size: int = 10, busy_timeout_s: float = SQLITE_BUSY_TIMEOUT_S
) -> AsyncEngine:
    """An async engine; SQLite gets foreign keys, WAL and a busy timeout on every connection
    and a check that its file is still there, Postgres a connect timeout."""
    if url.startswith("sqlite"):
        ensure_sqlite_dir(url)
        engine = create_async_engine(
            url, connect_args={"timeout": busy_timeout_s}, json_deserializer=json_loads
        )
        event.listen(engine.sync_engine, "connect", _sqlite_pragmas)
        database = make_url(url).database
        if database and database != ":memory:" and not database.startswith("file:"):
            _watch_sqlite_file(engine, database)
        return engine
    engine = create_async_engine(
        url,
        pool_size=pool_size,
        max_overflow=pool_size,
        connect_args={"timeout": CONNECT_TIMEOUT_S},
        json_deserializer=json_loads,
    )
    event.listen(engine.sync_engine, "connect", _custom_plans)
    event.listen(engine.sync_engine, "checkout", _drop_closed)
    return engine


async def autocommit(db: AsyncSession) -> None:
    """On Postgres, run each statement of ``db`` as its own transaction; call it before the
    first query. For use cases that read and then write a single row: under READ COMMITTED the
    statements of a transaction share no snapshot anyway, so this only saves the BEGIN and COMMIT
    round trips. SQLite is left as it is: its driver begins a transaction only before the first
    write, so there too the reads before it share no snapshot (what must agree is read in one
    statement, as a history's version with its rows, or checked again under the session's
    lock)."""
    if db.get_bind().dialect.name == "postgresql":
        await db.connection(execution_options={"isolation_level": "AUTOCOMMIT"})


def json_loads(text: str | bytes) -> Any:
    """A stored JSON value: orjson, several times faster than the standard library on the
    message contents a compile reads; the standard library where orjson would read another
    value (it makes a float of an integer past 64 bits: only a value holding a float is looked
    at for a run of 19 digits, which goes there) or refuses the text (NaN, a lone surrogate)."""
    try:
        value = orjson.loads(text)
    except orjson.JSONDecodeError:
        return json.loads(text)
    if _has_float(value):
        digits = _DIGITS_BYTES if isinstance(text, bytes) else _DIGITS
        if digits.search(text) is not None:  # type: ignore[arg-type]
            return json.loads(text)
    return value


def _has_float(value: Any) -> bool:
    """Whether a parsed JSON value holds a float anywhere (by its nodes, not its text)."""
    stack = [value]
    while stack:
        node = stack.pop()
        kind = type(node)
        if kind is dict:
            stack.extend(node.values())
        elif kind is list:
            stack.extend(node)
        elif kind is float:
            return True
    return False


def create_sessionmaker(engine: AsyncEngine) -> async_sessionmaker[AsyncSession]:
    return async_sessionmaker(engine, expire_on_commit=False)
