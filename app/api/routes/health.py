"""Liveness, readiness and metrics."""

from __future__ import annotations

import hmac
from typing import Literal

from fastapi import APIRouter, Request, Response
from fastapi.responses import JSONResponse
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from pydantic import BaseModel, Field, SecretStr
from sqlalchemy.exc import SQLAlchemyError

from app.api.deps import StateDep
from app.api.problems import RETRY_AFTER_HEADER, ProblemError, responses
from app.api.unavailable import RETRY_AFTER_S
from app.storage.migrate import SchemaNotCurrent, check_schema

router = APIRouter(tags=["health"])


@router.get("/healthz", operation_id="healthz")
async def healthz() -> dict[str, str]:
    """The process is up."""
    return {"status": "ok"}


class Readiness(BaseModel):
    status: Literal["ready", "unavailable"]
    detail: str | None = Field(None, description="Why not (unavailable only).")


NOT_READY = {"description": "Not ready", "model": Readiness, "headers": RETRY_AFTER_HEADER}
# text/plain with a version parameter that follows prometheus_client; the document stays put.
PROMETHEUS_TEXT = {"content": {"text/plain": {"schema": {"type": "string"}}}}


@router.get(
    "/readyz",
    operation_id="readyz",
    response_model=Readiness,
    responses={503: NOT_READY},
    response_model_exclude_none=True,
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


@router.get(
    "/metrics",
    operation_id="metrics",
    response_class=Response,
    responses={200: PROMETHEUS_TEXT, **responses(401, 404, database=False)},
)
async def metrics(request: Request, state: StateDep) -> Response:
    """Prometheus text: requests by route, compiles, compactions, summaries, compile caches and
    tokens counted (README, Observability). With `CTXC_AUTH=keys` it needs the scraper's
    `Authorization: Bearer <CTXC_METRICS_TOKEN>`, and is off without that setting: the figures
    of every tenant are no tenant's to read."""
    if state.settings.auth == "keys":
        _check_scraper(request, state.settings.metrics_token)
    return Response(generate_latest(state.metrics.registry), media_type=CONTENT_TYPE_LATEST)


def _check_scraper(request: Request, token: SecretStr | None) -> None:
    if token is None:
        raise ProblemError(404, "not-found", "Not found", "metrics are off: set CTXC_METRICS_TOKEN")
    scheme, _, given = request.headers.get("authorization", "").partition(" ")
    expected = token.get_secret_value().encode()
    if scheme.lower() != "bearer" or not hmac.compare_digest(given.strip().encode(), expected):
        raise ProblemError(
            401,
            "unauthorized",
            "Unauthorized",
            "use `Authorization: Bearer <CTXC_METRICS_TOKEN>`",
            headers={"WWW-Authenticate": "Bearer"},
        )
