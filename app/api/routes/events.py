"""A session's events as Server-Sent Events, replayed after `Last-Event-ID`."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from typing import Annotated, Any

import anyio
import orjson
from fastapi import APIRouter, Header, Query
from sse_starlette import EventSourceResponse, ServerSentEvent

from app.api.deps import AppState, DbDep, StateDep, TenantDep
from app.api.problems import responses
from app.api.unavailable import RETRY_AFTER_S
from app.domain.sessions import SessionPk
from app.services.sessions import events
from app.storage.faults import is_fault

log = logging.getLogger("ctxc")
router = APIRouter(prefix="/v1/sessions/{session_id}", tags=["events"])
MAX_ID = 2**63 - 1
SHUTDOWN_GRACE_S = 2.0  # a stopping server lets streams end cleanly for this long

STREAM: dict[int | str, dict[str, Any]] = {
    200: {
        "description": "An endless `text/event-stream`. Each message has `id` (the event id), "
        "`event` (its type) and `data` (a JSON object); comment lines are heartbeats.",
        "content": {"text/event-stream": {"schema": {"type": "string"}}},
    }
}


def _ping() -> ServerSentEvent:
    return ServerSentEvent(comment="ping")


async def _messages(
    state: AppState, pk: SessionPk, after_id: int, shutdown: anyio.Event
) -> AsyncIterator[ServerSentEvent]:
    """The stream's messages; when the database is lost, the stream ends cleanly after a last
    comment whose `retry` asks the client to reconnect (with `Last-Event-ID`) in Retry-After
    seconds, instead of breaking off mid-stream."""
    try:
        async for row in events.follow(state.event_reader, state.events, pk, after_id, shutdown):
            yield ServerSentEvent(
                data=orjson.dumps(row.data).decode(), id=str(row.id), event=row.type
            )
    except Exception as exc:
        if not is_fault(exc):
            raise
        log.warning("database unavailable; ending the event stream of %s: %r", pk, exc)
        yield ServerSentEvent(comment="database unavailable", retry=RETRY_AFTER_S * 1000)


@router.get(
    "/events",
    response_class=EventSourceResponse,
    responses={**STREAM, **responses(401, 404, 422)},
    operation_id="stream_events",
)
async def stream_events(
    session_id: str,
    db: DbDep,
    tenant: TenantDep,
    state: StateDep,
    last_event_id: Annotated[
        int | None,
        Header(ge=0, le=MAX_ID, description="Replay the events after this id, then go live."),
    ] = None,
    after: Annotated[
        int | None,
        Query(ge=0, le=MAX_ID, description="As `Last-Event-ID`, which wins when both are given."),
    ] = None,
) -> EventSourceResponse:
    """The session's events as they happen: `context_compaction_start` and
    `context_compaction_end` around a request-boundary compaction, `compaction` for a reactive
    one. Events are stored with increasing ids: reconnect with `Last-Event-ID` (browsers do) or
    `?after=` to get every event after that id first (`after=0`: the whole history); without
    either, the stream starts with the next event. Idle streams carry a heartbeat comment."""
    pk, start = await events.stream_start(
        db, tenant, session_id, last_event_id if last_event_id is not None else after
    )
    shutdown = anyio.Event()  # set by sse-starlette when the server is stopping
    return EventSourceResponse(
        _messages(state, pk, start, shutdown),
        ping=state.settings.sse_heartbeat_seconds,
        ping_message_factory=_ping,
        shutdown_event=shutdown,
        shutdown_grace_period=SHUTDOWN_GRACE_S,
    )
