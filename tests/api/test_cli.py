"""`ctxc` from any directory: one-line errors on a missing or unmigrated database (and no file
left behind), `migrate` saying what it did, `--version`, help on every option."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

import pytest

from app.cli import _parser
from app.storage.migrate import downgrade, head_revision, upgrade
from tests.conftest import free_port, fresh_database

CTXC = [sys.executable, "-m", "app.cli"]


def ctxc(*args: str, cwd: Path, url: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CTXC_")}
    if url is not None:
        env["CTXC_DATABASE_URL"] = url
    return subprocess.run(
        [*CTXC, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=120
    )


def one_line_error(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 1, result.stdout + result.stderr
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("ctxc: "), result.stderr
    return lines[0]


@pytest.mark.parametrize(
    "args",
    [
        ("keys", "list"),
        ("keys", "create", "--tenant", "acme"),
        ("keys", "revoke", "ctxc_abc"),
        ("serve", "--port", str(free_port())),
    ],
)
def test_commands_on_a_missing_database_say_to_migrate_and_create_nothing(
    args: tuple[str, ...], tmp_path: Path
) -> None:
    line = one_line_error(ctxc(*args, cwd=tmp_path))  # the default ./data/ctxc.db
    assert "no database at data/ctxc.db" in line and "run `ctxc migrate`" in line
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_keys_on_an_unmigrated_or_older_database_say_to_migrate(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    url = fresh_database(kind, tmp_path, request)
    if kind == "sqlite":
        upgrade(url, "0001")
        downgrade(url, "base")  # a file with no schema in it
    line = one_line_error(ctxc("keys", "list", cwd=tmp_path, url=url))
    assert line == f"ctxc: the database has no schema, this ctxc needs {head_revision()}: " + (
        "run `ctxc migrate`"
    )
    upgrade(url, "0001")
    line = one_line_error(ctxc("keys", "create", "--tenant", "acme", cwd=tmp_path, url=url))
    assert "has schema revision 0001" in line and "run `ctxc migrate`" in line


def test_an_unreachable_database_is_one_line_with_the_password_hidden(tmp_path: Path) -> None:
    url = f"postgresql+asyncpg://ctxc:secret@127.0.0.1:{free_port()}/ctxc"
    for args in (("keys", "list"), ("migrate",)):
        line = one_line_error(ctxc(*args, cwd=tmp_path, url=url))
        assert "ctxc:***@127.0.0.1" in line and "secret" not in line


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("not a url", "not a database URL"),
        ("sqlite:///x.db", "the driver 'sqlite' is not supported"),
        ("postgresql://h/db", "the driver 'postgresql' is not supported"),
    ],
)
def test_an_unsupported_database_url_is_a_configuration_error(
    url: str, expected: str, tmp_path: Path
) -> None:
    result = ctxc("migrate", cwd=tmp_path, url=url)
    assert result.returncode == 2
    assert result.stderr.startswith("ctxc: configuration error: CTXC_DATABASE_URL: ")
    assert expected in result.stderr and "postgresql+asyncpg://" in result.stderr
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_migrate_says_what_it_did(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    url = fresh_database(kind, tmp_path, request)
    head = head_revision()
    created = ctxc("migrate", cwd=tmp_path, url=url)
    assert created.returncode == 0, created.stderr
    assert created.stdout.startswith("created the schema of ")
    assert created.stdout.rstrip().endswith(f"at revision {head}")
    again = ctxc("migrate", cwd=tmp_path, url=url)
    assert f"is already current (revision {head}): nothing to do" in again.stdout
    downgrade(url, "0001")
    upgraded = ctxc("migrate", cwd=tmp_path, url=url)
    assert f"from revision 0001 to {head}" in upgraded.stdout
    if kind == "postgres":
        assert "postgresql+asyncpg://" in created.stdout and "@" in created.stdout


def test_migrate_creates_the_default_database_in_the_current_directory(tmp_path: Path) -> None:
    result = ctxc("migrate", cwd=tmp_path)
    assert result.stdout == f"created the schema of data/ctxc.db at revision {head_revision()}\n"
    assert (tmp_path / "data" / "ctxc.db").is_file()
    listed = ctxc("keys", "list", cwd=tmp_path)
    assert listed.returncode == 0 and listed.stdout == ""
    assert "no keys yet" in listed.stderr


def test_a_schema_from_a_newer_ctxc_is_refused_by_name(tmp_path: Path) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'newer.db'}"
    upgrade(url)
    import sqlite3

    with sqlite3.connect(tmp_path / "newer.db") as conn:
        conn.execute("UPDATE alembic_version SET version_num = '9999'")
    for args in (("migrate",), ("keys", "list")):
        line = one_line_error(ctxc(*args, cwd=tmp_path, url=url))
        assert "revision 9999, which this ctxc does not know" in line


def test_revoking_twice_says_it_was_already_revoked(tmp_path: Path) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'keys.db'}"
    upgrade(url)
    ctxc("keys", "create", "--tenant", "acme", cwd=tmp_path, url=url)
    key_id = ctxc("keys", "list", cwd=tmp_path, url=url).stdout.split("\t")[0]
    assert ctxc("keys", "revoke", key_id, cwd=tmp_path, url=url).stdout.startswith("revoked ")
    again = ctxc("keys", "revoke", key_id, cwd=tmp_path, url=url)
    assert again.returncode == 0 and "was already revoked at " in again.stdout


def test_version_is_the_installed_package_version(tmp_path: Path) -> None:
    result = ctxc("--version", cwd=tmp_path)
    assert result.returncode == 0
    assert result.stdout == f"ctxc {version('ctxc')}\n"


def _parsers(parser: argparse.ArgumentParser) -> list[argparse.ArgumentParser]:
    found = [parser]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                found += _parsers(sub)
    return found


def test_every_command_and_option_has_help() -> None:
    parsers = _parsers(_parser())
    assert {p.prog for p in parsers} >= {"ctxc keys create", "ctxc keys revoke", "ctxc serve"}
    for parser in parsers:
        assert parser.description, parser.prog
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                assert all(choice.help for choice in action._choices_actions), parser.prog
            else:
                assert action.help, f"{parser.prog} {action.option_strings or action.dest}"


@pytest.mark.parametrize("port", ["0", "65536", "http"])
def test_serve_refuses_a_port_that_is_not_one(port: str, tmp_path: Path) -> None:
    result = ctxc("serve", "--port", port, cwd=tmp_path)
    assert result.returncode == 2
    assert f"argument --port: '{port}' is not a port number (1-65535)" in result.stderr
