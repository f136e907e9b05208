"""ASGI middleware: request ids, body size limit (before parsing), unexpected errors, request
metrics and logs."""

from __future__ import annotations

import json
import logging
import re
import time
import uuid

from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.api.metrics import Metrics
from app.api.unavailable import DATABASE_UNAVAILABLE, RETRY_AFTER, FaultLog
from app.logs import REQUEST_ID
from app.storage.faults import is_fault

log = logging.getLogger("ctxc")
REQUEST_ID_HEADER = b"x-request-id"
# An inbound id is kept when it is short and plain (a UUID, a ULID, a W3C trace id ...); any
# other is replaced, so a caller cannot forge log lines or flood them.
SAFE_REQUEST_ID = re.compile(rb"[A-Za-z0-9._:-]{1,128}")


class RequestId:
    """Every request gets an id: a sane inbound ``X-Request-ID``, or a new one. It is in every
    log line of the request (``app.logs``) and answered as ``X-Request-ID``."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        inbound = dict(scope["headers"]).get(REQUEST_ID_HEADER, b"")
        safe = SAFE_REQUEST_ID.fullmatch(inbound)
        request_id = inbound.decode() if safe else uuid.uuid4().hex
        header = (REQUEST_ID_HEADER, request_id.encode())

        async def send_with_id(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = [h for h in message.get("headers", []) if h[0] != REQUEST_ID_HEADER]
                message = {**message, "headers": [*headers, header]}
            await send(message)

        token = REQUEST_ID.set(request_id)
        try:
            await self.app(scope, receive, send_with_id)
        finally:
            REQUEST_ID.reset(token)


def _problem_413(limit: int) -> bytes:
    return json.dumps(
        {
            "type": "urn:ctxc:problem:payload-too-large",
            "title": "Payload too large",
            "status": 413,
            "detail": f"the request body is larger than {limit} bytes",
        }
    ).encode()


CLOSE = (b"connection", b"close")


class BodyLimit:
    """Answer 413 for bodies over ``limit`` bytes: by Content-Length before anything is read,
    else as soon as the streamed body passes the limit (the route's problem handler answers).

    An answer that starts before the request body was read whole (a 413, or any answer given
    without reading the body) says ``Connection: close``: the server then closes the connection
    after it instead of reading the rest of the body to reach the next request."""

    def __init__(self, app: ASGIApp, limit: int) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope["headers"])
        length = headers.get(b"content-length")
        if length is not None and length.isdigit() and int(length) > self.limit:
            await self._reject(send)
            return
        seen = 0
        unread = b"transfer-encoding" in headers or (length is not None and length != b"0")

        async def limited_receive() -> Message:
            nonlocal seen, unread
            message = await receive()
            if message["type"] == "http.disconnect" and unread:
                # Cut off by the server's read deadline, or gone: either way it is logged so.
                raise HTTPException(408, "the request body was not received whole")
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.limit:
                    raise HTTPException(413, f"the request body is larger than {self.limit} bytes")
                unread = bool(message.get("more_body", False))
            return message

        async def closing_send(message: Message) -> None:
            if message["type"] == "http.response.start" and unread:
                message = {**message, "headers": [*message.get("headers", []), CLOSE]}
            await send(message)

        await self.app(scope, limited_receive, closing_send)

    async def _reject(self, send: Send) -> None:
        body = _problem_413(self.limit)
        headers = [
            (b"content-type", b"application/problem+json"),
            (b"content-length", str(len(body)).encode()),
            CLOSE,
        ]
        await send({"type": "http.response.start", "status": 413, "headers": headers})
        await send({"type": "http.response.body", "body": body})


INTERNAL_ERROR = {
    "type": "urn:ctxc:problem:internal",
    "title": "Internal error",
    "status": 500,
    "detail": "unexpected error",
}


def _problem_body(problem: dict[str, object]) -> bytes:
    """The problem with the request's id (for a 500, the one way to find its logged
    traceback)."""
    request_id = REQUEST_ID.get()
    return json.dumps(problem | ({"request_id": request_id} if request_id else {})).encode()


class CatchAll:
    """An unexpected error is logged once, with its traceback, and answered as a 500 problem
    with no internals; a fault of the database (see app.storage.faults) is a 503 problem with
    Retry-After. The connection stays usable (nothing is re-raised to the server)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self.faults = FaultLog()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False

        async def tracking_send(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, receive, tracking_send)
        except Exception as exc:
            if is_fault(exc):
                self.faults.fault(scope, exc)
                status, problem, extra = 503, DATABASE_UNAVAILABLE, [RETRY_AFTER]
            else:
                log.error("unexpected error on %s %s", scope["method"], scope["path"], exc_info=exc)
                status, problem, extra = 500, INTERNAL_ERROR, []
            if not started:
                headers = [(b"content-type", b"application/problem+json"), *extra]
                await send({"type": "http.response.start", "status": status, "headers": headers})
                await send({"type": "http.response.body", "body": _problem_body(problem)})


def _route(scope: Scope) -> str:
    """The route template, or a mount's path (the documentation assets), or ``unmatched``."""
    route = getattr(scope.get("route"), "path", None)
    if route is None and "endpoint" in scope:
        route = scope.get("root_path")
    return str(route or "unmatched")


class RequestMetrics:
    """Count and time every request by route template; one access log line each."""

    def __init__(self, app: ASGIApp, metrics: Metrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        start = time.perf_counter()
        status = 500

        async def send_wrapper(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, send_wrapper)
        finally:
            route = _route(scope)
            elapsed = time.perf_counter() - start
            self.metrics.requests.labels(scope["method"], route, str(status)).inc()
            self.metrics.latency.labels(scope["method"], route).observe(elapsed)
            logging.getLogger("ctxc.access").info(
                "request",
                extra={
                    "method": scope["method"],
                    "path": scope["path"],
                    "route": route,
                    "status": status,
                    "ms": round(elapsed * 1000, 2),
                },
            )
