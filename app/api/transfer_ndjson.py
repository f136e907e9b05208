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

import anyio
import pydantic_core
from fastapi import Request
from fastapi.exceptions import RequestValidationError
from pydantic import BaseModel, ValidationError

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

SPOOL_BYTES = 1 << 20
BATCH_LINES = 1_000
BATCH_BYTES = 4 << 20
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


def _checked(model: Any, number: int, raw: bytes) -> Any:
    """One line validated, and storable (no lone surrogate, no NaN, bounded nesting)."""
    try:
        value = pydantic_core.from_json(raw)
    except ValueError as exc:
        raise InvalidInput([((number,), f"not JSON: {exc}")]) from None
    try:
        parsed = model.validate_python(value) if model is LINE else model.model_validate(value)
    except ValidationError as exc:
        raise _located(number, exc) from None
    problems = json_problems(value)
    if problems:
        raise InvalidInput([((number, *p), m) for p, m in problems])
    return parsed


def _batches(stream: IO[bytes], first: int) -> Iterator[list[tuple[int, bytes]]]:
    batch: list[tuple[int, bytes]] = []
    size, number = 0, first
    for line in stream:
        number += 1
        if not line.strip():
            continue
        batch.append((number, line))
        size += len(line)
        if len(batch) >= BATCH_LINES or size >= BATCH_BYTES:
            yield batch
            batch, size = [], 0
    if batch:
        yield batch


async def stream_records(stream: IO[bytes]) -> tuple[Start, AsyncIterator[Located]]:
    """The header of a stream, and its records to come."""
    first = await anyio.to_thread.run_sync(stream.readline)
    if not first.strip():
        raise InvalidInput([((1,), "the first line is the header {format, session}")])
    header: Header = _header(first)
    fields = header.session.model_dump(mode="json") | {
        "created_at": header.session.created_at, "updated_at": header.session.updated_at,
    }  # fmt: skip

    async def records() -> AsyncIterator[Located]:
        batches = _batches(stream, 1)
        while batch := await anyio.to_thread.run_sync(_next_batch, batches):
            for record in batch:
                yield record

    return ((1, "session"), fields, True), records()


def _header(raw: bytes) -> Header:
    try:
        value = pydantic_core.from_json(raw)
    except ValueError as exc:
        raise InvalidInput([((1,), f"not JSON: {exc}")]) from None
    version = value.get("format") if isinstance(value, dict) else None
    if version != V2:
        problem = f"unknown version {version!r}: a stream is {V2}"
        raise InvalidInput([((1, "format"), problem)])
    checked: Header = _checked(Header, 1, raw)
    return checked


def _next_batch(batches: Iterator[list[tuple[int, bytes]]]) -> list[Located]:
    for batch in batches:
        return [line_record(n, _checked(LINE, n, raw)) for n, raw in batch]
    return []


def document(raw: bytes) -> tuple[Start, Iterator[Record]]:
    """A whole JSON document (v1 or v2): its session fields and records (CPU work: the caller
    runs a big one in a worker thread). Errors are located under ``body`` as FastAPI's are."""
    try:
        value = pydantic_core.from_json(raw)
    except ValueError as exc:
        raise RequestValidationError(
            [{"type": "json_invalid", "loc": ("body",), "msg": str(exc), "input": None}]
        ) from None
    version = value.get("format", V1) if isinstance(value, dict) else None
    models: dict[Any, type[BaseModel]] = {V1: SessionExport, V2: SessionExportV2}
    if version not in models:
        raise InvalidInput([(("format",), f"unknown version {version!r}: this server reads "
                             f"{V1} and {V2}")])  # fmt: skip
    try:
        body: SessionExport | SessionExportV2 = models[version].model_validate(value)  # type: ignore[assignment]
    except ValidationError as exc:
        errors = [{**e, "loc": ("body", *e["loc"])} for e in exc.errors()]
        raise RequestValidationError(errors) from None
    problems = json_problems(value)
    if problems:
        raise InvalidInput(problems)
    fields = body.session.model_dump(mode="json") | {
        "created_at": body.session.created_at, "updated_at": body.session.updated_at,
    }  # fmt: skip
    strict = version == V2
    if not strict:
        fields["last_seq"] = body.messages[-1].seq if body.messages else 0
    return (("session",), fields, strict), document_records(body)


__all__ = ["NDJSON", "document", "spooled_lines", "stream_records"]
