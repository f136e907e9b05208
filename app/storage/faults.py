"""Faults of the database, told apart from our own bugs.

A fault is outside the service and passes by itself or by an operator's hand: the server is
unreachable or restarting, the connection was terminated (a failover), the database is gone or
has no schema yet, it is out of connections or disk, a transaction lost a serialization race or
a deadlock, a SQLite file is locked beyond the busy timeout or cannot be opened. Callers answer
those with "try again later" (HTTP 503 and Retry-After). Anything else is a bug: a 500.
"""

from __future__ import annotations

import sqlite3

import asyncpg
from sqlalchemy import exc as sa

# Postgres SQLSTATE classes and codes that are faults (https://www.postgresql.org/docs/current/
# errcodes-appendix.html).
FAULT_CLASSES = (
    "08",  # connection exception
    "28",  # invalid authorization (credentials rotated or revoked)
    "53",  # insufficient resources: too many connections, disk full, out of memory
    "58",  # system error: I/O error
)
FAULT_CODES = {
    "25006",  # read_only_sql_transaction: a standby after a failover, or read-only mode
    "3D000",  # invalid_catalog_name: the database does not exist
    "3F000",  # invalid_schema_name
    "42P01",  # undefined_table: the database has no schema (not migrated, being restored)
    "40001",  # serialization_failure
    "40P01",  # deadlock_detected
    "55P03",  # lock_not_available
    "57014",  # query_canceled: statement timeout, or cancelled by an operator
    "57P01",  # admin_shutdown (pg_terminate_backend, a fast shutdown)
    "57P02",  # crash_shutdown
    "57P03",  # cannot_connect_now: starting up, or in recovery
    "57P04",  # database_dropped
    "57P05",  # idle_session_timeout
}
# SQLite primary result codes that are faults (https://sqlite.org/rescode.html).
SQLITE_FAULTS = {
    sqlite3.SQLITE_BUSY,  # locked beyond the busy timeout
    sqlite3.SQLITE_LOCKED,
    sqlite3.SQLITE_NOMEM,
    sqlite3.SQLITE_READONLY,  # the file or its folder is not writable
    sqlite3.SQLITE_IOERR,
    sqlite3.SQLITE_CORRUPT,
    sqlite3.SQLITE_FULL,
    sqlite3.SQLITE_CANTOPEN,  # the file or its folder is gone
    sqlite3.SQLITE_PROTOCOL,
    sqlite3.SQLITE_NOTADB,
}
SQLITE_MISSING_SCHEMA = "no such table"
# asyncpg's protocol state 2 is "consuming an error": the server sent one while the connection
# was idle (it terminated the backend) and the socket's end is not processed yet.
IDLE_ERROR = "another operation (2) is in progress"


def is_fault(error: BaseException) -> bool:
    """True when ``error`` (or what caused it) is a fault of the database, not a bug."""
    return _walk(error, set())


def _walk(error: BaseException | None, seen: set[int]) -> bool:
    if error is None or id(error) in seen:
        return False
    seen.add(id(error))
    if isinstance(error, BaseExceptionGroup):
        return all(_walk(inner, seen) for inner in error.exceptions)
    if _is_fault_itself(error):
        return True
    if not _of_a_database(error):
        return False  # e.g. an HTTP client's error caused by an OSError: not the database's
    orig = getattr(error, "orig", None) if isinstance(error, sa.DBAPIError) else None
    return _walk(orig, seen) or _walk(error.__cause__, seen) or _walk(error.__context__, seen)


def _of_a_database(error: BaseException) -> bool:
    """Errors of the database layers, whose causes are worth a look."""
    return isinstance(error, (sa.SQLAlchemyError, sqlite3.Error)) or type(
        error
    ).__module__.startswith("asyncpg")


def _is_fault_itself(error: BaseException) -> bool:
    if isinstance(error, sa.DBAPIError) and error.connection_invalidated:
        return True
    if isinstance(error, (sa.TimeoutError, sa.DisconnectionError, OSError)):
        return True  # the pool waited in vain, a connection died, the network failed
    if isinstance(error, (asyncpg.PostgresConnectionError, asyncpg.ConnectionDoesNotExistError)):
        return True
    if isinstance(error, asyncpg.InternalClientError) and IDLE_ERROR in str(error):
        return True
    sqlstate = getattr(error, "sqlstate", None)  # asyncpg's errors and its adapter's
    if isinstance(sqlstate, str) and len(sqlstate) == 5:
        return sqlstate in FAULT_CODES or sqlstate[:2] in FAULT_CLASSES
    if isinstance(error, sqlite3.Error):
        code = getattr(error, "sqlite_errorcode", 0) & 0xFF
        return code in SQLITE_FAULTS or SQLITE_MISSING_SCHEMA in str(error)
    return False
