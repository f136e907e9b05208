"""The asynchronous client: the methods of `Client` (client.py, kept in step with it), awaited."""

from __future__ import annotations

from collections.abc import AsyncIterator
from types import TracebackType
from typing import Any, Self, TypeVar, Unpack

import anyio
import httpx

from ctxc_client import bodies, calls, models
from ctxc_client.calls import Call
from ctxc_client.config import Config
from ctxc_client.errors import CtxcError, problem_error
from ctxc_client.sse import Reconnects, SseParser

T = TypeVar("T")


class AsyncClient:
    """The ctxc API over one pooled HTTP connection set; use it in an ``async with``
    block, or ``aclose()`` it."""

    def __init__(
        self,
        base_url: str,
        api_key: str | None = None,
        *,
        timeout: float = 60.0,
        max_retries: int = 2,
        http_client: httpx.AsyncClient | None = None,
    ) -> None:
        self.config = Config(base_url, api_key, timeout, max_retries)
        self._owned = http_client is None
        self._http = http_client or httpx.AsyncClient(timeout=timeout)

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the connections (not those of an ``http_client`` passed in: its owner does)."""
        if self._owned:
            await self._http.aclose()

    async def _send(self, call: Call[T]) -> T:
        attempt = 0
        while True:
            try:
                response = await self._http.request(**self.config.request(call))
                if response.is_error:
                    raise problem_error(response)
                return call.read(response)
            except (CtxcError, httpx.TransportError) as error:
                wait = self.config.retry_wait(call, attempt, error)
                if wait is None:
                    raise
            await anyio.sleep(wait)
            attempt += 1

    # Sessions

    async def create_session(self, **fields: Unpack[bodies.SessionCreate]) -> models.Session:
        """A new session (``id`` generated when not given); 409 when the id is taken."""
        return await self._send(calls.create_session(fields))

    async def get_session(self, session_id: str) -> models.Session:
        return await self._send(calls.get_session(session_id))

    async def list_sessions(
        self, *, after: str | None = None, limit: int | None = None
    ) -> models.SessionPage:
        """One page of the tenant's sessions by id; pass its ``next_after`` for the next."""
        return await self._send(calls.list_sessions(after, limit))

    async def iter_sessions(self, *, page_size: int | None = None) -> AsyncIterator[models.Session]:
        """Every session, page after page."""
        after: str | None = None
        while True:
            page = await self.list_sessions(after=after, limit=page_size)
            for item in page.items:
                yield item
            if page.next_after is None:
                return
            after = page.next_after

    async def update_session(
        self, session_id: str, **fields: Unpack[bodies.SessionUpdate]
    ) -> models.Session:
        """Change the given fields; a new ``resume_key`` ends the provider session."""
        return await self._send(calls.update_session(session_id, fields))

    async def delete_session(self, session_id: str) -> None:
        """Delete the session with everything it holds (not resent: a second try is a 404)."""
        await self._send(calls.delete_session(session_id))

    # Messages

    async def append_messages(
        self,
        session_id: str,
        messages: list[Any],
        *,
        idempotency_key: str | None = None,
        **fields: Unpack[bodies.Append],
    ) -> models.AppendResult:
        """Append a batch; it carries ``idempotency_key`` (else a fresh key), so a retry never
        stores it twice."""
        return await self._send(
            calls.append_messages(session_id, messages, idempotency_key, fields)
        )

    async def list_messages(
        self,
        session_id: str,
        *,
        after_seq: int = 0,
        limit: int | None = None,
        section: str | None = None,
    ) -> models.CanonicalPage:
        """One page of stored messages after ``after_seq``, canonical, with seq and tokens."""
        return await self._send(calls.list_messages(session_id, after_seq, limit, section))

    async def iter_messages(
        self,
        session_id: str,
        *,
        after_seq: int = 0,
        section: str | None = None,
        page_size: int | None = None,
    ) -> AsyncIterator[models.MessageItem]:
        """Every stored message after ``after_seq``, page after page."""
        while True:
            page = await self.list_messages(
                session_id, after_seq=after_seq, limit=page_size, section=section
            )
            for item in page.items:
                yield item
            if page.next_after_seq is None:
                return
            after_seq = page.next_after_seq

    async def provider_messages(
        self,
        session_id: str,
        format: str,
        *,
        after_seq: int = 0,
        limit: int | None = None,
        section: str | None = None,
    ) -> models.ProviderPage:
        """One page of stored messages as one ``format`` (openai, anthropic, responses) document."""
        return await self._send(
            calls.provider_messages(session_id, format, after_seq, limit, section)
        )

    # Compiling and the cursor

    async def compile(
        self, messages: list[Any], **fields: Unpack[bodies.CompileRequest]
    ) -> models.CompileResult:
        """Compile a posted history without storing it."""
        return await self._send(calls.compile(messages, fields))

    async def compile_session(
        self, session_id: str, **fields: Unpack[bodies.SessionCompileRequest]
    ) -> models.CompileResult:
        """Compile the stored session for its provider; the answer's ``compile_id`` is what
        ``acknowledge`` takes."""
        return await self._send(calls.compile_session(session_id, fields))

    async def acknowledge(
        self, session_id: str, compile_id: str, **fields: Unpack[bodies.CursorAcknowledge]
    ) -> models.Cursor:
        """Acknowledge a compile the model call succeeded with: the cursor moves past it."""
        return await self._send(calls.acknowledge(session_id, compile_id, fields))

    async def reset_cursor(self, session_id: str) -> models.Cursor:
        """Forget what the provider session holds: the next compile is full."""
        return await self._send(calls.reset_cursor(session_id))

    async def count_tokens(
        self, messages: list[Any], **fields: Unpack[bodies.TokenCount]
    ) -> models.TokenCountResult:
        """Count a request's tokens without storing it."""
        return await self._send(calls.count_tokens(messages, fields))

    async def list_providers(self) -> models.ProviderList:
        return await self._send(calls.list_providers())

    # Compactions and originals

    async def compact(
        self,
        session_id: str,
        kind: models.CompactionKind,
        **fields: Unpack[bodies.CompactRequest],
    ) -> models.Compaction:
        """Run a compaction of ``kind`` now (409 when there is nothing to compact)."""
        return await self._send(calls.compact(session_id, kind, fields))

    async def list_compactions(self, session_id: str) -> list[models.Compaction]:
        return await self._send(calls.list_compactions(session_id))

    async def get_compaction(self, session_id: str, compaction_id: str) -> models.CompactionDetail:
        """A compaction with the messages it archived, exactly as they were stored."""
        return await self._send(calls.get_compaction(session_id, compaction_id))

    async def get_tool_call(
        self, session_id: str, call_id: str, *, seq: int | None = None
    ) -> models.ToolCall:
        """A stored tool call and its result, whole (``seq``: which one, for a reused id)."""
        return await self._send(calls.get_tool_call(session_id, call_id, seq))

    async def get_payload(self, session_id: str, sha256: str) -> models.Payload:
        """A stored tool payload field by its sha256 (the digests compaction shows)."""
        return await self._send(calls.get_payload(session_id, sha256))

    async def recall(
        self,
        session_id: str,
        arguments: dict[str, Any] | str,
        **fields: Unpack[bodies.Recall],
    ) -> models.RecallResult:
        """Run the model's call of the recall tool (its ``arguments`` as the model gave them):
        one page of the original, as the tool result to append."""
        return await self._send(calls.recall(session_id, arguments, fields))

    # Events

    async def events(
        self,
        session_id: str,
        last_event_id: int | None = None,
        *,
        max_reconnects: int = 8,
        reconnect_wait: float = 0.5,
        read_timeout: float = 60.0,
    ) -> AsyncIterator[models.Event]:
        """The session's events, endlessly: those after ``last_event_id`` first (0: all), else
        from the next one. A stream that ends or breaks is resumed with `Last-Event-ID` set to
        the last event seen, so none is lost or repeated; `EventStreamLost` after
        ``max_reconnects`` failed reconnects in a row. Until an event has been seen, a stream
        started without ``last_event_id`` has no id to resume from: pass one to miss nothing.
        ``read_timeout`` must exceed the server's heartbeat interval (15 s by default)."""
        policy = Reconnects(max_reconnects, reconnect_wait, last_event_id)
        timeout = httpx.Timeout(self.config.timeout, read=read_timeout)
        while True:
            parser = SseParser()
            error: CtxcError | httpx.TransportError | None = None
            request = self.config.stream(session_id, policy.headers(), timeout)
            try:
                async with self._http.stream(**request) as response:
                    if response.is_error:
                        await response.aread()
                        raise problem_error(response)
                    async for line in response.aiter_lines():
                        policy.alive()
                        event = parser.feed(line)
                        if event is not None:
                            policy.seen(event)
                            yield event
            except (CtxcError, httpx.TransportError) as exc:
                error = exc
            await anyio.sleep(policy.wait(error, parser))
