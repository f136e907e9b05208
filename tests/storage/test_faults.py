"""Faults of the database are told apart from our own bugs, on real errors of both databases."""

from __future__ import annotations

import asyncio
import logging
import sqlite3
import uuid
from pathlib import Path

import asyncpg
import httpx
import pytest
from sqlalchemy import text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import DBAPIError, PendingRollbackError
from starlette.types import Receive, Scope, Send

from app.api.middleware import CatchAll
from app.api.unavailable import RETRY_AFTER_S
from app.storage.db import create_engine
from app.storage.faults import is_fault
from tests.conftest import _asyncpg_dsn, admin


async def _error(url: str, sql: str, **engine: float) -> BaseException:
    db = create_engine(url, **engine)  # type: ignore[arg-type]
    try:
        async with db.begin() as conn:
            await conn.execute(text(sql))
    except Exception as exc:
        return exc
    finally:
        await db.dispose()
    raise AssertionError(f"{sql} did not fail")


def error(url: str, sql: str, **engine: float) -> BaseException:
    return asyncio.run(_error(url, sql, **engine))


@pytest.mark.parametrize(
    "sql",
    [
        "SELEC 1",  # syntax
        "SELECT no_such_column FROM (SELECT 1 AS a) AS t",
        "SELECT 1 / 0",
        "SELECT CAST('x' AS INTEGER) + CAST(:nope AS INTEGER)",  # a missing bind parameter
    ],
)
def test_our_own_mistakes_are_not_faults(database_url: str, sql: str) -> None:
    if database_url.startswith("sqlite") and sql == "SELECT 1 / 0":
        pytest.skip("SQLite answers NULL")
    assert not is_fault(error(database_url, sql))


def test_a_constraint_violation_is_not_a_fault(database_url: str) -> None:
    sql = "INSERT INTO tenants (id, name, created_at) VALUES ('x', NULL, NULL)"
    exc = error(database_url, sql)
    assert isinstance(exc, DBAPIError) and not is_fault(exc)


def test_a_database_that_does_not_exist_is_a_fault(postgres_base: str) -> None:
    url = postgres_base + "_no_such_database"
    assert is_fault(error(url, "SELECT 1"))


def test_a_refused_connection_is_a_fault(postgres_base: str) -> None:
    from tests.conftest import free_port

    url = postgres_base.replace("127.0.0.1:5432", f"127.0.0.1:{free_port()}")
    assert is_fault(error(url, "SELECT 1"))


def test_too_many_connections_is_a_fault(postgres_base: str) -> None:
    role = f"ctxc_limited_{uuid.uuid4().hex[:8]}"
    admin(f"CREATE ROLE {role} LOGIN CONNECTION LIMIT 0")
    try:
        url = make_url(postgres_base).set(username=role).render_as_string(hide_password=False)
        exc = error(url, "SELECT 1")
    finally:
        admin(f"DROP ROLE {role}")
    assert "too many connections" in str(exc) and is_fault(exc)


def test_a_deadlock_is_a_fault(postgres_base: str) -> None:
    """Two transactions take two locks in opposite orders: Postgres aborts one of them."""

    async def run() -> BaseException:
        one, two = [await asyncpg.connect(_asyncpg_dsn(postgres_base)) for _ in range(2)]
        try:
            async with one.transaction(), two.transaction():
                await one.execute("SELECT pg_advisory_xact_lock(1)")
                await two.execute("SELECT pg_advisory_xact_lock(2)")
                outcome = await asyncio.gather(
                    one.execute("SELECT pg_advisory_xact_lock(2)"),
                    two.execute("SELECT pg_advisory_xact_lock(1)"),
                    return_exceptions=True,
                )
        except asyncpg.PostgresError as exc:  # the loser's transaction cannot commit
            outcome = [exc]
        finally:
            await one.close()
            await two.close()
        [lost] = [o for o in outcome if isinstance(o, BaseException)]
        return lost

    exc = asyncio.run(run())
    assert isinstance(exc, asyncpg.DeadlockDetectedError) and is_fault(exc)


def test_a_missing_schema_is_a_fault(database_url: str) -> None:
    assert is_fault(error(database_url, "SELECT * FROM no_such_table_here"))


def test_sqlite_locked_beyond_the_busy_timeout_is_a_fault(tmp_path: Path) -> None:
    path = tmp_path / "locked.db"
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("CREATE TABLE t (a INTEGER)")
    holder.execute("BEGIN EXCLUSIVE")
    try:
        exc = error(f"sqlite+aiosqlite:///{path}", "INSERT INTO t VALUES (1)", busy_timeout_s=0.1)
    finally:
        holder.close()
    assert "database is locked" in str(exc) and is_fault(exc)


def test_sqlite_that_cannot_be_opened_is_a_fault(tmp_path: Path) -> None:
    folder = tmp_path / "gone"
    url = f"sqlite+aiosqlite:///{folder / 'x.db'}"
    engine = create_engine(url)  # creates the folder
    asyncio.run(engine.dispose())
    folder.rmdir()

    async def run() -> BaseException:
        try:
            async with engine.connect() as conn:
                await conn.execute(text("SELECT 1"))
        except Exception as exc:
            # aiosqlite stops the failed connection's thread without waiting: let it finish
            # while this loop still runs.
            await asyncio.sleep(0.2)
            return exc
        finally:
            await engine.dispose()
        raise AssertionError("opened")

    assert is_fault(asyncio.run(run()))


def test_asyncpg_told_of_a_termination_while_idle_is_a_fault_misuse_is_a_bug() -> None:
    # The texts asyncpg gives: the server ended the idle connection (its protocol is left
    # consuming that error), versus two operations at once on one connection (our bug).
    idle = "cannot switch to state 12; another operation (2) is in progress"
    busy = "cannot switch to state 12; another operation (11) is in progress"
    assert is_fault(asyncpg.InternalClientError(idle))
    assert not is_fault(asyncpg.InternalClientError(busy))
    misuse = "cannot perform operation: another operation is in progress"
    assert not is_fault(asyncpg.InterfaceError(misuse))


def test_a_fault_among_other_errors_is_still_a_bug() -> None:
    fault = ConnectionResetError()
    assert is_fault(ExceptionGroup("all faults", [fault, ConnectionRefusedError()]))
    assert not is_fault(ExceptionGroup("one bug", [fault, KeyError("x")]))
    try:
        try:
            raise fault
        except ConnectionResetError as inner:
            raise PendingRollbackError("while handling the fault", None, inner) from inner
    except PendingRollbackError as outer:
        assert is_fault(outer)  # the database layer failed because of the fault
    try:
        try:
            raise fault
        except ConnectionResetError as inner:
            raise httpx.ConnectError("a summariser is down") from inner
    except httpx.ConnectError as outer:
        assert not is_fault(outer)  # not the database's


async def _raising(exc: BaseException, times: int) -> list[httpx.Response]:
    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        raise exc

    transport = httpx.ASGITransport(app=CatchAll(app))
    async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
        return [await client.get("/x") for _ in range(times)]


def test_a_fault_is_a_503_with_retry_after_logged_without_a_traceback(
    caplog: pytest.LogCaptureFixture, postgres_base: str
) -> None:
    exc = error(postgres_base + "_no_such_database", "SELECT 1")
    with caplog.at_level(logging.WARNING, logger="ctxc"):
        answers = asyncio.run(_raising(exc, 3))
    for answer in answers:
        assert answer.status_code == 503
        assert answer.headers["retry-after"] == str(RETRY_AFTER_S)
        assert answer.headers["content-type"] == "application/problem+json"
        assert answer.json()["type"] == "urn:ctxc:problem:database-unavailable"
        assert "no_such_database" not in answer.text
    [record] = caplog.records  # one line for the burst, no traceback
    assert record.levelno == logging.WARNING and record.exc_info is None
