"""Reading a streamed session document (NDJSON) and a whole one (JSON), as located records.

A stream is read from a file (a request body is first spooled to one: the import's transaction
never waits on a slow client), a batch of lines at a time, each batch validated in a worker
thread. ``body[N]`` names line N (the header is line 1).
"""

from __future__ import annotations

import tempfile
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from typing import IO, Any

import pydantic_core
from fastapi import Request
from fastapi.exceptions import RequestValidationError
from pydantic import BaseModel, ValidationError

from app.api import json_pieces
from app.api.bodies import BIG_BODY
from app.api.schemas import SessionExport
from app.api.transfer_schemas import (
    LINE,
    NDJSON,
    V1,
    V2,
    Header,
    Record,
    SessionExportV2,
    document_records,
    line_record,
)
from app.domain.errors import InvalidInput, Path
from app.domain.limits import json_problems
from app.services.tenancy import cpu

SPOOL_BYTES = 1 << 20
BATCH_LINES = 1_000
Located = tuple[Path, str, dict[str, Any]]
Start = tuple[Path, dict[str, Any], bool]  # where the session fields are, them, strict


@asynccontextmanager
async def spooled_lines(request: Request) -> AsyncIterator[IO[bytes]]:
    """The request body in a temporary file (memory up to 1 MiB, then disk), at its start."""
    with tempfile.SpooledTemporaryFile(max_size=SPOOL_BYTES) as spool:
        async for chunk in request.stream():
            spool.write(chunk)
        spool.seek(0)
        yield spool


def _located(number: int, error: ValidationError) -> InvalidInput:
    return InvalidInput([((number, *e["loc"]), e["msg"]) for e in error.errors()])


def _parsed(number: int, raw: bytes) -> Any:
    try:
        return pydantic_core.from_json(raw)
    except ValueError as exc:
        raise InvalidInput([((number,), f"not JSON: {exc}")]) from None


def _checked(model: Any, number: int, value: Any) -> Any:
    """One line validated, and storable (no lone surrogate, no NaN, bounded nesting)."""
    try:
        parsed = model.validate_python(value) if model is LINE else model.model_validate(value)
    except ValidationError as exc:
        raise _located(number, exc) from None
    problems = json_problems(value)
    if problems:
        raise InvalidInput([((number, *p), m) for p, m in problems])
    return parsed


def _is_header(value: Any) -> bool:
    return isinstance(value, dict) and "type" not in value and "format" in value


class Reader:
    """The sessions of a stream: each starts at a header line, its records follow. A request
    carries one session; a backup file (``ctxc export --all``) may carry many."""

    def __init__(self, stream: IO[bytes], single: bool = False) -> None:
        self.stream, self.single, self.number = stream, single, 0
        self.header: tuple[int, Any] | None = None  # read while reading the previous session

    async def next_session(self) -> tuple[Start, AsyncIterator[Located]] | None:
        """The next session's start and records to come; None at the end of the stream."""
        if self.header is None:
            self.header = await cpu.run_sync(self._first)
            if self.header is None:
                return None
        number, value = self.header
        self.header = None
        header = _header(number, value)
        fields = header.session.model_dump(mode="json") | {
            "created_at": header.session.created_at,
            "updated_at": header.session.updated_at,
        }
        return ((number, "session"), fields, True), self._records()

    def _line(self) -> tuple[int, Any] | None:
        """The next line that is not blank, parsed; None at the end."""
        while line := self.stream.readline():
            self.number += 1
            if line.strip():
                return self.number, _parsed(self.number, line)
        return None

    def _first(self) -> tuple[int, Any] | None:
        found = self._line()
        if found is not None and not _is_header(found[1]):
            problem = "a stream starts with its header line {format, session}"
            raise InvalidInput([((found[0],), problem)])
        return found

    async def _records(self) -> AsyncIterator[Located]:
        while batch := await cpu.run_sync(self._batch):
            for record in batch:
                yield record

    def _batch(self) -> list[Located]:
        """The session's next records, validated (in a worker thread); a header ends the
        session and is kept for the next."""
        out: list[Located] = []
        while self.header is None and len(out) < BATCH_LINES:
            found = self._line()
            if found is None:
                break
            number, value = found
            if not _is_header(value):
                out.append(line_record(number, _checked(LINE, number, value)))
            elif self.single:
                problem = "a second header: one session per request (ctxc import reads many)"
                raise InvalidInput([((number,), problem)])
            else:
                self.header = found
        return out


def _header(number: int, value: Any) -> Header:
    version = value.get("format") if isinstance(value, dict) else None
    if version != V2:
        raise InvalidInput([((number, "format"), f"unknown version {version!r}: a stream is {V2}")])
    checked: Header = _checked(Header, number, value)
    return checked


async def stream_records(stream: IO[bytes]) -> tuple[Start, AsyncIterator[Located]]:
    """The one session of a request's stream."""
    found = await Reader(stream, single=True).next_session()
    if found is None:
        raise InvalidInput([((1,), "the first line is the header {format, session}")])
    return found


def document(raw: bytes) -> tuple[Start, Iterator[Record]]:
    """A whole JSON document (v1 or v2): its session fields and records (CPU work: the caller
    runs a big one in a worker thread). Errors are located under ``body`` as FastAPI's are."""
    try:
        # A big document in pieces, so the event loop's thread gets turns while it is read.
        value = json_pieces.loads(raw) if len(raw) > BIG_BODY else pydantic_core.from_json(raw)
    except (ValueError, RecursionError) as exc:
        raise RequestValidationError(
            [{"type": "json_invalid", "loc": ("body",), "msg": str(exc), "input": None}]
        ) from None
    version = value.get("format", V1) if isinstance(value, dict) else None
    models: dict[Any, type[BaseModel]] = {V1: SessionExport, V2: SessionExportV2}
    if version not in models:
        raise InvalidInput(
            [(("format",), f"unknown version {version!r}: this server reads {V1} and {V2}")]
        )
    try:
        body: SessionExport | SessionExportV2 = models[version].model_validate(value)  # type: ignore[assignment]
    except ValidationError as exc:
        errors = [{**e, "loc": ("body", *e["loc"])} for e in exc.errors()]
        raise RequestValidationError(errors) from None
    problems = json_problems(value)
    if problems:
        raise InvalidInput(problems)
    fields = body.session.model_dump(mode="json") | {
        "created_at": body.session.created_at,
        "updated_at": body.session.updated_at,
    }
    strict = version == V2
    if not strict:
        fields["last_seq"] = body.messages[-1].seq if body.messages else 0
    return (("session",), fields, strict), document_records(body)


__all__ = ["NDJSON", "document", "spooled_lines", "stream_records"]
