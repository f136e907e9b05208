"""RFC 9457 problem details: the one error shape of every route."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from http import HTTPStatus
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm.exc import ObjectDeletedError, StaleDataError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Match

from app.domain.compilers.decorators import BudgetTooSmall
from app.domain.compiling import NothingToSend
from app.domain.errors import Conflict, FormatError, InvalidInput, NotFound, UnknownName
from app.domain.limits import json_problems

log = logging.getLogger("ctxc")
MEDIA_TYPE = "application/problem+json"
# FastAPI's 400 for a JSON body it cannot decode (fastapi.routing, not importable).
FASTAPI_BODY_ERROR = "There was an error parsing the body"


class FieldError(BaseModel):
    path: str
    message: str


class Problem(BaseModel):
    """An error answer (RFC 9457)."""

    type: str
    title: str
    status: int
    detail: str
    errors: list[FieldError] | None = None
    needed: int | None = Field(
        None, description="Tokens the kept messages need (budget-too-small)."
    )
    budget: int | None = Field(None, description="The token budget (budget-too-small).")
    request_id: str | None = Field(
        None,
        description="An unexpected error (500): the request's id, to find its logged "
        "traceback (every answer has it in its `X-Request-ID` header).",
    )


class ProblemError(Exception):
    """Raised by the HTTP layer to answer with a problem."""

    def __init__(
        self,
        status: int,
        slug: str,
        title: str,
        detail: str,
        errors: list[FieldError] | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(detail)
        self.problem = Problem(
            type=f"urn:ctxc:problem:{slug}",
            title=title,
            status=status,
            detail=detail,
            errors=errors,
        )
        self.headers = headers


def field_path(loc: Sequence[str | int]) -> str:
    """``("body", "messages", 3, "role")`` -> ``body.messages[3].role``."""
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def invalid(errors: list[FieldError]) -> ProblemError:
    detail = "; ".join(f"{e.path}: {e.message}" for e in errors)
    return ProblemError(422, "validation-error", "Invalid request", detail, errors)


def from_domain(exc: Exception, body_path: Sequence[str | int] = ("body",)) -> ProblemError:
    """The problem for a domain error; located errors are placed under ``body_path``."""
    match exc:
        case FormatError(path=path, message=message):
            return invalid([FieldError(path=field_path((*body_path, *path)), message=message)])
        case InvalidInput(problems=problems):
            return invalid(
                [FieldError(path=field_path((*body_path, *p)), message=m) for p, m in problems]
            )
        case UnknownName(field=field):
            return invalid([FieldError(path=field_path((*body_path, field)), message=str(exc))])
        case NotFound():
            return ProblemError(404, "not-found", "Not found", str(exc))
        case Conflict():
            return ProblemError(409, "conflict", "Conflict", str(exc))
        case BudgetTooSmall(needed=needed, budget=budget):
            error = ProblemError(422, "budget-too-small", "Budget too small", str(exc))
            error.problem.needed, error.problem.budget = needed, budget
            return error
        case NothingToSend():
            return ProblemError(422, "nothing-to-send", "Nothing to send", str(exc))
    raise exc


def problem_slug(exc: Exception) -> str:
    """The last part of the problem type ``exc`` answers with (``error``: none, a 500)."""
    if isinstance(exc, ProblemError):
        return exc.problem.type.rpartition(":")[2]
    try:
        return from_domain(exc).problem.type.rpartition(":")[2]
    except Exception:
        return "error"


HEADS = (("system",), ("instructions",))  # where a history's system prompt is posted


def from_input_error(exc: FormatError | InvalidInput, field: str = "messages") -> ProblemError:
    """A parse error of a posted history: located under `body.<field>`, or `body.system` /
    `body.instructions`."""
    problems = exc.problems if isinstance(exc, InvalidInput) else ((exc.path, exc.message),)
    return invalid(
        [
            FieldError(
                path=field_path(("body", *p) if p[:1] in HEADS else ("body", field, *p)),
                message=m,
            )
            for p, m in problems
        ]
    )


def system_prompt(fmt: str, system: Any, instructions: str | None) -> Any:
    """The system prompt a posted history gives beside its messages: Anthropic's `system`, or
    Responses' `instructions` (each a 422 with another format)."""
    if instructions is not None and fmt != "responses":
        raise invalid([FieldError(path="body.instructions", message="only for format responses")])
    if fmt == "responses":
        if system is not None:
            why = "Responses takes its system prompt as `instructions`"
            raise invalid([FieldError(path="body.system", message=why)])
        return instructions
    return system


def check_body(body: BaseModel) -> None:
    """Refuse what the databases cannot store exactly: lone surrogates, non-finite numbers,
    nesting deeper than the limit (a 422 naming each place)."""
    problems = json_problems(body.model_dump())
    if problems:
        raise invalid([FieldError(path=field_path(("body", *p)), message=m) for p, m in problems])


def _answer(problem: Problem, headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse(
        problem.model_dump(exclude_none=True), problem.status, headers, media_type=MEDIA_TYPE
    )


def _malformed() -> JSONResponse:
    problem = ProblemError(400, "malformed-json", "Malformed JSON", "the body is not valid JSON")
    return _answer(problem.problem)


def _validation(_: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    errors: list[dict[str, Any]] = list(exc.errors())
    if any(e["type"] == "json_invalid" for e in errors):
        return _malformed()
    fields = [FieldError(path=field_path(e["loc"]), message=e["msg"]) for e in errors]
    return _answer(invalid(fields).problem)


def _http(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, StarletteHTTPException)
    if exc.status_code == 400 and exc.detail == FASTAPI_BODY_ERROR:
        return _malformed()  # a body FastAPI could not even decode (not UTF-8)
    headers = getattr(exc, "headers", None)
    if exc.status_code == 405:
        headers = {**(headers or {}), "Allow": ", ".join(_allowed(request))}
    title = {
        404: "Not found",
        405: "Method not allowed",
        408: "Request timeout",
        413: "Payload too large",
    }.get(exc.status_code, "Error")
    slug = title.lower().replace(" ", "-")
    problem = ProblemError(exc.status_code, slug, title, str(exc.detail)).problem
    return _answer(problem, headers)


def _allowed(request: Request) -> list[str]:
    """Every method some route takes at the request's path (Starlette names only those of the
    first route whose path matches, and a path often has one route per method)."""
    routes = request.app.router.routes
    return [
        method
        for method in ("DELETE", "GET", "HEAD", "PATCH", "POST", "PUT")
        if any(r.matches({**request.scope, "method": method})[0] == Match.FULL for r in routes)
    ]


def _problem(_: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, ProblemError)
    return _answer(exc.problem, exc.headers)


def _domain(_: Request, exc: Exception) -> JSONResponse:
    return _answer(from_domain(exc).problem)


def _vanished(request: Request, exc: Exception) -> JSONResponse:
    """A write that failed because a concurrent request deleted the session it refers to (a
    foreign key to a row gone, an updated row gone): the session is not found. The use cases
    map the cases they expect; this is the net under them."""
    orig = getattr(exc, "orig", None)
    foreign_key = getattr(orig, "sqlstate", None) == "23503" or "FOREIGN KEY constraint" in str(
        orig
    )
    session_id = request.path_params.get("session_id")
    if session_id is None or (isinstance(exc, IntegrityError) and not foreign_key):
        raise exc
    return _answer(from_domain(NotFound("session", session_id)).problem)


def install(app: FastAPI) -> None:
    app.add_exception_handler(IntegrityError, _vanished)
    app.add_exception_handler(StaleDataError, _vanished)
    app.add_exception_handler(ObjectDeletedError, _vanished)
    app.add_exception_handler(RequestValidationError, _validation)
    app.add_exception_handler(StarletteHTTPException, _http)
    app.add_exception_handler(ProblemError, _problem)
    for cls in (
        FormatError,
        InvalidInput,
        UnknownName,
        NotFound,
        Conflict,
        BudgetTooSmall,
        NothingToSend,
    ):
        app.add_exception_handler(cls, _domain)


RETRY_AFTER_HEADER = {
    "Retry-After": {
        "description": "Seconds to wait before retrying.",
        "schema": {"type": "integer"},
    }
}


def problem_content() -> dict[str, Any]:
    """An OpenAPI `content` entry: a problem (``app.api.openapi.document`` puts `Problem` in
    the components)."""
    return {MEDIA_TYPE: {"schema": {"$ref": "#/components/schemas/Problem"}}}


def responses(*statuses: int, database: bool = True) -> dict[int | str, dict[str, Any]]:
    """The `responses=` entry of a route that can answer these problems, and 503 with
    Retry-After when it uses the ``database``."""
    answers: dict[int | str, dict[str, Any]] = {
        s: {"description": HTTPStatus(s).phrase, "content": problem_content()} for s in statuses
    }
    unavailable = {
        "description": "The database is unavailable (`urn:ctxc:problem:database-unavailable`): "
        "retry after `Retry-After` seconds.",
        "content": problem_content(),
        "headers": RETRY_AFTER_HEADER,
    }
    return answers | {503: unavailable} if database else answers
