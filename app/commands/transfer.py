"""`ctxc export` and `ctxc import`: sessions as NDJSON (``ctxc.session/v2``), straight from and
into the database, for backups and moves.

``ctxc export SESSION`` writes one session; ``ctxc export --all`` every session of a tenant, to
one file (the sessions one after another, each from its header line) or to a folder (one
``<id>.ndjson`` each). ``ctxc import`` reads either, in one transaction: all sessions restored,
or none. Progress goes to stderr when it is a terminal.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

import pydantic_core
from sqlalchemy.ext.asyncio import AsyncSession

from app.adapters.tokenizers import load_counter
from app.api.transfer_ndjson import Reader
from app.commands.database import Refusal, db_call
from app.domain.errors import Conflict, InvalidInput, NotFound, UnknownName
from app.domain.sessions import TenantId
from app.services import transfer
from app.services.tenancy import keys
from app.settings import LOCAL_TENANT, Settings
from app.storage import queries

PROGRESS_EVERY = 5_000


def add_commands(commands: Any) -> None:
    """Register `export` and `import` on the `ctxc` parser's subcommands."""
    export = commands.add_parser(
        "export",
        help="write a session (or a tenant's sessions) as NDJSON, for backups and moves",
        description="Write a session's whole context as NDJSON (ctxc.session/v2): messages, "
        "compactions with their archives, payloads, compile records and cursor. With --all, "
        "every session of the tenant: -o a folder gives one <id>.ndjson each, else one file.",
    )
    export.add_argument("session", nargs="?", metavar="SESSION", help="the session id")
    export.add_argument("--tenant", default=LOCAL_TENANT, help="tenant name (default: local)")
    export.add_argument("--all", action="store_true", help="every session of the tenant")
    export.add_argument("-o", "--output", help="file or folder (default: stdout)")
    restore = commands.add_parser(
        "import",
        help="restore sessions from an export (file or folder), all or none",
        description="Import what `ctxc export` wrote (one session, a tenant's file, or a "
        "folder of .ndjson files) in one transaction: a document that does not fit is refused "
        "by file, line and field, and nothing is written.",
    )
    restore.add_argument("file", metavar="FILE", help="an .ndjson file or a folder of them")
    restore.add_argument("--tenant", default=LOCAL_TENANT, help="tenant name (default: local)")


def run(settings: Settings, args: argparse.Namespace) -> int:
    try:
        if args.command == "export":
            if args.all == (args.session is not None):
                raise Refusal("give a SESSION, or --all for every session of the tenant")
            output = Path(args.output) if args.output else None
            args.folder = output if args.all and output and output.is_dir() else None
            db_call(settings, lambda db: _export(db, args))
        else:
            path = Path(args.file)
            if not path.exists():
                raise Refusal(f"there is no file or folder {path}")
            args.files = _files(path)
            count = db_call(settings, lambda db: _import(db, settings, args))
            print(f"imported {count} session(s) into tenant {args.tenant}", file=sys.stderr)
    except (NotFound, Conflict, Refusal) as exc:
        print(f"ctxc: {exc}", file=sys.stderr)
        return 1
    return 0


class _Progress:
    def __init__(self, verb: str) -> None:
        self.verb, self.count, self.tty = verb, 0, sys.stderr.isatty()

    def tick(self, what: str) -> None:
        self.count += 1
        if self.tty and self.count % PROGRESS_EVERY == 0:
            print(f"\r{self.verb} {what}: {self.count} records", end="", file=sys.stderr)

    def done(self, what: str) -> None:
        if self.tty:
            print(f"\r{self.verb} {what}: {self.count} records", file=sys.stderr)
        self.count = 0


async def _tenant(db: AsyncSession, name: str) -> TenantId:
    found = await queries.tenant_by_name(db, name)
    if found is None:
        raise NotFound("tenant", name)
    await db.commit()
    return TenantId(found.id)


@contextmanager
def _opened(path: str | None) -> Iterator[IO[bytes]]:
    if path is None:
        yield sys.stdout.buffer
        return
    with open(path, "wb") as out:
        yield out


async def _export(db: AsyncSession, args: argparse.Namespace) -> None:
    tenant = await _tenant(db, args.tenant)
    progress = _Progress("exported")
    if not args.all:
        with _opened(args.output) as out:
            await _write(db, tenant, args.session, out, progress)
        return
    folder = args.folder
    with _opened(None if folder else args.output) as single:
        async for session_id in _session_ids(db, tenant):
            if folder is None:
                await _write(db, tenant, session_id, single, progress)
                continue
            # A command's own process: blocking writes hold up no one else.
            with open(folder / f"{session_id}.ndjson", "wb") as out:  # noqa: ASYNC230
                await _write(db, tenant, session_id, out, progress)


async def _session_ids(db: AsyncSession, tenant: TenantId) -> AsyncIterator[str]:
    after: str | None = None
    while rows := await queries.session_rows(db, tenant, after, 500):
        ids = [row.id for row in rows]
        await db.commit()  # each session is read in a transaction (a snapshot) of its own
        for session_id in ids:
            yield session_id
        after = ids[-1]


async def _write(
    db: AsyncSession, tenant: TenantId, session_id: str, out: IO[bytes], progress: _Progress
) -> None:
    async for record in transfer.export_records(db, tenant, session_id):
        out.write(pydantic_core.to_json(record) + b"\n")
        progress.tick(session_id)
    await db.commit()
    progress.done(session_id)


def _files(path: Path) -> list[Path]:
    if path.is_dir():
        return sorted(path.glob("*.ndjson"))
    return [path]


async def _import(db: AsyncSession, settings: Settings, args: argparse.Namespace) -> int:
    tenant = await keys.ensure_tenant(db, args.tenant, datetime.now(UTC))
    counter = load_counter()
    progress, count = _Progress("imported"), 0
    try:
        for file in args.files:
            with open(file, "rb") as stream:  # noqa: ASYNC230 (the command's own process)
                count += await _located(
                    file, _sessions(db, Reader(stream), tenant, counter, settings, progress)
                )
        await db.commit()
    except BaseException:
        await db.rollback()
        raise
    return count


async def _sessions(
    db: AsyncSession,
    reader: Reader,
    tenant: TenantId,
    counter: Any,
    settings: Settings,
    progress: _Progress,
) -> int:
    """Import each session of one stream (the caller commits)."""
    count = 0
    while found := await reader.next_session():
        (where, fields, strict), records = found
        importer = transfer.Importer(db, counter, tenant, settings.catalog)
        await importer.start(fields, where, strict)
        async for at, kind, record in records:
            await importer.add(at, kind, record)
            progress.tick(fields["id"])
        await importer.finish()
        progress.done(fields["id"])
        count += 1
    return count


async def _located(file: Path, work: Any) -> Any:
    """``work`` awaited; a problem becomes one line naming the file, line and field."""
    try:
        return await work
    except InvalidInput as exc:
        (where, message), *_ = exc.problems
        line, *rest = where
        field = ".".join(str(p) for p in rest)
        raise Refusal(f"{file} line {line}: {field + ': ' if field else ''}{message}") from None
    except UnknownName as exc:
        raise Refusal(f"{file}: {exc}") from None
