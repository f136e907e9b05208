"""ctxc's own refusals of a sidecar request, in the provider's error JSON."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import orjson
from fastapi import Request
from fastapi.responses import JSONResponse
from starlette.responses import Response

from app.api.deps import AppState
from app.api.unavailable import RETRY_AFTER_S
from app.domain.wire import Provider, error_body
from app.storage.faults import is_fault


class Refused(Exception):
    """ctxc's own refusal of a sidecar request, answered in the provider's error JSON."""

    def __init__(
        self,
        status: int,
        message: str,
        param: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status, self.message, self.param, self.headers = status, message, param, headers


async def refusal(
    request: Request, provider: Provider, exc: Exception, state: AppState
) -> Response:
    """``exc`` as the provider's error JSON: ctxc's own refusals, and whatever the API's
    problem handlers would answer (the status and message they would give)."""
    if isinstance(exc, Refused):
        status, message, param, headers = exc.status, exc.message, exc.param, exc.headers or {}
    elif is_fault(exc):
        status, message, param = 503, "ctxc's database is unavailable: retry", None
        headers = {"retry-after": str(RETRY_AFTER_S)}
    else:
        handler = _handler(request, exc)
        if handler is None:
            raise exc
        problem = handler(request, exc)
        if inspect.isawaitable(problem):
            problem = await problem
        assert isinstance(problem, JSONResponse)
        details = orjson.loads(bytes(problem.body))
        errors = details.get("errors") or []
        status = 400 if problem.status_code == 422 else problem.status_code
        message = details.get("detail") or details.get("title", "")
        param = errors[0]["path"].removeprefix("body.") if errors else None
        if errors:
            message = "; ".join(f"{e['path']}: {e['message']}" for e in errors[:5])
        headers = {
            k: v
            for k, v in problem.headers.items()
            if k.lower() in ("retry-after", "www-authenticate")
        }
    if status >= 500:
        state.metrics.sidecar.labels(provider, "error").inc()
    body = error_body(provider, status, message, param)
    return Response(body, status, headers, media_type="application/json")


def _handler(request: Request, exc: Exception) -> Callable[..., Any] | None:
    handlers = request.app.exception_handlers
    for cls in type(exc).__mro__:
        if cls in handlers:
            found: Callable[..., Any] = handlers[cls]
            return found
    return None
