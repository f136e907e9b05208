"""A whole answer or a streamed one, of any provider wire, read into a Reply."""

from __future__ import annotations

from typing import Any

from app.domain.wire.anthropic import AnthropicStream, anthropic_reply
from app.domain.wire.gemini import GeminiStream, gemini_reply
from app.domain.wire.openai import OpenAIStream, openai_reply
from app.domain.wire.reply import Budget, Provider, Reply
from app.domain.wire.responses import ResponsesStream, responses_reply
from app.domain.wire.sse import EventParser

DEFAULT_MAX_BYTES = 64 * 2**20


def reply_of(provider: Provider, body: Any) -> Reply:
    """The reply of a non-streamed answer (its parsed JSON); WireError when it is none."""
    if provider == "responses":
        return responses_reply(body)
    if provider == "gemini":
        return gemini_reply(body)
    return openai_reply(body) if provider == "openai" else anthropic_reply(body)


class ReplyStream:
    """Fed the raw bytes of an upstream event stream as they arrive (split anywhere, even inside
    a UTF-8 character or a line), it assembles the reply, keeping only what the reply needs:
    a line, an event or the reply over ``max_bytes`` raises WireError, as does an event that
    breaks the protocol; after one, the reply is lost (feed no more; the bytes already forwarded
    to the client are not this object's concern)."""

    def __init__(self, provider: Provider, max_bytes: int = DEFAULT_MAX_BYTES) -> None:
        self._events = EventParser(max_bytes)
        budget = Budget(max_bytes)
        self._reader: OpenAIStream | AnthropicStream | ResponsesStream | GeminiStream
        if provider == "responses":
            self._reader = ResponsesStream(budget)
        elif provider == "gemini":
            self._reader = GeminiStream(budget)
        else:
            self._reader = OpenAIStream(budget) if provider == "openai" else AnthropicStream(budget)

    def feed(self, chunk: bytes) -> None:
        """Read the next bytes of the stream."""
        for event in self._events.feed(chunk):
            self._reader.take(event)

    @property
    def error(self) -> dict[str, Any] | None:
        """The error the stream reported (its reply then never completes)."""
        return self._reader.error

    def reply(self) -> Reply | None:
        """The reply, once the stream ended properly: None before, and after an error."""
        return self._reader.reply()
