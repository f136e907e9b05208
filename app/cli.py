"""`ctxc`: serve, migrate, manage API keys."""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import TypeVar

from pydantic import ValidationError
from sqlalchemy.ext.asyncio import AsyncSession

from app.domain.errors import Conflict, NotFound
from app.logs import json_handler
from app.services import keys
from app.settings import Settings, is_loopback
from app.storage.db import create_engine, create_sessionmaker
from app.storage.migrate import upgrade

T = TypeVar("T")


def _serve(settings: Settings, args: argparse.Namespace) -> int:
    import uvicorn

    host = args.host or settings.host
    port = args.port or settings.port
    if settings.auth == "local" and not is_loopback(host):
        print(
            f"ctxc: refusing to serve without API keys on {host}: local mode is for loopback "
            "addresses only. Set CTXC_AUTH=keys (and create keys with `ctxc keys create`).",
            file=sys.stderr,
        )
        return 2
    logging.basicConfig(level=settings.log_level.upper(), handlers=[json_handler()], force=True)
    config = uvicorn.Config(
        "app.main:create_app",
        factory=True,
        host=host,
        port=port,
        log_config=None,
        access_log=False,
        proxy_headers=False,
    )
    uvicorn.Server(config).run()
    return 0


def _db_call(settings: Settings, work: Callable[[AsyncSession], Awaitable[T]]) -> T:
    async def run() -> T:
        engine = create_engine(settings.database_url)
        try:
            async with create_sessionmaker(engine)() as db:
                return await work(db)
        finally:
            await engine.dispose()

    return asyncio.run(run())


def _keys(settings: Settings, args: argparse.Namespace) -> int:
    now = datetime.now(UTC)
    if args.keys_command == "create":
        try:
            key, info = _db_call(
                settings, lambda db: keys.create_key(db, args.tenant, args.label, now)
            )
        except Conflict as exc:
            print(f"ctxc: {exc}", file=sys.stderr)
            return 1
        print(key)
        print(f"(tenant {info.tenant}, id {info.id}; this key is shown once)", file=sys.stderr)
    elif args.keys_command == "list":
        for info in _db_call(settings, keys.list_keys):
            state = f"revoked {info.revoked_at.isoformat()}" if info.revoked_at else "active"
            print(f"{info.id}\t{info.prefix}\t{info.tenant}\t{info.label or ''}\t{state}")
    else:
        try:
            info = _db_call(settings, lambda db: keys.revoke_key(db, args.key, now))
        except NotFound as exc:
            print(f"ctxc: {exc}", file=sys.stderr)
            return 1
        print(f"revoked {info.id} ({info.prefix}, tenant {info.tenant})")
    return 0


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="ctxc", description="Context compilation as a service.")
    commands = parser.add_subparsers(dest="command", required=True)
    serve = commands.add_parser("serve", help="run the HTTP service")
    serve.add_argument("--host", help="listen address (default CTXC_HOST or 127.0.0.1)")
    serve.add_argument("--port", type=int, help="listen port (default CTXC_PORT or 8080)")
    commands.add_parser("migrate", help="apply database migrations (Alembic)")
    key_parser = commands.add_parser("keys", help="manage API keys")
    key_commands = key_parser.add_subparsers(dest="keys_command", required=True)
    create = key_commands.add_parser("create", help="create a key and print it once")
    create.add_argument("--tenant", required=True)
    create.add_argument("--label")
    key_commands.add_parser("list", help="list keys (never the keys themselves)")
    revoke = key_commands.add_parser("revoke", help="revoke a key by id or shown prefix")
    revoke.add_argument("key")
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
    if args.command == "serve":
        return _serve(settings, args)
    if args.command == "migrate":
        upgrade(settings.database_url)
        print("ctxc: database schema is current", file=sys.stderr)
        return 0
    return _keys(settings, args)


if __name__ == "__main__":
    sys.exit(main())
