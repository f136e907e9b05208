"""`ctxc`: serve, migrate, manage API keys, export and import sessions."""

from __future__ import annotations

import argparse
import logging
import sys
from datetime import UTC, datetime
from importlib.metadata import PackageNotFoundError, version

from pydantic import ValidationError
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncSession

from app.commands import transfer as transfer_cli
from app.commands.database import Refusal, db_call, reason
from app.domain.errors import Conflict, NotFound
from app.logs import json_handler
from app.services.tenancy import keys
from app.settings import Settings, is_loopback
from app.storage.migrate import SchemaNotCurrent, describe, migrate


async def _nothing(_: AsyncSession) -> None:
    return None


def _serve(settings: Settings, args: argparse.Namespace) -> int:
    import uvicorn

    from app.server import uvicorn_config

    host = args.host or settings.host
    port = args.port or settings.port
    if settings.auth == "local" and not is_loopback(host):
        print(
            f"ctxc: refusing to serve without API keys on {host}: local mode is for loopback "
            "addresses only. Set CTXC_AUTH=keys (and create keys with `ctxc keys create`).",
            file=sys.stderr,
        )
        return 2
    workers = args.workers or settings.serve_workers
    db_call(settings, _nothing)
    logging.basicConfig(level=settings.log_level.upper(), handlers=[json_handler()], force=True)
    config = uvicorn_config(
        "app.main:create_app", settings, factory=True, host=host, port=port, workers=workers
    )
    if workers == 1:
        uvicorn.Server(config).run()
    else:
        # uvicorn's supervisor: the socket is bound here and every worker accepts on it; a
        # worker that dies is replaced. Each builds its own app (create_app) from CTXC_*.
        from uvicorn.supervisors import Multiprocess

        Multiprocess(config, sockets=[config.bind_socket()]).run()
    return 0


def _migrate(settings: Settings) -> int:
    url = settings.database_url
    try:
        before, head = migrate(url)
        where = describe(url)
    except SchemaNotCurrent as exc:
        raise Refusal(str(exc)) from exc
    except (OSError, SQLAlchemyError) as exc:
        raise Refusal(f"cannot migrate the database {describe(url)}: {reason(exc)}") from exc
    if before is None:
        print(f"created the schema of {where} at revision {head}")
    elif before == head:
        print(f"the schema of {where} is already current (revision {head}): nothing to do")
    else:
        print(f"upgraded the schema of {where} from revision {before} to {head}")
    return 0


def _keys(settings: Settings, args: argparse.Namespace) -> int:
    now = datetime.now(UTC)
    if args.keys_command == "create":
        try:
            key, info = db_call(
                settings, lambda db: keys.create_key(db, args.tenant, args.label, now)
            )
        except Conflict as exc:
            print(f"ctxc: {exc}", file=sys.stderr)
            return 1
        print(key)
        print(f"(tenant {info.tenant}, id {info.id}; this key is shown once)", file=sys.stderr)
    elif args.keys_command == "list":
        listed = db_call(settings, keys.list_keys)
        for info in listed:
            state = f"revoked {info.revoked_at.isoformat()}" if info.revoked_at else "active"
            print(f"{info.id}\t{info.prefix}\t{info.tenant}\t{info.label or ''}\t{state}")
        if not listed:
            print(
                "ctxc: no keys yet (create one with `ctxc keys create --tenant NAME`)",
                file=sys.stderr,
            )
    else:
        try:
            info = db_call(settings, lambda db: keys.revoke_key(db, args.key, now))
        except NotFound as exc:
            print(f"ctxc: {exc}", file=sys.stderr)
            return 1
        if info.revoked_at is not None and info.revoked_at != now:
            print(
                f"{info.id} ({info.prefix}, tenant {info.tenant}) was already revoked at "
                f"{info.revoked_at.isoformat()}"
            )
        else:
            print(f"revoked {info.id} ({info.prefix}, tenant {info.tenant})")
    return 0


def _version() -> str:
    try:
        return version("ctxc")
    except PackageNotFoundError:
        return "unknown (not installed)"


def _port(text: str) -> int:
    if not text.isdigit() or not 1 <= int(text) <= 65535:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port number (1-65535)")
    return int(text)


def _workers(text: str) -> int:
    if not text.isdigit() or not 1 <= int(text) <= 64:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of workers (1-64)")
    return int(text)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="ctxc",
        description="Context compilation as a service.",
        epilog="Settings come from CTXC_* environment variables; the database is "
        "CTXC_DATABASE_URL (default: ./data/ctxc.db, relative to the current directory).",
    )
    parser.add_argument("--version", action="version", version=f"ctxc {_version()}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    serve = commands.add_parser(
        "serve",
        help="run the HTTP service (on a migrated database)",
        description="Run the HTTP service. Refuses to start on a missing or unmigrated database "
        "and, in local mode (CTXC_AUTH=local), on a non-loopback address.",
    )
    serve.add_argument("--host", help="listen address (default: CTXC_HOST, else 127.0.0.1)")
    serve.add_argument("--port", type=_port, help="listen port (default: CTXC_PORT, else 8080)")
    serve.add_argument(
        "--workers",
        type=_workers,
        help="server processes on the one port (default: CTXC_WORKERS, else 1)",
    )
    commands.add_parser(
        "migrate",
        help="create or upgrade the database schema",
        description="Create the database schema, or upgrade it to this version's, with Alembic "
        "(SQLite or Postgres). Says what it did; running it again does nothing.",
    )
    key_parser = commands.add_parser(
        "keys",
        help="manage API keys (on a migrated database)",
        description="Manage the API keys of CTXC_AUTH=keys mode. Keys are stored as sha256.",
    )
    key_commands = key_parser.add_subparsers(
        dest="keys_command", required=True, metavar="KEYS_COMMAND"
    )
    create = key_commands.add_parser(
        "create",
        help="create a key and print it once",
        description="Create a key for a tenant (the tenant is created if new) and print it "
        "once, on stdout.",
    )
    create.add_argument(
        "--tenant", required=True, help="tenant the key acts as (`local` is reserved)"
    )
    create.add_argument("--label", help="a note stored with the key, shown by `keys list`")
    key_commands.add_parser(
        "list",
        help="list keys (never the keys themselves)",
        description="One line per key: id, shown prefix, tenant, label, state.",
    )
    revoke = key_commands.add_parser(
        "revoke",
        help="revoke a key by id or shown prefix",
        description="Revoke a key. Running servers refuse it within CTXC_KEY_CACHE_SECONDS.",
    )
    revoke.add_argument("key", metavar="ID_OR_PREFIX", help="the key's id or its shown prefix")
    transfer_cli.add_commands(commands)
    return parser


def _settings() -> Settings | None:
    """The settings from the environment, or None after saying what is wrong with them."""
    try:
        return Settings()
    except ValidationError as exc:
        for error in exc.errors():
            where = "".join(f"CTXC_{str(part).upper()}: " for part in error["loc"])
            print(f"ctxc: configuration error: {where}{error['msg']}", file=sys.stderr)
        return None


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    settings = _settings()
    if settings is None:
        return 2
    try:
        if args.command == "serve":
            return _serve(settings, args)
        if args.command == "migrate":
            return _migrate(settings)
        if args.command in ("export", "import"):
            return transfer_cli.run(settings, args)
        return _keys(settings, args)
    except Refusal as exc:
        print(f"ctxc: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
