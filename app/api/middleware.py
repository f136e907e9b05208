"""ASGI middleware: body size limit (before parsing) and request metrics/logs."""

from __future__ import annotations

import json
import logging
import time

from prometheus_client import CollectorRegistry, Counter, Histogram
from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.storage.faults import is_fault

log = logging.getLogger("ctxc")


class Metrics:
    """The service's Prometheus metrics, in a registry of its own (one per app)."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter(
            "ctxc_http_requests",
            "HTTP requests",
            ["method", "route", "status"],
            registry=self.registry,
        )
        self.latency = Histogram(
            "ctxc_http_request_duration_seconds",
            "HTTP request latency",
            ["method", "route"],
            registry=self.registry,
        )
        self.tokens = Counter(
            "ctxc_tokens_counted",
            "Tokens counted, by encoding",
            ["encoding"],
            registry=self.registry,
        )
        self.answers = Counter(
            "ctxc_stateless_compiles",
            "Stateless compile answers: compiled, or remembered from the same request",
            ["answer"],
            registry=self.registry,
        )


def _problem_413(limit: int) -> bytes:
    return json.dumps(
        {
            "type": "urn:ctxc:problem:payload-too-large",
            "title": "Payload too large",
            "status": 413,
            "detail": f"the request body is larger than {limit} bytes",
        }
    ).encode()


class BodyLimit:
    """Answer 413 for bodies over ``limit`` bytes: by Content-Length before anything is read,
    else as soon as the streamed body passes the limit (the route's problem handler answers)."""

    def __init__(self, app: ASGIApp, limit: int) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        length = dict(scope["headers"]).get(b"content-length")
        if length is not None and length.isdigit() and int(length) > self.limit:
            await self._reject(send)
            return
        seen = 0

        async def limited_receive() -> Message:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.limit:
                    raise HTTPException(413, f"the request body is larger than {self.limit} bytes")
            return message

        await self.app(scope, limited_receive, send)

    async def _reject(self, send: Send) -> None:
        body = _problem_413(self.limit)
        headers = [
            (b"content-type", b"application/problem+json"),
            (b"content-length", str(len(body)).encode()),
            (b"connection", b"close"),
        ]
        await send({"type": "http.response.start", "status": 413, "headers": headers})
        await send({"type": "http.response.body", "body": body})


INTERNAL_ERROR = json.dumps(
    {
        "type": "urn:ctxc:problem:internal",
        "title": "Internal error",
        "status": 500,
        "detail": "unexpected error",
    }
).encode()
RETRY_AFTER_S = 2  # what a 503 for a database fault asks the client to wait
RETRY_AFTER = (b"retry-after", str(RETRY_AFTER_S).encode())
DATABASE_UNAVAILABLE = json.dumps(
    {
        "type": "urn:ctxc:problem:database-unavailable",
        "title": "Database unavailable",
        "status": 503,
        "detail": "the database is unavailable or failing over: retry after Retry-After "
        "seconds (an append retried with its Idempotency-Key is never stored twice)",
    }
).encode()
FAULT_LOG_EVERY_S = 10.0


class FaultLog:
    """Database faults are logged as one warning per ``every`` seconds at most (an outage
    would otherwise write a line per request), with how many requests it answered since."""

    def __init__(self, every: float = FAULT_LOG_EVERY_S) -> None:
        self.every = every
        self.last = -every
        self.unlogged = 0

    def fault(self, scope: Scope, exc: BaseException) -> None:
        now = time.monotonic()
        self.unlogged += 1
        if now - self.last < self.every:
            return
        log.warning(
            "database unavailable on %s %s, answering 503 (%d requests since the last report): %s",
            scope["method"],
            scope["path"],
            self.unlogged,
            _one_line(exc),
        )
        self.last, self.unlogged = now, 0


def _one_line(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"[:300]


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
                status, body, extra = 503, DATABASE_UNAVAILABLE, [RETRY_AFTER]
            else:
                log.error("unexpected error on %s %s", scope["method"], scope["path"], exc_info=exc)
                status, body, extra = 500, INTERNAL_ERROR, []
            if not started:
                headers = [(b"content-type", b"application/problem+json"), *extra]
                await send({"type": "http.response.start", "status": status, "headers": headers})
                await send({"type": "http.response.body", "body": body})


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
            route = getattr(scope.get("route"), "path", "unmatched")
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
