"""The recall tool, run by the caller through ctxc: one page of a compacted original."""

from __future__ import annotations

from fastapi import APIRouter

from app.api.deps import DbDep, StateDep, TenantDep
from app.api.problems import check_body, responses
from app.api.recall_schemas import RecallPage, RecallRequest, RecallResult
from app.services.sessions import recall as recalling

router = APIRouter(prefix="/v1/sessions/{session_id}", tags=["originals"])


@router.post("/recall", responses=responses(400, 401, 404, 413, 422), operation_id="recall")
async def recall(
    session_id: str, body: RecallRequest, state: StateDep, db: DbDep, tenant: TenantDep
) -> RecallResult:
    """Run the model's call of the recall tool (the `recall` decorator offers it): the original
    its pointer names, a tool call's result or a payload field, one page of it, as the tool
    result to append in the given shape. A page holds at most `max_tokens` tokens, cut after a
    line end where one is near; a text of more than one page ends each page with a line naming
    the call for the next one, and the pages joined are the original exactly. A pointer to
    nothing, or arguments the tool does not take, is a tool result saying so (`is_error`).
    Nothing is stored: append the call and this result to the session like any tool's."""
    check_body(body)
    call = recalling.Call(
        body.format, body.name, body.tool_call_id, body.arguments, body.max_tokens
    )
    done = await recalling.recall(
        db, state.counter, state.settings.catalog, tenant, session_id, call
    )
    page = done.page
    return RecallResult(
        format=done.shape,
        result=done.result,
        is_error=done.is_error,
        page=RecallPage(
            offset=page.start,
            chars=page.end - page.start,
            total_chars=page.total,
            next_offset=page.end if page.end < page.total else None,
        )
        if page
        else None,
    )
