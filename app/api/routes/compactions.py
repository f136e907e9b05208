"""Summarisation compaction: run one now, and the archive of what each one took."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any, cast

from fastapi import APIRouter, Path, Query, status

from app.api.archive_schemas import (
    ArchivedDocument,
    ArchivedMessage,
    CompactionDetail,
    CompactionDocument,
    CompactionList,
    CompactRequest,
)
from app.api.compile_schemas import CompactionEconomics, CompactionRead
from app.api.deps import DbDep, StateDep, TenantDep
from app.api.problems import FieldError, check_body, invalid, responses
from app.domain.formats.convert import Format
from app.domain.formats.documents import Provider, provider_document
from app.domain.messages import JSONObject, Message
from app.domain.summaries import SummarizerReason
from app.services import compaction as service
from app.services.compaction import tool_payloads as persisted_steps
from app.services.compaction.compacting import compact_now
from app.services.tenancy import cpu
from app.storage.models import CompactionRow

router = APIRouter(prefix="/v1/sessions/{session_id}", tags=["compaction"])


def compaction_read(row: CompactionRow) -> CompactionRead:
    return CompactionRead(
        id=row.id,
        kind=row.kind,
        reason=row.reason,
        seq_from=row.seq_from,
        seq_to=row.seq_to,
        summary_seq=row.summary_seq,
        messages=len(row.archived),
        tokens_before=row.tokens_before,
        tokens_after=row.tokens_after,
        tokens_removed=row.tokens_before - row.tokens_after + row.summary_tokens,
        summary_tokens=row.summary_tokens,
        cache_rewrite_tokens=row.cache_rewrite_tokens,
        resets_provider_session=row.resets_provider_session,
        summarizer=row.summarizer,
        summarizer_reason=cast(SummarizerReason | None, row.summarizer_reason),
        created_at=row.created_at,
        prepared_at=row.prepared_at,
        economics=None if row.economics is None else CompactionEconomics(**row.economics),
    )


def _message(entry: dict[str, Any]) -> JSONObject:
    message = {"role": entry["role"], "content": entry["content"], "metadata": entry["metadata"]}
    if entry.get("name") is not None:
        message["name"] = entry["name"]
    return message


def _archived(entry: dict[str, Any]) -> ArchivedMessage:
    return ArchivedMessage(
        seq=entry["seq"],
        section=entry["section"],
        tokens=entry["tokens"],
        created_at=entry["created_at"],
        message=_message(entry),
    )


def _document(fmt: Provider, entries: list[dict[str, Any]]) -> ArchivedDocument:
    stored = [(e["seq"], Message.model_validate(_message(e))) for e in entries]
    found = provider_document(fmt, stored)
    return ArchivedDocument(
        format=fmt,
        system=found.system,
        instructions=found.instructions,
        messages=found.messages,
        seqs=found.seqs,
    )


@router.post(
    "/compact",
    status_code=status.HTTP_201_CREATED,
    responses=responses(400, 401, 404, 409, 413, 422),
    operation_id="compact_session",
)
async def compact_session(
    session_id: str, body: CompactRequest, state: StateDep, db: DbDep, tenant: TenantDep
) -> CompactionRead:
    """Compact now. Summarising kinds move the summarised messages to the compaction's archive
    and one summary message takes their place; `tool_payloads` rewrites old tool payloads in the
    stored messages and archives each one as it was. A 409 when there is nothing to compact."""
    check_body(body)
    payloads = body.kind == "tool_payloads"
    stray = ("policy", body.policy) if payloads else ("steps", body.steps)
    if stray[1] is not None:
        raise invalid([FieldError(path=f"body.{stray[0]}", message=f"not for kind {body.kind}")])
    compactor = state.compactor(db, datetime.now(UTC), "request")
    if body.kind == "tool_payloads":
        done = await persisted_steps.compact_payloads_now(compactor, tenant, session_id, body.steps)
    else:
        done = await compact_now(compactor, tenant, session_id, body.kind, body.policy)
    return compaction_read(done.row)


@router.get("/compactions", responses=responses(401, 404), operation_id="list_compactions")
async def list_compactions(session_id: str, db: DbDep, tenant: TenantDep) -> CompactionList:
    """The session's compactions, oldest first, with their figures."""
    rows = await service.compactions(db, tenant, session_id)
    return CompactionList(items=[compaction_read(r) for r in rows])


@router.get(
    "/compactions/{compaction_id}",
    responses=responses(401, 404, 422),
    operation_id="get_compaction",
)
async def get_compaction(
    session_id: str,
    compaction_id: Annotated[str, Path(max_length=64, pattern=r"^[0-9a-f-]+$")],
    db: DbDep,
    tenant: TenantDep,
    format: Annotated[Format, Query()] = "canonical",
) -> CompactionDetail | CompactionDocument:
    """One compaction with the messages it archived: exactly as they were stored (canonical),
    or as one OpenAI or Anthropic document with `seqs` mapping each message to its stored seq,
    converted as `GET .../messages?format=` converts."""
    row = await service.compaction(db, tenant, session_id, compaction_id)
    read = compaction_read(row)
    if format == "canonical":
        archived = [_archived(e) for e in row.archived]
        return CompactionDetail(**read.model_dump(), archived=archived, loss=row.loss)
    # Converting a large archive is CPU work: off the event loop.
    document = await cpu.run_sync(_document, format, list(row.archived))
    return CompactionDocument(**read.model_dump(), archived=document, loss=row.loss)
