"""Liveness, readiness and metrics."""

from __future__ import annotations

from fastapi import APIRouter, Response
from fastapi.responses import JSONResponse
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from sqlalchemy.exc import SQLAlchemyError

from app.api.deps import StateDep
from app.api.middleware import RETRY_AFTER_S
from app.api.problems import RETRY_AFTER_HEADER
from app.storage.migrate import SchemaNotCurrent, check_schema

router = APIRouter(tags=["health"])


@router.get("/healthz", operation_id="healthz")
async def healthz() -> dict[str, str]:
    """The process is up."""
    return {"status": "ok"}


@router.get(
    "/readyz",
    operation_id="readyz",
    responses={503: {"description": "Not ready", "headers": RETRY_AFTER_HEADER}},
)
async def readyz(state: StateDep) -> JSONResponse:
    """The database answers and its schema is the one this code needs; else 503 with
    Retry-After."""
    try:
        await check_schema(state.engine)
    except (SchemaNotCurrent, SQLAlchemyError, OSError) as exc:
        detail = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        headers = {"Retry-After": str(RETRY_AFTER_S)}
        return JSONResponse({"status": "unavailable", "detail": detail}, 503, headers)
    return JSONResponse({"status": "ready"})


@router.get("/metrics", operation_id="metrics", response_class=Response)
async def metrics(state: StateDep) -> Response:
    """Prometheus text: requests and latencies by route, tokens counted by encoding."""
    return Response(generate_latest(state.metrics.registry), media_type=CONTENT_TYPE_LATEST)
