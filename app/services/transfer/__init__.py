"""Export a session's whole context as records, and import such records into a new session.

Everything a session holds moves: its fields with the cursor and provider session id (the
session reads the same, and a provider session that holds the history is not lost), every
message as stored, each compaction with its archive, the payloads kept by sha256, and the compile
records (an acknowledgement names one, and the last reported usage drives reactive compaction).
The tool call index is rebuilt from the messages, archived ones included, as appends built it.
Events are not moved: they notify live subscribers, and their ids are this database's own.

Export reads a page at a time; import checks each record as it comes (``Ledger``) and writes in
batches inside one transaction, so a long session moves in bounded memory and a document that
does not fit writes nothing.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from app.domain.errors import Conflict, InvalidInput, Path
from app.domain.formats.convert import canonical_messages
from app.domain.limits import message_problems
from app.domain.messages import Message
from app.domain.models import Catalog
from app.domain.sessions import SessionPk, TenantId
from app.domain.tokens import TokenCounter
from app.services.sessions import SessionView, Stamp, add_session, require_session, view
from app.services.sessions.messages import tool_parts
from app.services.tenancy import cpu
from app.services.transfer.ledger import Ledger, refuse, written_by_compaction
from app.storage import queries
from app.storage import transfer as store
from app.storage.models import (
    CompactionRow,
    CompileRow,
    MessageRow,
    PayloadRow,
    ToolPartRow,
    at_offset,
    utc_offset,
)

V2 = "ctxc.session/v2"
PAGE = 1_000
COMPACTION_FIELDS = (
    "id",
    "kind",
    "reason",
    "seq_from",
    "seq_to",
    "summary_seq",
    "tokens_before",
    "tokens_after",
    "summary_tokens",
    "cache_rewrite_tokens",
    "resets_provider_session",
    "summarizer",
    "summarizer_reason",
    "created_at",
    "archived",
    "loss",
    "prepared_at",
    "economics",
)
COMPILE_FIELDS = (
    "id",
    "mode",
    "seq_from",
    "seq_to",
    "token_total",
    "created_at",
    "acknowledged_at",
    "reported_at",
    "usage",
    "error_kind",
    "estimate",
    "count_key",
)
Record = dict[str, Any]


def session_fields(row: Any) -> Record:
    return {
        "id": row.id,
        "metadata": row.meta,
        "system_prompt": row.system_prompt,
        "response_format": row.response_format,
        "provider": row.provider,
        "profile": row.profile,
        "resume_key": row.resume_key,
        "context_window": row.context_window,
        "compiler": row.compiler,
        "compaction": row.compaction_policy,
        "created_at": row.created_at,
        "updated_at": row.updated_at,
        "last_seq": row.last_seq,
        "cursor_seq": row.cursor_seq,
        "provider_session_id": row.provider_session_id,
    }


async def export_records(
    db: AsyncSession, tenant: TenantId, session_id: str
) -> AsyncIterator[Record]:
    """The header (``format`` and ``session``), then one record per message, compaction,
    payload and compile, each with its ``type``; read a page at a time from one snapshot."""
    await store.snapshot(db)
    row = await require_session(db, tenant, session_id)
    start = datetime.now(UTC)
    pk = SessionPk(row.pk)
    yield {"format": V2, "session": session_fields(row)}
    for part in (
        _messages(db, pk, row.last_seq),
        _compactions(db, pk, start),
        _payloads(db, pk),
        _compiles(db, pk),
    ):
        async for record in part:
            yield record


async def _messages(db: AsyncSession, pk: SessionPk, last_seq: int) -> AsyncIterator[Record]:
    after = 0  # messages appended since the header (SQLite) have seqs beyond its last_seq
    while after < last_seq and (page := await store.message_page(db, pk, after, last_seq, PAGE)):
        for m in page:
            yield {
                "type": "message",
                "seq": m.seq,
                "section": m.section,
                "created_at": at_offset(m.created_at, m.created_offset),
                "message": _canonical(m),
            }
        after = page[-1].seq


async def _compactions(db: AsyncSession, pk: SessionPk, start: datetime) -> AsyncIterator[Record]:
    for cid in await store.compaction_ids(db, pk, start):
        found = await queries.compaction_row(db, pk, cid)
        if found is not None:
            yield {"type": "compaction"} | {k: getattr(found, k) for k in COMPACTION_FIELDS}
            db.expunge(found)


async def _payloads(db: AsyncSession, pk: SessionPk) -> AsyncIterator[Record]:
    sha = ""
    while payloads := await store.payload_page(db, pk, sha, PAGE):
        for p in payloads:
            yield {
                "type": "payload",
                "sha256": p.sha256,
                "value": p.value,
                "bytes": p.bytes,
                "created_at": p.created_at,
            }
        sha = payloads[-1].sha256
        db.expunge_all()


async def _compiles(db: AsyncSession, pk: SessionPk) -> AsyncIterator[Record]:
    cursor: tuple[datetime, str] | None = None
    while compiles := await store.compile_page(db, pk, cursor, PAGE):
        for c in compiles:
            yield {"type": "compile"} | {k: getattr(c, k) for k in COMPILE_FIELDS}
        cursor = (compiles[-1].created_at, compiles[-1].id)
        db.expunge_all()


def _canonical(row: Any) -> Record:
    """A stored message as its canonical document (stored content is already canonical)."""
    message: Record = {"role": row.role, "content": row.content}
    if row.name is not None:
        message["name"] = row.name
    return message | {"metadata": row.metadata}


def _counted(counter: TokenCounter, where: list[Path], raw: list[Any]) -> list[Any]:
    """Parse and count a batch of canonical messages (CPU work: in a worker thread)."""
    try:
        messages = canonical_messages(raw)
        problems = message_problems(messages)
    except InvalidInput as exc:
        problems = list(exc.problems)
    if problems:
        raise InvalidInput([((*where[int(p[0])], "message", *p[1:]), m) for p, m in problems])
    return [(m, counter.count_all(m)) for m in messages]


class Importer:
    """Writes one imported session: ``start`` with its fields, ``add`` each record in order,
    ``finish``. Any problem raises (``InvalidInput`` located, or ``Conflict``); the caller then
    rolls back, and nothing was written."""

    def __init__(
        self, db: AsyncSession, counter: TokenCounter, tenant: TenantId, catalog: Catalog
    ) -> None:
        self.db, self.counter, self.tenant, self.catalog = db, counter, tenant, catalog
        self.pk = SessionPk("")
        self.row: Any = None
        self.ledger = Ledger(0, strict=True)
        self.batch: list[tuple[Path, Record]] = []
        self.rewrites: dict[int, list[Record]] = {}  # tool rows of rewritten live messages
        self.compiles: list[Record] = []
        self.payloads: list[Record] = []
        self.session_where: Path = ("session",)
        self.taken = ""  # a kept id this database already has (nothing is written then)
        # The session's running totals, of the messages written so far (set on it at the end).
        self.count, self.tokens = 0, dict.fromkeys(queries.TOTAL_COLUMNS, 0)

    async def start(self, fields: Record, where: Path, strict: bool = True) -> None:
        fields = dict(fields)
        last_seq, cursor = fields.pop("last_seq"), fields.pop("cursor_seq", None)
        provider_session = fields.pop("provider_session_id", None)
        if cursor is not None and cursor > last_seq:
            raise refuse((*where, "cursor_seq"), f"beyond last_seq {last_seq}")
        self.ledger, self.session_where = Ledger(last_seq, strict), where
        columns = {k: v for k, v in fields.items() if k not in ("id", "created_at", "updated_at")}
        stamp = Stamp(fields["created_at"], fields["updated_at"], last_seq)
        self.row = await add_session(
            self.db, self.tenant, fields["id"], columns, stamp, self.catalog
        )
        self.row.cursor_seq, self.row.provider_session_id = cursor, provider_session
        self.pk = SessionPk(self.row.pk)

    async def add(self, where: Path, kind: str, fields: Record) -> None:
        self.ledger.record(where, kind)
        if kind != "message":
            await self._flush_messages()
        if kind == "message":
            self.batch.append((where, fields))
            if len(self.batch) >= PAGE:
                await self._flush_messages()
        elif kind == "compaction":
            await self._compaction(where, fields)
        elif kind == "payload":
            self.ledger.payload(where, fields)
            self.payloads.append(
                {"session_pk": self.pk}
                | {k: fields[k] for k in ("sha256", "value", "bytes", "created_at")}
            )
            if len(self.payloads) >= PAGE // 10:
                await self._flush_payloads()
        else:
            self.ledger.compile(where, fields)
            self.compiles.append({"session_pk": self.pk} | fields)
            if len(self.compiles) >= PAGE:
                await self._flush_compiles()

    async def finish(self) -> SessionView:
        await self._flush_messages()
        await self._flush_payloads()
        await self._flush_compiles()
        self.ledger.finish(self.session_where)
        if self.taken:  # told after the document's own problems: they are the first to mend
            raise Conflict(
                f"{self.taken} already exists in this database: a document imports "
                "once per database (ids are kept)"
            )
        rows = [
            r
            for seq, found in self.rewrites.items()
            if seq not in self.ledger.indexed
            for r in found
        ]
        await store.insert_rows(self.db, ToolPartRow, rows)
        self.row.message_count = self.count
        for encoding, column in queries.TOTAL_COLUMNS.items():
            setattr(self.row, column, self.tokens[encoding])
        await self.db.flush()
        return view(self.row, self.catalog)

    async def _flush_messages(self) -> None:
        if not self.batch:
            return
        batch, self.batch = self.batch, []
        where = [w for w, _ in batch]
        counted = await cpu.run_sync(
            _counted, self.counter, where, [f["message"] for _, f in batch]
        )
        rows, parts = [], []
        for (w, fields), (message, counts) in zip(batch, counted, strict=True):
            seq, written = fields["seq"], written_by_compaction(message)
            self.ledger.message(w, seq, written)
            rows.append(self._message_row(fields, message, counts))
            self.count += 1
            for encoding in self.tokens:
                self.tokens[encoding] += counts[encoding]
            tools = tool_parts(self.pk, seq, message)
            if written:
                self.rewrites[seq] = tools
            else:
                parts += tools
        await store.insert_rows(self.db, MessageRow, rows)
        await store.insert_rows(self.db, ToolPartRow, parts)

    def _message_row(self, fields: Record, message: Message, counts: dict[str, int]) -> Record:
        at: datetime = fields["created_at"]
        return {
            "session_pk": self.pk,
            "seq": fields["seq"],
            "section": fields["section"],
            "role": message.role,
            "name": message.name,
            "content": message.to_json().get("content", []),
            "metadata": message.metadata,
            "tokens_o200k": counts["o200k_base"],
            "tokens_cl100k": counts["cl100k_base"],
            "created_at": at,
            "created_offset": utc_offset(at),
        }

    async def _compaction(self, where: Path, fields: Record) -> None:
        self.ledger.compaction(where, fields)
        for i, entry in enumerate(fields["archived"]):
            try:
                message = Message.model_validate(
                    {k: entry[k] for k in ("role", "name", "content", "metadata")}
                )
            except ValueError as exc:
                raise refuse((*where, "archived", i), str(exc).splitlines()[0]) from None
            seq = entry["seq"]
            if written_by_compaction(message) or seq in self.ledger.indexed:
                continue
            if self.ledger.live_original(seq):
                continue
            self.ledger.indexed.add(seq)
            parts = tool_parts(self.pk, seq, message)
            await store.insert_rows(self.db, ToolPartRow, parts)
        if await store.taken(self.db, CompactionRow, [fields["id"]]):
            self.taken = self.taken or f"compaction {fields['id']!r}"
            return
        record = CompactionRow(session_pk=self.pk, **fields)
        self.db.add(record)
        await self.db.flush()
        self.db.expunge(record)  # its archive is not held after it is written

    async def _flush_payloads(self) -> None:
        batch, self.payloads = self.payloads, []
        await store.insert_rows(self.db, PayloadRow, batch)

    async def _flush_compiles(self) -> None:
        batch, self.compiles = self.compiles, []
        taken = await store.taken(self.db, CompileRow, [c["id"] for c in batch])
        if taken:
            self.taken = self.taken or f"compile {taken!r}"
            return
        await store.insert_rows(self.db, CompileRow, batch)


async def import_records(
    db: AsyncSession,
    importer: Importer,
    header: tuple[Path, Record, bool],
    records: AsyncIterator[tuple[Path, str, Record]],
) -> SessionView:
    """Import a header and its records in one transaction: committed whole, or rolled back."""
    try:
        where, fields, strict = header
        await importer.start(fields, where, strict)
        async for where, kind, fields in records:
            await importer.add(where, kind, fields)
        done = await importer.finish()
        await db.commit()
    except BaseException:
        await db.rollback()
        raise
    return done
