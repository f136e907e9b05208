"""How `ctxc serve` runs uvicorn: its options in one place, and an HTTP protocol that cuts off
slow clients.

uvicorn bounds only the idle time between requests (``timeout_keep_alive``); a client that
trickles its headers or body, or stops reading its answer, would hold a socket (and a request
task) for as long as it likes. The protocol below adds two timers per connection:

- a read deadline: a request's headers and body must arrive within ``read_timeout`` of its
  first byte (of the connection, for the first request); else 408 and the connection closes;
- a write deadline: while the client has stopped reading (the transport paused writing), the
  connection lives at most ``write_timeout`` more; then it is dropped.

It is a transport-level concern, so it lives in the protocol: an ASGI middleware never sees a
request whose headers are still arriving. Neither deadline runs while a kept-alive connection
waits, idle, for its next request: that wait is bounded by ``keep_alive`` alone.

Keep-alive. A client pool reuses an idle connection until its own expiry (httpx, and so the
OpenAI and Anthropic SDKs: 5 s; aiohttp: 15 s). A server that closes an idle connection first
races the client: a request sent just as the server's close is under way finds the connection
closed under it (the client sees a read error, the server saw no request and logs nothing). So
the server keeps idle connections longer than common pools do (``CTXC_KEEP_ALIVE_SECONDS``, 75
by default), and says how long in a ``Keep-Alive: timeout=N`` header, which clients such as
Node's undici honour by expiring theirs before it.

Workers. With ``--workers N`` uvicorn spawns N processes that accept on one socket; the
configuration is pickled to each of them, so it is an instance of `ServeConfig` (a module-level
class) carrying the deadlines, not a class built at run time.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Literal

import uvicorn
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from app.logs import json_handler
from app.settings import Settings

log = logging.getLogger("ctxc")

REQUEST_TIMEOUT = (
    b"HTTP/1.1 408 Request Timeout\r\n"
    b"content-type: application/problem+json\r\n"
    b"connection: close\r\n"
    b"content-length: %d\r\n\r\n%s"
)
REQUEST_TIMEOUT_BODY = (
    b'{"type": "urn:ctxc:problem:request-timeout", "title": "Request timeout", "status": 408, '
    b'"detail": "the request was not received within %g seconds"}'
)


class GuardedHttpToolsProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol with a read deadline per request and a write deadline while
    the client does not read (see the module docstring)."""

    read_timeout: float = 30.0
    write_timeout: float = 30.0

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if isinstance(self.config, ServeConfig):
            self.read_timeout = self.config.read_timeout
            self.write_timeout = self.config.write_timeout
        self._read_timer: asyncio.TimerHandle | None = None
        self._write_timer: asyncio.TimerHandle | None = None
        self._reading: Literal["headers", "body"] | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._start_read_deadline()

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel_timers()
        super().connection_lost(exc)

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._reading = "headers"
        if self.cycle is None or self.cycle.response_complete:
            self._start_read_deadline()
        # else a pipelined request: uvicorn reads it once the answer in progress is complete

    def on_headers_complete(self) -> None:
        super().on_headers_complete()
        self._reading = "body"

    def on_message_complete(self) -> None:
        super().on_message_complete()
        self._reading = None
        if self._read_timer is not None:
            self._read_timer.cancel()
            self._read_timer = None

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if self._reading is not None and not self.transport.is_closing():
            self._start_read_deadline()  # the pipelined request's time starts now

    def _start_read_deadline(self) -> None:
        if self._read_timer is None:
            self._read_timer = self.loop.call_later(self.read_timeout, self._read_timed_out)

    def pause_writing(self) -> None:
        super().pause_writing()
        if self._write_timer is None:
            self._write_timer = self.loop.call_later(self.write_timeout, self._write_timed_out)

    def resume_writing(self) -> None:
        super().resume_writing()
        if self._write_timer is not None:
            self._write_timer.cancel()
            self._write_timer = None

    def _cancel_timers(self) -> None:
        for timer in (self._read_timer, self._write_timer):
            if timer is not None:
                timer.cancel()
        self._read_timer = self._write_timer = None

    def _read_timed_out(self) -> None:
        self._read_timer = None
        if self.transport.is_closing():
            return
        if self._reading is not None:  # a request is arriving: answer it unless it is answered
            cycle = self.cycle if self._reading == "body" else None
            if cycle is None or not cycle.response_started:
                log.info("request not received within %g s: 408", self.read_timeout)
                body = REQUEST_TIMEOUT_BODY % self.read_timeout
                self.transport.write(REQUEST_TIMEOUT % (len(body), body))
            if cycle is not None and not cycle.response_complete:
                # The request's task reads a disconnect; what it still sends is dropped.
                cycle.disconnected = True
                cycle.message_event.set()
        self.transport.close()

    def _write_timed_out(self) -> None:
        self._write_timer = None
        log.info(
            "answer not read by the client within %g s: connection dropped", self.write_timeout
        )
        self.transport.abort()  # close() would wait for the unread answer to drain


class ServeConfig(uvicorn.Config):
    """uvicorn's configuration with the guarded protocol's deadlines, and ctxc's JSON logs set up
    in whichever process runs the server (a spawned worker starts with no logging set up)."""

    def __init__(
        self,
        app: Any,
        *,
        read_timeout: float,
        write_timeout: float,
        ctxc_log_level: str,
        **options: Any,
    ) -> None:
        self.read_timeout = read_timeout
        self.write_timeout = write_timeout
        self.ctxc_log_level = ctxc_log_level
        super().__init__(app, **options)

    def configure_logging(self) -> None:
        super().configure_logging()
        if not logging.getLogger().handlers:  # not already set up (the tests' own servers)
            logging.basicConfig(level=self.ctxc_log_level.upper(), handlers=[json_handler()])


def uvicorn_config(app: Any, settings: Settings, **options: Any) -> ServeConfig:
    """uvicorn's configuration for ``app``: `ctxc serve` and the tests' live servers use it."""
    keep_alive = settings.keep_alive_seconds
    return ServeConfig(
        app,
        read_timeout=settings.request_read_timeout_seconds,
        write_timeout=settings.response_write_timeout_seconds,
        ctxc_log_level=settings.log_level,
        http=GuardedHttpToolsProtocol,
        log_config=None,
        access_log=False,
        proxy_headers=False,
        timeout_keep_alive=keep_alive,
        headers=[("keep-alive", f"timeout={keep_alive}")],
        **options,
    )
