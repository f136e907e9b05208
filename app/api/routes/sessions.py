"""Sessions: create, read, change, delete, list."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated

from fastapi import APIRouter, Query, Response, status

from app.api.deps import DbDep, StateDep, TenantDep
from app.api.problems import check_body, responses
from app.api.schemas import SessionCreate, SessionPage, SessionRead, SessionUpdate
from app.domain.compilers.registry import Registry, build
from app.domain.compilers.spec import parse_spec
from app.domain.models import Catalog
from app.domain.sessions import PromptFragment
from app.services import sessions
from app.services.compaction import check_profiles, policy_of
from app.services.sessions import SessionView

router = APIRouter(prefix="/v1/sessions", tags=["sessions"])


def session_read(view: SessionView, catalog: Catalog) -> SessionRead:
    row = view.row
    profile = sessions.readable_profile(row, catalog)
    return SessionRead(
        id=row.id,
        metadata=row.meta,
        system_prompt=[PromptFragment.model_validate(f) for f in row.system_prompt],
        response_format=row.response_format,
        provider=row.provider,
        profile=row.profile,
        encoding=profile.encoding,
        session_resumption=profile.session_resumption,
        resume_key=row.resume_key,
        context_window=row.context_window,
        compiler=row.compiler,
        compaction=row.compaction_policy,
        message_count=view.message_count,
        last_seq=row.last_seq,
        tokens=view.tokens,
        cursor_seq=row.cursor_seq,
        provider_session_id=row.provider_session_id,
        created_at=row.created_at,
        updated_at=row.updated_at,
    )


def check_settings(
    body: SessionCreate | SessionUpdate, registry: Registry, profiles: frozenset[str]
) -> None:
    """A session's compiler spec and compaction policy (with the summariser ``profiles`` it may
    name) are checked before they are stored: a bad one is a 422 now, not on every compile."""
    if body.compiler is not None:
        build(parse_spec(body.compiler), registry)
    policy = policy_of(body.compaction, None)
    if policy is not None:
        check_profiles(policy, profiles, "compaction")


@router.post(
    "",
    status_code=status.HTTP_201_CREATED,
    responses=responses(400, 401, 409, 413, 422),
    operation_id="create_session",
)
async def create_session(
    body: SessionCreate, state: StateDep, db: DbDep, tenant: TenantDep
) -> SessionRead:
    """Create a session, with your own id or a generated one."""
    check_body(body)
    check_settings(body, state.registry, state.summarizer.names)
    fields = body.model_dump(mode="json", exclude={"id"})
    fields["provider"] = body.provider or state.settings.default_provider
    catalog = state.settings.catalog
    view = await sessions.create_session(db, tenant, body.id, fields, datetime.now(UTC), catalog)
    return session_read(view, catalog)


@router.get("", responses=responses(401, 422), operation_id="list_sessions")
async def list_sessions(
    state: StateDep,
    db: DbDep,
    tenant: TenantDep,
    after: Annotated[
        str | None,
        Query(max_length=128, pattern=r"^[^\x00]*$", description="Last id of the previous page."),
    ] = None,
    limit: Annotated[int, Query(ge=1, le=500)] = 50,
) -> SessionPage:
    """Your sessions, ordered by id, a page at a time."""
    catalog = state.settings.catalog
    views = await sessions.list_sessions(db, tenant, after, limit, catalog)
    next_after = views[-1].row.id if len(views) == limit else None
    return SessionPage(items=[session_read(v, catalog) for v in views], next_after=next_after)


@router.get("/{session_id}", responses=responses(401, 404, 409), operation_id="get_session")
async def get_session(
    session_id: str, state: StateDep, db: DbDep, tenant: TenantDep
) -> SessionRead:
    """One session with its message count and token total."""
    catalog = state.settings.catalog
    row = await sessions.require_session(db, tenant, session_id)
    return session_read(sessions.view(row, catalog), catalog)


@router.patch(
    "/{session_id}", responses=responses(400, 401, 404, 413, 422), operation_id="update_session"
)
async def update_session(
    session_id: str, body: SessionUpdate, state: StateDep, db: DbDep, tenant: TenantDep
) -> SessionRead:
    """Change the fields you send; a new `resume_key` ends the provider session."""
    check_body(body)
    check_settings(body, state.registry, state.summarizer.names)
    changes = body.model_dump(mode="json", exclude_unset=True)
    catalog = state.settings.catalog
    view = await sessions.update_session(
        db, tenant, session_id, changes, datetime.now(UTC), catalog
    )
    return session_read(view, catalog)


@router.delete(
    "/{session_id}",
    status_code=status.HTTP_204_NO_CONTENT,
    responses=responses(401, 404),
    operation_id="delete_session",
)
async def delete_session(session_id: str, db: DbDep, tenant: TenantDep) -> Response:
    """Delete a session and everything stored with it."""
    await sessions.delete_session(db, tenant, session_id)
    return Response(status_code=status.HTTP_204_NO_CONTENT)
