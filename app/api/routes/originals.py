"""Originals of what compaction took out of the view: by tool call id, and by sha256."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Query

from app.api.archive_schemas import (
    FieldDigest,
    PayloadRead,
    ToolCallRead,
    ToolCallShapes,
    ToolResultRead,
)
from app.api.deps import DbDep, TenantDep
from app.api.problems import responses
from app.domain.formats.convert import Format
from app.domain.formats.documents import Provider, call_shape, result_shape
from app.services.sessions import originals
from app.services.sessions.originals import Digests, ToolCall

router = APIRouter(prefix="/v1/sessions/{session_id}", tags=["originals"])
MAX_SEQ = 2**63 - 1


def _digests(found: Digests | None) -> dict[str, FieldDigest] | None:
    if found is None:
        return None
    return {key: FieldDigest(bytes=size, sha256=sha) for key, (size, sha) in found.items()}


@router.get(
    "/tool-calls/{call_id:path}", responses=responses(401, 404, 422), operation_id="get_tool_call"
)
async def get_tool_call(
    session_id: str,
    call_id: Annotated[str, Path(max_length=512, pattern=r"^[^\x00]+$")],
    db: DbDep,
    tenant: TenantDep,
    seq: Annotated[
        int | None,
        Query(ge=1, le=MAX_SEQ, description="The seq of the call's or the result's message."),
    ] = None,
    format: Annotated[Format, Query()] = "canonical",
) -> ToolCallRead | ToolCallShapes:
    """The original arguments and result of a tool call, with each field's size and sha256:
    exactly as stored (canonical), or in a provider's shape (OpenAI: the `tool_calls` entry and
    the `tool` message; Anthropic: the `tool_use` and `tool_result` blocks). Where a call id
    repeats across assistant turns, the newest turn's call unless `seq` names another."""
    found = await originals.tool_call(db, tenant, session_id, call_id, seq)
    if format != "canonical":
        return _shapes(format, found)
    result = found.result
    return ToolCallRead(
        call_id=found.call_id,
        seq=found.seq,
        name=found.call.name if found.call else None,
        arguments=found.call.arguments if found.call else None,
        argument_fields=_digests(found.fields),
        result=ToolResultRead(
            seq=result.seq,
            content=result.part.model_dump(mode="json")["content"],
            is_error=result.part.is_error,
            fields=_digests(result.fields),
        )
        if result
        else None,
        turns=found.turns,
    )


def _shapes(fmt: Provider, found: ToolCall) -> ToolCallShapes:
    result = found.result
    return ToolCallShapes(
        format=fmt,
        call_id=found.call_id,
        seq=found.seq,
        call=call_shape(fmt, found.call) if found.call else None,
        argument_fields=_digests(found.fields),
        result_seq=result.seq if result else None,
        result=result_shape(fmt, result.message, result.part) if result else None,
        result_fields=_digests(result.fields) if result else None,
        turns=found.turns,
    )


@router.get("/payloads/{sha256}", responses=responses(401, 404, 422), operation_id="get_payload")
async def get_payload(
    session_id: str,
    sha256: Annotated[str, Path(pattern=r"^[0-9a-f]{64}$", description="Lowercase hex.")],
    db: DbDep,
    tenant: TenantDep,
) -> PayloadRead:
    """An original tool payload field that a compile of this session replaced, by the sha256
    the compile reported (in `_tool_compaction` metadata or on the call's fields)."""
    row = await originals.payload(db, tenant, session_id, sha256)
    return PayloadRead(sha256=row.sha256, bytes=row.bytes, value=row.value)
