"""A streamed upstream answer passed on as it arrives (and read as it passes), and an answer the
agent stops waiting for."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable

import anyio
import anyio.abc
import httpx
import orjson
from fastapi import Request
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from app.adapters.upstream import returned_headers
from app.api.deps import AppState
from app.domain.wire import Provider, Reply, ReplyStream, WireError

log = logging.getLogger("ctxc")


class Passthrough(Response):
    """The upstream's streamed answer, passed on as it arrives and read as it passes: once its
    reply is complete, the turn is stored, and only then does the agent get the stream's last
    piece, so that its next request (sent as soon as it has the answer) finds this turn stored.
    An agent that goes away before ends the upstream request too (nothing is stored); so does an
    upstream that breaks off (the stream ends there, and nothing is stored)."""

    def __init__(
        self,
        provider: Provider,
        upstream: httpx.Response,
        headers: dict[str, str],
        on_reply: Callable[[Reply], Awaitable[None]] | None,
        hide_usage: bool = False,
    ) -> None:
        # As StreamingResponse: no body, so no Content-Length.
        self.status_code, self.background = upstream.status_code, None
        self.init_headers(returned_headers(upstream) | headers)
        self.provider, self.upstream, self.on_reply = provider, upstream, on_reply
        self.hide_usage = hide_usage
        self.stored = False

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        reader = ReplyStream(self.provider)

        async def pump(group: anyio.abc.TaskGroup) -> None:
            try:
                await send(
                    {
                        "type": "http.response.start",
                        "status": self.status_code,
                        "headers": self.raw_headers,
                    }
                )
                await self._pass(reader, send)
            except OSError as exc:  # the agent went away
                log.info("sidecar stream cut: %s", type(exc).__name__)
            group.cancel_scope.cancel()

        async def watch(group: anyio.abc.TaskGroup) -> None:
            while (await receive())["type"] != "http.disconnect":
                pass
            group.cancel_scope.cancel()

        try:
            async with anyio.create_task_group() as group:
                group.start_soon(pump, group)
                group.start_soon(watch, group)
        finally:
            with anyio.CancelScope(shield=True):
                await self.upstream.aclose()
        if self.on_reply is not None and not self.stored:
            log.info("sidecar stream ended without a complete answer: nothing stored")

    async def _pass(self, reader: ReplyStream, send: Send) -> None:
        """Pass the upstream's chunks on, storing the turn before the one that completes it."""
        hidden = UsageChunks() if self.hide_usage else None
        reading = self.on_reply is not None
        async for chunk in _chunks(self.upstream):
            reading = reading and _fed(reader, chunk)
            if reading and not self.stored and (reply := reader.reply()) is not None:
                await self._store(reply)
            passed = chunk if hidden is None else hidden.without(chunk)
            if passed:
                await send({"type": "http.response.body", "body": passed, "more_body": True})
        rest = hidden.pending if hidden is not None else b""
        await send({"type": "http.response.body", "body": rest, "more_body": False})

    async def _store(self, reply: Reply) -> None:
        assert self.on_reply is not None
        self.stored = True
        with anyio.CancelScope(shield=True):
            try:
                await self.on_reply(reply)
            except Exception:  # the agent has its answer; its next turn stores what is missing
                log.warning("sidecar turn not stored", exc_info=True)


def _fed(reader: ReplyStream, chunk: bytes) -> bool:
    """Whether ``reader`` still reads the stream after ``chunk``: one it cannot read (over its
    bounds, not the provider's events) is still passed on, but not stored."""
    try:
        reader.feed(chunk)
    except WireError as exc:
        log.warning("sidecar stream not read: %s", exc)
        return False
    return True


class UsageChunks:
    """Takes the usage chunk ctxc asked for out of a streamed OpenAI answer: whole events are
    passed on as they complete (an upstream writes one or more at a time), but the one whose
    ``choices`` is empty and which carries ``usage``."""

    def __init__(self) -> None:
        self.pending = b""

    def without(self, chunk: bytes) -> bytes:
        data, passed, start = self.pending + chunk, bytearray(), 0
        while (end := data.find(b"\n\n", start)) >= 0:
            event = data[start : end + 2]
            if not _is_usage_chunk(event):
                passed += event
            start = end + 2
        self.pending = data[start:]
        return bytes(passed)


def _is_usage_chunk(event: bytes) -> bool:
    line = event.strip()
    if not line.startswith(b"data:") or b'"usage"' not in line:
        return False
    try:
        chunk = orjson.loads(line[5:])
    except orjson.JSONDecodeError:
        return False
    return isinstance(chunk, dict) and chunk.get("choices") == [] and bool(chunk.get("usage"))


async def _chunks(upstream: httpx.Response) -> AsyncIterator[bytes]:
    try:
        async for chunk in upstream.aiter_bytes():
            yield chunk
    except httpx.HTTPError as exc:  # cut off: the agent's SDK sees the stream end early
        log.warning("sidecar upstream stream broke off: %s", type(exc).__name__)


async def until_disconnect(
    request: Request,
    answer: Callable[[], Awaitable[Response]],
    provider: Provider,
    state: AppState,
) -> Response:
    """``answer()``, cancelled when the agent goes away first (its upstream request with it)."""
    result: list[Response] = []
    failed: list[Exception] = []

    async def run(group: anyio.abc.TaskGroup) -> None:
        try:
            result.append(await answer())
        except Exception as exc:  # raised below, out of the task group
            failed.append(exc)
        group.cancel_scope.cancel()

    async def watch(group: anyio.abc.TaskGroup) -> None:
        while (await request.receive())["type"] != "http.disconnect":
            pass
        state.metrics.sidecar.labels(provider, "cancelled").inc()
        group.cancel_scope.cancel()

    async with anyio.create_task_group() as group:
        group.start_soon(run, group)
        group.start_soon(watch, group)
    if failed:
        raise failed[0]
    return result[0] if result else Response(status_code=499)
