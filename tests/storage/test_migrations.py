"""Migrations upgrade and downgrade on both databases, and agree with the models."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import inspect
from sqlalchemy.engine import Connection

from app.storage.db import create_engine
from app.storage.migrate import downgrade, head_revision, upgrade
from app.storage.models import Base
from tests.conftest import fresh_database


def _inspect(url: str, work: Any) -> Any:
    async def run() -> Any:
        engine = create_engine(url)
        try:
            async with engine.connect() as conn:
                return await conn.run_sync(work)
        finally:
            await engine.dispose()

    return asyncio.run(run())


def _tables(conn: Connection) -> set[str]:
    return set(inspect(conn).get_table_names())


def _diff(conn: Connection) -> list[Any]:
    context = MigrationContext.configure(conn, opts={"compare_type": True})
    return list(compare_metadata(context, Base.metadata))


def _revision(conn: Connection) -> str | None:
    return MigrationContext.configure(conn).get_current_revision()


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_upgrade_downgrade_upgrade(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    url = fresh_database(kind, tmp_path, request)
    upgrade(url)
    assert _inspect(url, _revision) == head_revision()
    assert _inspect(url, _tables) >= set(Base.metadata.tables)
    downgrade(url, "base")
    assert _inspect(url, _tables) <= {"alembic_version"}
    assert _inspect(url, _revision) is None
    upgrade(url)
    assert _inspect(url, _revision) == head_revision()


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_models_and_migrations_agree(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    url = fresh_database(kind, tmp_path, request)
    upgrade(url)
    assert _inspect(url, _diff) == []


def _events_sql(conn: Connection) -> str:
    return str(conn.exec_driver_sql("SELECT sql FROM sqlite_master WHERE name = 'events'").scalar())


def _seed(conn: Connection) -> None:
    now = "2026-11-25 00:00:00"
    conn.exec_driver_sql(f"INSERT INTO tenants VALUES ('t', 't', '{now}')")
    conn.exec_driver_sql(
        "INSERT INTO sessions (pk, tenant_id, id, metadata, system_prompt, provider, last_seq, "
        f"created_at, updated_at) VALUES ('s', 't', 's', '{{}}', '[]', 'openai', 0, '{now}', "
        f"'{now}')"
    )
    for n in (1, 2, 3):
        conn.exec_driver_sql(f"INSERT INTO events VALUES ({n}, 's', 'x', '{{}}', '{now}')")
    conn.commit()


def _event_ids(conn: Connection) -> list[int]:
    return [row[0] for row in conn.exec_driver_sql("SELECT id FROM events ORDER BY id")]


def test_sqlite_event_ids_become_autoincrement_and_keep_their_rows(tmp_path: Path) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'events.db'}"
    upgrade(url, "0003")
    assert "AUTOINCREMENT" not in _inspect(url, _events_sql)
    _inspect(url, _seed)
    upgrade(url)
    assert "AUTOINCREMENT" in _inspect(url, _events_sql)
    assert _inspect(url, _event_ids) == [1, 2, 3]
    downgrade(url, "0003")
    assert "AUTOINCREMENT" not in _inspect(url, _events_sql)
    assert _inspect(url, _event_ids) == [1, 2, 3]


def _seed_messages(conn: Connection) -> None:
    """At 0005: two sessions with messages (counted as appends count them), one without."""
    now = "2026-11-25 00:00:00"
    conn.exec_driver_sql(f"INSERT INTO tenants VALUES ('t', 't', '{now}')")
    for pk, last in (("a", 3), ("b", 2), ("empty", 0)):
        conn.exec_driver_sql(
            "INSERT INTO sessions (pk, tenant_id, id, metadata, system_prompt, provider, "
            f"last_seq, created_at, updated_at) VALUES ('{pk}', 't', '{pk}', '{{}}', '[]', "
            f"'openai', {last}, '{now}', '{now}')"
        )
    for pk, seq, o200k, cl100k in (
        ("a", 1, 10, 11),
        ("a", 2, 20, 22),
        ("a", 3, 5, 7),
        ("b", 2, 100, 90),
    ):
        conn.exec_driver_sql(
            "INSERT INTO messages (session_pk, seq, section, role, content, metadata, "
            f"tokens_o200k, tokens_cl100k, created_at) VALUES ('{pk}', {seq}, 'history', "
            f"'user', '[]', '{{}}', {o200k}, {cl100k}, '{now}')"
        )
    conn.commit()


def _session_totals(conn: Connection) -> dict[str, tuple[int, int, int]]:
    rows = conn.exec_driver_sql(
        "SELECT pk, message_count, tokens_o200k, tokens_cl100k FROM sessions ORDER BY pk"
    )
    return {pk: (count, o200k, cl100k) for pk, count, o200k, cl100k in rows}


def _session_columns(conn: Connection) -> set[str]:
    return {c["name"] for c in inspect(conn).get_columns("sessions")}


def _message_count(conn: Connection) -> int:
    return int(conn.exec_driver_sql("SELECT count(*) FROM messages").scalar_one())


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_session_totals_are_backfilled_from_existing_messages(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    url = fresh_database(kind, tmp_path, request)
    upgrade(url, "0005")
    _inspect(url, _seed_messages)
    upgrade(url, "0006")
    expected = {"a": (3, 35, 40), "b": (1, 100, 90), "empty": (0, 0, 0)}
    assert _inspect(url, _session_totals) == expected
    downgrade(url, "0005")
    assert "message_count" not in _inspect(url, _session_columns)
    assert _inspect(url, _message_count) == 4
    upgrade(url)
    assert _inspect(url, _session_totals) == expected


def _seed_threads(conn: Connection) -> None:
    """At 0011: a session with its thread, and one beside it that noted its root and family in
    its metadata (as the sidecar did before 0012)."""
    now = "2026-11-28 00:00:00"
    conn.exec_driver_sql(f"INSERT INTO tenants VALUES ('t', 't', '{now}')")
    beside = '{"ctxc_thread_of": "main", "ctxc_thread_root": "' + "ab" * 32 + '"}'
    for pk, noted in (("main", '{"ctxc_thread_root": "' + "cd" * 32 + '"}'), ("side", beside)):
        conn.exec_driver_sql(
            "INSERT INTO sessions (pk, tenant_id, id, metadata, system_prompt, provider, "
            f"last_seq, created_at, updated_at) VALUES ('{pk}', 't', '{pk}', '{noted}', '[]', "
            f"'anthropic', 0, '{now}', '{now}')"
        )
        conn.exec_driver_sql(
            "INSERT INTO proxy_threads (session_pk, format, sent, chain, raw, replies, reply, "
            f"turns, forks, updated_at) VALUES ('{pk}', 'anthropic', 1, '', '', 0, '', 1, 0, "
            f"'{now}')"
        )
    conn.commit()


def _thread_roots(conn: Connection) -> dict[str, tuple[str | None, str | None]]:
    rows = conn.exec_driver_sql("SELECT session_pk, root, family FROM proxy_threads")
    return {pk: (root, family) for pk, root, family in rows}


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_thread_roots_are_filled_from_the_metadata_they_were_noted_in(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    url = fresh_database(kind, tmp_path, request)
    upgrade(url, "0011")
    _inspect(url, _seed_threads)
    upgrade(url, "0012")
    assert _inspect(url, _thread_roots) == {
        "main": ("cd" * 32, None),
        "side": ("ab" * 32, "main"),
    }
    downgrade(url, "0011")
    upgrade(url)


def _seed_compactions(conn: Connection) -> None:
    """At 0013: a session's compactions by the named summariser, by its fallback, and one that
    called none (tool payloads rewritten in place)."""
    now = "2026-11-28 00:00:00"
    conn.exec_driver_sql(f"INSERT INTO tenants VALUES ('t', 't', '{now}')")
    conn.exec_driver_sql(
        "INSERT INTO sessions (pk, tenant_id, id, metadata, system_prompt, provider, "
        f"last_seq, created_at, updated_at) VALUES ('s', 't', 's', '{{}}', '[]', "
        f"'openai', 0, '{now}', '{now}')"
    )
    for cid, kind, summarizer in (
        ("named", "session", "'webhook'"),
        ("fell", "session", "'ledger (fallback: webhook: HTTP 500 (1 attempt))'"),
        ("none", "tool_payloads", "NULL"),
    ):
        conn.exec_driver_sql(
            "INSERT INTO compactions (id, session_pk, kind, reason, archived, tokens_before, "
            "tokens_after, summary_tokens, cache_rewrite_tokens, resets_provider_session, "
            f"summarizer, created_at) VALUES ('{cid}', 's', '{kind}', 'x', '[]', 9, 5, 1, 5, "
            f"false, {summarizer}, '{now}')"
        )
    conn.commit()


def _summarizer_reasons(conn: Connection) -> dict[str, str | None]:
    rows = conn.exec_driver_sql("SELECT id, summarizer_reason FROM compactions")
    return {cid: reason for cid, reason in rows}


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_compactions_written_before_say_why_not_the_named_summariser_as_their_summariser_did(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    url = fresh_database(kind, tmp_path, request)
    upgrade(url, "0013")
    _inspect(url, _seed_compactions)
    upgrade(url, "0014")
    expected = {"named": None, "fell": "fallback", "none": "not_summarized"}
    assert _inspect(url, _summarizer_reasons) == expected
    downgrade(url, "0013")
    upgrade(url)
    assert _inspect(url, _summarizer_reasons) == expected
