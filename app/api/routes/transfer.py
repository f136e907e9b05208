"""Export and import a session's whole context."""

from __future__ import annotations

from fastapi import APIRouter, Request, status

from app.api.bodies import parse_sized, sized
from app.api.deps import DbDep, StateDep, TenantDep
from app.api.openapi import json_body
from app.api.problems import from_domain, responses
from app.api.routes.sessions import session_read
from app.api.schemas import SessionExport, SessionRead
from app.domain.errors import InvalidInput, UnknownName
from app.services import transfer

router = APIRouter(prefix="/v1/sessions", tags=["sessions"])


@router.get(
    "/{session_id}/export", responses=responses(401, 404, 409), operation_id="export_session"
)
async def export_session(
    session_id: str, state: StateDep, db: DbDep, tenant: TenantDep
) -> SessionExport:
    """The session's whole context as one JSON document (fields and every message, canonical).

    Cursor, compile records and provider session ids belong to a deployment and are not included.
    """
    exported = await transfer.export_session(db, tenant, session_id, state.settings.catalog)
    return SessionExport.model_validate(exported)


def _document(body: SessionExport) -> transfer.Imported:
    return transfer.Imported(
        body.session.model_dump(mode="json")
        | {"created_at": body.session.created_at, "updated_at": body.session.updated_at},
        [m.model_dump() for m in body.messages],
    )


@router.post(
    "/import",
    status_code=status.HTTP_201_CREATED,
    responses=responses(400, 401, 409, 413, 422),
    operation_id="import_session",
    openapi_extra=json_body(SessionExport),
)
async def import_session(
    request: Request, state: StateDep, db: DbDep, tenant: TenantDep
) -> SessionRead:
    """Recreate an exported session (same id, seqs and times); exporting it again is equal."""
    raw = await request.body()
    body = await parse_sized(SessionExport, raw)
    document = await sized(len(raw), _document, body)
    try:
        view = await transfer.import_session(
            db, state.counter, tenant, document, state.settings.catalog
        )
    except InvalidInput as exc:
        raise from_domain(exc, ("body", "messages")) from None
    except UnknownName as exc:
        raise from_domain(exc, ("body", "session")) from None
    return session_read(view, state.settings.catalog)
