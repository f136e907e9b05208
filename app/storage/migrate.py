"""Alembic, driven from code: `ctxc migrate`, the start-up schema check and the tests."""

from __future__ import annotations

import asyncio
import functools
from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.script import ScriptDirectory
from sqlalchemy import inspect, text
from sqlalchemy.engine import Connection, make_url
from sqlalchemy.ext.asyncio import AsyncEngine

from app.storage.db import create_engine, ensure_sqlite_dir


class SchemaNotCurrent(RuntimeError):
    """The database schema is missing, older than this code expects, or unknown to it."""


def migrations_dir() -> Path:
    """The Alembic scripts: inside the package when installed from a wheel (the build puts the
    repository's migrations/ there), else next to app/ in the source tree."""
    packaged = Path(__file__).resolve().parents[1] / "migrations"
    if (packaged / "env.py").is_file():
        return packaged
    return Path(__file__).resolve().parents[2] / "migrations"


def alembic_config(url: str) -> Config:
    config = Config()
    config.set_main_option("script_location", str(migrations_dir()))
    config.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    return config


def sqlite_file(url: str) -> Path | None:
    """The file of a SQLite URL; None for other databases and in-memory SQLite."""
    parsed = make_url(url)
    if parsed.get_backend_name() != "sqlite" or parsed.database in (None, "", ":memory:"):
        return None
    return Path(parsed.database).expanduser()


def describe(url: str) -> str:
    """The database a URL names, for messages (the password hidden)."""
    path = sqlite_file(url)
    return str(path) if path is not None else make_url(url).render_as_string(hide_password=True)


def upgrade(url: str, revision: str = "head") -> None:
    """Apply migrations up to ``revision`` (synchronous; not for a running event loop)."""
    if url.startswith("sqlite"):
        ensure_sqlite_dir(url)
    command.upgrade(alembic_config(url), revision)


def downgrade(url: str, revision: str) -> None:
    command.downgrade(alembic_config(url), revision)


@functools.cache
def _scripts() -> ScriptDirectory:
    """The migration scripts shipped with this code, read once (every /readyz asks for the
    head; reading them is blocking file I/O)."""
    return ScriptDirectory.from_config(alembic_config("sqlite://"))


def head_revision() -> str:
    head = _scripts().get_current_head()
    assert head is not None
    return head


def _known(revision: str) -> bool:
    return any(script.revision == revision for script in _scripts().walk_revisions())


def _unknown_revision(revision: str) -> SchemaNotCurrent:
    return SchemaNotCurrent(
        f"the database has schema revision {revision}, which this ctxc does not know (its "
        f"newest is {head_revision()}); was it migrated by a newer ctxc?"
    )


VERSION_TABLE = "alembic_version"  # Alembic's default, which migrations/env.py keeps


def _current(connection: Connection) -> str | None:
    # Read as Alembic stores it, not through a MigrationContext, which logs two INFO lines on
    # every check (every /readyz).
    if not inspect(connection).has_table(VERSION_TABLE):
        return None
    revision: str | None = connection.execute(
        text(f"SELECT version_num FROM {VERSION_TABLE}")
    ).scalar()
    return revision


async def current_revision(engine: AsyncEngine) -> str | None:
    async with engine.connect() as conn:
        return await conn.run_sync(_current)


async def _revision_at(url: str) -> str | None:
    path = sqlite_file(url)
    if path is not None and not path.exists():
        return None
    engine = create_engine(url)
    try:
        return await current_revision(engine)
    finally:
        await engine.dispose()


def migrate(url: str) -> tuple[str | None, str]:
    """Create or upgrade the schema to the newest revision (synchronous): the revisions before
    (None: there was no schema) and after."""
    before = asyncio.run(_revision_at(url))
    if before is not None and not _known(before):
        raise _unknown_revision(before)
    upgrade(url)
    return before, head_revision()


async def check_schema(engine: AsyncEngine) -> None:
    """Refuse to run on a missing, older or unknown schema, saying what to run."""
    current, head = await current_revision(engine), head_revision()
    if current == head:
        return
    if current is not None and not _known(current):
        raise _unknown_revision(current)
    found = "no schema" if current is None else f"schema revision {current}"
    raise SchemaNotCurrent(f"the database has {found}, this ctxc needs {head}: run `ctxc migrate`")
