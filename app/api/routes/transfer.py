"""Export and import a session's whole context: one JSON document, or streamed as NDJSON.

``GET /v1/sessions/{id}/export`` answers the document (``ctxc.session/v2``), or with
``Accept: application/x-ndjson`` the same records streamed one per line. ``POST
/v1/sessions/import`` takes either, by ``Content-Type`` (a v1 document still imports).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable
from typing import Any

import pydantic_core
from fastapi import APIRouter, Request, Response, status
from fastapi.responses import StreamingResponse
from sqlalchemy.ext.asyncio import AsyncSession

from app.api.bodies import sized
from app.api.deps import AppState, DbDep, StateDep, TenantDep
from app.api.problems import ProblemError, from_domain, responses
from app.api.routes.sessions import session_read
from app.api.schemas import SessionRead
from app.api.transfer_ndjson import Located, Start, document, spooled_lines, stream_records
from app.api.transfer_schemas import NDJSON, SessionExportV2
from app.domain.errors import Conflict, InvalidInput, UnknownName
from app.domain.sessions import TenantId
from app.services import transfer
from app.services.sessions import SessionView, require_session

router = APIRouter(prefix="/v1/sessions", tags=["sessions"])
_REF = "#/components/schemas/{}"
_NDJSON_SCHEMA = {
    "type": "string",
    "description": "A header line {format, session}, then one record per line with its `type` "
    "(message, compaction, payload, compile).",
}


@router.get(
    "/{session_id}/export",
    responses={
        **responses(401, 404, 409),
        200: {"content": {NDJSON: {"schema": _NDJSON_SCHEMA}}},
    },
    operation_id="export_session",
)
async def export_session(
    session_id: str, request: Request, state: StateDep, db: DbDep, tenant: TenantDep
) -> SessionExportV2:
    """The session's whole context: its fields with the cursor, every message, each compaction
    with its archive, the payloads kept by sha256 and the compile records. With `Accept:
    application/x-ndjson`, streamed one record per line (for sessions of any length)."""
    await require_session(db, tenant, session_id)
    if NDJSON in request.headers.get("accept", ""):
        return StreamingResponse(_lines(state, tenant, session_id), media_type=NDJSON)  # type: ignore[return-value]
    document: dict[str, Any] = {"messages": [], "compactions": [], "payloads": [], "compiles": []}
    async with state.sessionmaker() as snapshot:  # a session of its own: one snapshot
        records = [r async for r in transfer.export_records(snapshot, tenant, session_id)]
    for record in records:
        kind = record.pop("type", None)
        if kind is None:
            document |= record
        else:
            document[f"{kind}s"].append(record)
    return SessionExportV2.model_validate(document)


async def _lines(state: AppState, tenant: TenantId, session_id: str) -> AsyncIterator[bytes]:
    async with state.sessionmaker() as db:  # the request's own session is closed by now
        async for record in transfer.export_records(db, tenant, session_id):
            yield pydantic_core.to_json(record) + b"\n"


@router.post(
    "/import",
    status_code=status.HTTP_201_CREATED,
    responses=responses(400, 401, 409, 413, 415, 422),
    operation_id="import_session",
    response_model=SessionRead,
    openapi_extra={
        "requestBody": {
            "required": True,
            "content": {
                "application/json": {
                    "schema": {
                        "oneOf": [
                            {"$ref": _REF.format("SessionExportV2")},
                            {"$ref": _REF.format("SessionExport")},
                        ]
                    }
                },
                NDJSON: {"schema": _NDJSON_SCHEMA},
            },
        }
    },
)
async def import_session(
    request: Request, state: StateDep, db: DbDep, tenant: TenantDep
) -> Response:
    """Recreate an exported session (same id, seqs, times, compactions, originals and cursor);
    exporting it again gives the same document. A document that does not fit is refused with
    the place named (`body.messages[3].seq`, or `body[4].seq` for line 4 of a stream) and
    nothing is written. Send `Content-Type: application/x-ndjson` for a stream."""
    kind = request.headers.get("content-type", "application/json").split(";")[0].strip().lower()
    importer = transfer.Importer(db, state.counter, tenant, state.settings.catalog)
    if kind == NDJSON:
        async with spooled_lines(request) as spool:
            view = await _run(db, importer, stream_records(spool))
    elif kind in ("application/json", ""):
        raw = await request.body()
        view = await _run(db, importer, _whole(raw))
    else:
        raise ProblemError(
            415,
            "unsupported-media-type",
            "Unsupported media type",
            f"send application/json or {NDJSON}, not {kind}",
        )
    await state.caught_up(tenant, view.row.id)
    read = session_read(view, state.settings.catalog)
    return Response(read.model_dump_json(), status.HTTP_201_CREATED, media_type="application/json")


async def _whole(raw: bytes) -> tuple[Start, AsyncIterator[Located]]:
    start, found = await sized(len(raw), document, raw)

    async def records() -> AsyncIterator[Located]:
        for record in found:
            yield record

    return start, records()


async def _run(
    db: AsyncSession,
    importer: transfer.Importer,
    reading: Awaitable[tuple[Start, AsyncIterator[Located]]],
) -> SessionView:
    try:
        start, records = await reading
        where = start[0]
        return await transfer.import_records(db, importer, start, records)
    except InvalidInput as exc:
        raise from_domain(exc, ("body",)) from None
    except UnknownName as exc:
        raise from_domain(exc, ("body", *where)) from None
    except Conflict as exc:
        raise from_domain(exc) from None
