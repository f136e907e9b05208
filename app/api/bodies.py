"""Request bodies read by the route itself: a big one is parsed and checked off the event loop.

FastAPI parses a body parameter on the event loop, with one `json.loads` and one validation
call, each holding the GIL from start to end: a 16 MB body stops every other request for as
long. Routes that take big bodies read the raw body instead (``read_body``), declare its schema
with ``app.api.openapi.json_body`` and answer exactly as FastAPI would (400 for malformed JSON,
422 with ``body.…`` paths), plus the checks of ``app.api.problems.check_body``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, Final, TypeVar

from fastapi import Request
from fastapi.exceptions import RequestValidationError
from pydantic import BaseModel, ValidationError

from app.api import json_pieces
from app.api.problems import FieldError, ProblemError, field_path, invalid
from app.domain.limits import json_problems
from app.services.tenancy import cpu

M = TypeVar("M", bound=BaseModel)
T = TypeVar("T")
# Up to this many bytes a body is parsed on the event loop (a thread hop costs more than that);
# a bigger one is parsed in a worker thread, in pieces (`app.api.json_pieces`).
BIG_BODY: Final = 65_536


def _malformed() -> ProblemError:
    return ProblemError(400, "malformed-json", "Malformed JSON", "the body is not valid JSON")


def parse(model: type[M], raw: bytes) -> M:
    """``raw`` as ``model``, failing as FastAPI's body parsing does, then ``check_body``'s
    checks: CPU work proportional to the body, meant for a worker thread when it is big."""
    if not raw:
        missing = {"type": "missing", "loc": ("body",), "msg": "Field required", "input": None}
        raise RequestValidationError([missing])
    try:
        value = json_pieces.loads(raw) if len(raw) > BIG_BODY else json.loads(raw)
    except (ValueError, RecursionError):  # JSONDecodeError, bad UTF-8, a 5,000-digit number
        raise _malformed() from None
    try:
        body = model.model_validate(value)
    except ValidationError as exc:
        errors = [{**e, "loc": ("body", *e["loc"])} for e in exc.errors()]
        raise RequestValidationError(errors) from None
    # What the databases cannot store, looked for in the JSON as posted: the same places
    # `check_body` finds in the model's dump, without a dump (one long C call) of a big body.
    problems = json_problems(value)
    if problems:
        raise invalid([FieldError(path=field_path(("body", *p)), message=m) for p, m in problems])
    return body


async def parse_sized(model: type[M], raw: bytes) -> M:
    """``parse``, in a worker thread when the body is big."""
    return await sized(len(raw), parse, model, raw)


async def read_body(request: Request, model: type[M]) -> M:
    """The request's body as ``model`` (see ``parse``); the size limit applies as it is read."""
    return await parse_sized(model, await request.body())


async def sized(size: int, work: Callable[..., T], *args: Any) -> T:
    """``work(*args)``: inline for a body of ``size`` bytes up to ``BIG_BODY``, else in a worker
    thread (CPU work proportional to the body)."""
    if size > BIG_BODY:
        return await cpu.run_sync(work, *args)
    return work(*args)
