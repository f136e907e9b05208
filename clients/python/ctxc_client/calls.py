"""Each API operation as a `Call`: what to send and how to read the answer, shared by the sync
and the async client, which only differ in how they send it."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar
from urllib.parse import quote

import httpx
from pydantic import BaseModel

from ctxc_client import bodies, models
from ctxc_client.errors import Unavailable

T = TypeVar("T")
M = TypeVar("M", bound=BaseModel)
MAX_RETRY_WAIT_S = 30.0  # a longer Retry-After is given to the caller as Unavailable
BACKOFF_S = 0.5


@dataclass(frozen=True)
class Call(Generic[T]):
    """One request. ``resend``: sending it again after the server may have acted on it changes
    nothing (a read, a pure compile, an append with its Idempotency-Key), so it is retried on
    a dropped connection and on a 503; any call is retried when it never left (connect error)."""

    method: str
    path: str
    read: Callable[[httpx.Response], T]
    params: Mapping[str, Any] = field(default_factory=dict)
    json: Any = None
    headers: Mapping[str, str] = field(default_factory=dict)
    resend: bool = False


def retry_wait(call: Call[Any], attempt: int, error: Exception) -> float | None:
    """How long to wait before sending ``call`` again after ``error`` on its ``attempt``-th
    try (0-based), or None: give up (``error`` is raised)."""
    if isinstance(error, httpx.ConnectError | httpx.ConnectTimeout):
        return BACKOFF_S * 2.0**attempt
    if not call.resend:
        return None
    if isinstance(error, Unavailable):
        wait = error.retry_after
        return wait if wait is not None and wait <= MAX_RETRY_WAIT_S else None
    if isinstance(error, httpx.TransportError):
        return BACKOFF_S * 2.0**attempt
    return None


def _model(cls: type[M]) -> Callable[[httpx.Response], M]:
    return lambda response: cls.model_validate_json(response.content)


def _nothing(_: httpx.Response) -> None:
    return None


def _compactions(response: httpx.Response) -> list[models.Compaction]:
    items = response.json()["items"]
    return [models.Compaction.model_validate(item) for item in items]


def _seg(value: str) -> str:
    """A path segment: tool call ids may hold any character but NUL."""
    return quote(value, safe="")


def _session(session_id: str) -> str:
    return f"/v1/sessions/{_seg(session_id)}"


def _given(params: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in params.items() if v is not None}


def create_session(fields: bodies.SessionCreate) -> Call[models.Session]:
    return Call("POST", "/v1/sessions", _model(models.Session), json=dict(fields))


def get_session(session_id: str) -> Call[models.Session]:
    return Call("GET", _session(session_id), _model(models.Session), resend=True)


def list_sessions(after: str | None, limit: int | None) -> Call[models.SessionPage]:
    params = _given({"after": after, "limit": limit})
    return Call("GET", "/v1/sessions", _model(models.SessionPage), params=params, resend=True)


def update_session(session_id: str, fields: bodies.SessionUpdate) -> Call[models.Session]:
    # Setting the same fields twice leaves the same session: safe to resend.
    read = _model(models.Session)
    return Call("PATCH", _session(session_id), read, json=dict(fields), resend=True)


def delete_session(session_id: str) -> Call[None]:
    return Call("DELETE", _session(session_id), _nothing)


def append_messages(
    session_id: str,
    messages: list[Any],
    idempotency_key: str | None,
    fields: bodies.Append,
) -> Call[models.AppendResult]:
    """Every append carries an Idempotency-Key (the caller's, or a fresh one), so that resending
    it after a dropped connection or a 503 never stores the batch twice."""
    key = idempotency_key or uuid.uuid4().hex
    return Call(
        "POST",
        f"{_session(session_id)}/messages",
        _model(models.AppendResult),
        json={"messages": messages, **fields},
        headers={"Idempotency-Key": key},
        resend=True,
    )


def list_messages(
    session_id: str, after_seq: int, limit: int | None, section: str | None
) -> Call[models.CanonicalPage]:
    params = _given({"after_seq": after_seq, "limit": limit, "section": section})
    read = _model(models.CanonicalPage)
    return Call("GET", f"{_session(session_id)}/messages", read, params=params, resend=True)


def provider_messages(
    session_id: str, format: str, after_seq: int, limit: int | None, section: str | None
) -> Call[models.ProviderPage]:
    params = _given({"format": format, "after_seq": after_seq, "limit": limit, "section": section})
    read = _model(models.ProviderPage)
    return Call("GET", f"{_session(session_id)}/messages", read, params=params, resend=True)


def compile(messages: list[Any], fields: bodies.CompileRequest) -> Call[models.CompileResult]:
    # Stateless: nothing is stored, so resending is harmless.
    body = {"messages": messages, **fields}
    return Call("POST", "/v1/compile", _model(models.CompileResult), json=body, resend=True)


def compile_session(
    session_id: str, fields: bodies.SessionCompileRequest
) -> Call[models.CompileResult]:
    path = f"{_session(session_id)}/compile"
    return Call("POST", path, _model(models.CompileResult), json=dict(fields))


def acknowledge(
    session_id: str, compile_id: str, fields: bodies.CursorAcknowledge
) -> Call[models.Cursor]:
    body = {"compile_id": compile_id, **fields}
    return Call("POST", f"{_session(session_id)}/cursor", _model(models.Cursor), json=body)


def reset_cursor(session_id: str) -> Call[models.Cursor]:
    # Forgetting the cursor twice forgets it once.
    path = f"{_session(session_id)}/cursor"
    return Call("DELETE", path, _model(models.Cursor), resend=True)


def compact(
    session_id: str, kind: models.CompactionKind, fields: bodies.CompactRequest
) -> Call[models.Compaction]:
    body = {"kind": kind, **fields}
    return Call("POST", f"{_session(session_id)}/compact", _model(models.Compaction), json=body)


def list_compactions(session_id: str) -> Call[list[models.Compaction]]:
    return Call("GET", f"{_session(session_id)}/compactions", _compactions, resend=True)


def get_compaction(session_id: str, compaction_id: str) -> Call[models.CompactionDetail]:
    path = f"{_session(session_id)}/compactions/{_seg(compaction_id)}"
    return Call("GET", path, _model(models.CompactionDetail), resend=True)


def get_tool_call(session_id: str, call_id: str, seq: int | None) -> Call[models.ToolCall]:
    path = f"{_session(session_id)}/tool-calls/{_seg(call_id)}"
    params = _given({"seq": seq})
    return Call("GET", path, _model(models.ToolCall), params=params, resend=True)


def get_payload(session_id: str, sha256: str) -> Call[models.Payload]:
    path = f"{_session(session_id)}/payloads/{_seg(sha256)}"
    return Call("GET", path, _model(models.Payload), resend=True)


def recall(
    session_id: str, arguments: dict[str, Any] | str, fields: bodies.Recall
) -> Call[models.RecallResult]:
    # Only reads: resending it is safe.
    body = {"arguments": arguments, **fields}
    path = f"{_session(session_id)}/recall"
    return Call("POST", path, _model(models.RecallResult), json=body, resend=True)


def count_tokens(messages: list[Any], fields: bodies.TokenCount) -> Call[models.TokenCountResult]:
    body = {"messages": messages, **fields}
    read = _model(models.TokenCountResult)
    return Call("POST", "/v1/tokens/count", read, json=body, resend=True)


def list_providers() -> Call[models.ProviderList]:
    return Call("GET", "/v1/providers", _model(models.ProviderList), resend=True)


def events_path(session_id: str) -> str:
    return f"{_session(session_id)}/events"
