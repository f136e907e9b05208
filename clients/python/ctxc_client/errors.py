"""Problem details (RFC 9457) as exceptions: one class per status the API answers with."""

from __future__ import annotations

import json
from typing import Any

import httpx

from ctxc_client.models import FieldError

PROBLEM_TYPE = "urn:ctxc:problem:"


class CtxcError(Exception):
    """An error answer of the API: its problem's fields, and the request id to quote."""

    def __init__(
        self,
        status: int,
        type: str,
        title: str,
        detail: str,
        errors: list[FieldError] | None = None,
        request_id: str | None = None,
        problem: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(f"{status} {title}: {detail}")
        self.status = status
        self.type = type
        self.title = title
        self.detail = detail
        self.errors = errors or []
        self.request_id = request_id
        self.problem = problem or {}

    @property
    def slug(self) -> str:
        """The last part of the problem type (`not-found`, `validation-error`, ...)."""
        return self.type.removeprefix(PROBLEM_TYPE)


class BadRequest(CtxcError):
    """400: the body could not be read (malformed JSON)."""


class ValidationFailed(BadRequest):
    """422: ``errors`` names each bad field (`body.messages[3].role`)."""


class BudgetTooSmall(ValidationFailed):
    """422: the messages that must be kept need more tokens than the budget."""

    @property
    def needed(self) -> int | None:
        value = self.problem.get("needed")
        return value if isinstance(value, int) else None

    @property
    def budget(self) -> int | None:
        value = self.problem.get("budget")
        return value if isinstance(value, int) else None


class Unauthorized(CtxcError):
    """401: no key, or one the server does not know."""


class NotFound(CtxcError):
    """404: unknown (or another tenant's) session, compaction, tool call or payload."""


class Conflict(CtxcError):
    """409: the id is taken, or an Idempotency-Key was reused with another body."""


class PayloadTooLarge(CtxcError):
    """413: the body is over the server's `CTXC_MAX_BODY_BYTES`."""


class Unavailable(CtxcError):
    """503: the database is unavailable; ``retry_after`` is the wait the server asks for."""

    def __init__(self, *args: Any, retry_after: float | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.retry_after = retry_after


class EventStreamLost(Exception):
    """The event stream could not be resumed within the allowed reconnects."""

    def __init__(self, message: str, last_event_id: int | None) -> None:
        super().__init__(message)
        self.last_event_id = last_event_id


BY_STATUS: dict[int, type[CtxcError]] = {
    400: BadRequest,
    401: Unauthorized,
    404: NotFound,
    409: Conflict,
    413: PayloadTooLarge,
    422: ValidationFailed,
    503: Unavailable,
}
BY_TYPE: dict[str, type[CtxcError]] = {f"{PROBLEM_TYPE}budget-too-small": BudgetTooSmall}


def retry_after(response: httpx.Response) -> float | None:
    """The `Retry-After` header in seconds (the API sends seconds, never a date)."""
    try:
        return max(0.0, float(response.headers["retry-after"]))
    except (KeyError, ValueError):
        return None


def _problem(response: httpx.Response) -> dict[str, Any]:
    """The answer's problem object; an answer that is not one (a proxy's HTML page) gets the
    RFC 9457 default type, its reason phrase and the start of its text."""
    try:
        body = json.loads(response.content)
    except ValueError:
        body = None
    if isinstance(body, dict) and isinstance(body.get("title"), str):
        return body
    return {
        "type": "about:blank",
        "title": response.reason_phrase or "Error",
        "detail": response.text[:500],
    }


def problem_error(response: httpx.Response) -> CtxcError:
    """The exception for an error answer (its body already read)."""
    problem = _problem(response)
    kind = str(problem.get("type", "about:blank"))
    cls = BY_TYPE.get(kind) or BY_STATUS.get(response.status_code, CtxcError)
    errors = [
        FieldError.model_validate(e) for e in problem.get("errors") or [] if isinstance(e, dict)
    ]
    request_id = problem.get("request_id") or response.headers.get("x-request-id")
    fields: dict[str, Any] = {
        "status": response.status_code,
        "type": kind,
        "title": str(problem.get("title", "")),
        "detail": str(problem.get("detail", "")),
        "errors": errors,
        "request_id": request_id,
        "problem": problem,
    }
    if cls is Unavailable:
        return Unavailable(**fields, retry_after=retry_after(response))
    return cls(**fields)
