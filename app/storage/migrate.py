"""Alembic, driven from code: `ctxc migrate`, the start-up schema check and the tests."""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.script import ScriptDirectory
from sqlalchemy import inspect, text
from sqlalchemy.engine import Connection
from sqlalchemy.ext.asyncio import AsyncEngine

from app.storage.db import ensure_sqlite_dir

MIGRATIONS_DIR = Path(__file__).resolve().parents[2] / "migrations"


class SchemaNotCurrent(RuntimeError):
    """The database schema is missing or older than this code expects."""


def alembic_config(url: str) -> Config:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    config.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    return config


def upgrade(url: str, revision: str = "head") -> None:
    """Apply migrations up to ``revision`` (synchronous; not for a running event loop)."""
    if url.startswith("sqlite"):
        ensure_sqlite_dir(url)
    command.upgrade(alembic_config(url), revision)


def downgrade(url: str, revision: str) -> None:
    command.downgrade(alembic_config(url), revision)


def head_revision() -> str:
    head = ScriptDirectory.from_config(alembic_config("sqlite://")).get_current_head()
    assert head is not None
    return head


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


async def check_schema(engine: AsyncEngine) -> None:
    """Refuse to run on a missing or older schema, saying what to run."""
    current, head = await current_revision(engine), head_revision()
    if current != head:
        found = "no schema" if current is None else f"schema revision {current}"
        raise SchemaNotCurrent(
            f"the database has {found}, this ctxc needs {head}: run `ctxc migrate`"
        )
