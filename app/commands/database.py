"""What every `ctxc` command that uses the database shares: its refusals and its one call."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TypeVar

from sqlalchemy.exc import DBAPIError, SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncSession

from app.settings import Settings
from app.storage.db import create_engine, create_sessionmaker
from app.storage.migrate import SchemaNotCurrent, check_schema, describe, sqlite_file

T = TypeVar("T")


class Refusal(Exception):
    """A condition the command reports in one line (exit status 1), with no traceback."""


def reason(exc: Exception) -> str:
    """The first line of what went wrong, in the database driver's own words where it has some."""
    cause: BaseException = exc
    if isinstance(exc, DBAPIError) and exc.orig is not None:
        cause = exc.orig
    lines = str(cause).strip().splitlines()
    return lines[0] if lines else type(cause).__name__


def db_call(settings: Settings, work: Callable[[AsyncSession], Awaitable[T]]) -> T:
    """``work`` on a migrated database; a missing SQLite file is reported, never created."""
    url = settings.database_url

    async def run() -> T:
        engine = create_engine(url)
        try:
            await check_schema(engine)
            async with create_sessionmaker(engine)() as db:
                return await work(db)
        finally:
            await engine.dispose()

    try:
        path = sqlite_file(url)
        if path is not None and not path.is_file():
            raise Refusal(
                f"there is no database at {path}: run `ctxc migrate` to create it "
                "(or set CTXC_DATABASE_URL to the one you mean)"
            )
        return asyncio.run(run())
    except SchemaNotCurrent as exc:
        raise Refusal(str(exc)) from exc
    except (OSError, SQLAlchemyError) as exc:
        raise Refusal(f"cannot use the database {describe(url)}: {reason(exc)}") from exc
