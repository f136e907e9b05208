"""Server-Sent Events read line by line, and when to reconnect a stream that ended."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import httpx

from ctxc_client.errors import CtxcError, EventStreamLost, Unavailable
from ctxc_client.models import Event, EventData

MAX_RECONNECT_WAIT_S = 30.0


@dataclass
class SseParser:
    """Fields gathered until the blank line that ends a message (the WHATWG rules, for the
    fields this API sends: `id`, `event`, `data`, `retry`; comment lines are heartbeats)."""

    retry_ms: int | None = None
    _fields: dict[str, str] = field(default_factory=dict)
    _data: list[str] = field(default_factory=list)

    def feed(self, line: str) -> Event | None:
        """The event ``line`` completes, if any."""
        if line == "":
            return self._dispatch()
        if line.startswith(":"):
            return None
        name, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if name == "data":
            self._data.append(value)
        elif name == "retry" and value.isdigit():
            self.retry_ms = int(value)
        elif name in ("id", "event"):
            self._fields[name] = value
        return None

    def _dispatch(self) -> Event | None:
        fields, data = self._fields, self._data
        self._fields, self._data = {}, []
        if not data or not fields.get("id", "").isdigit():
            return None
        return Event(
            id=int(fields["id"]),
            type=fields.get("event", "message"),
            data=EventData.model_validate(json.loads("\n".join(data))),
        )


@dataclass
class Reconnects:
    """The reconnect policy of one event stream: up to ``limit`` reconnects in a row, each
    after the server's `retry` hint or Retry-After, else a backoff doubling from ``base``
    seconds. A connection that brings anything (an event, a heartbeat) resets the count."""

    limit: int
    base: float
    last_event_id: int | None
    failures: int = 0

    def headers(self) -> dict[str, str]:
        if self.last_event_id is None:
            return {}
        return {"Last-Event-ID": str(self.last_event_id)}

    def alive(self) -> None:
        self.failures = 0

    def seen(self, event: Event) -> None:
        self.last_event_id = event.id

    def wait(self, error: CtxcError | httpx.TransportError | None, parser: SseParser) -> float:
        """The wait before the next connect after the stream ended (``error``: how). Errors
        that reconnecting cannot mend (401, 404, ...) are raised, as is the end of attempts."""
        if isinstance(error, CtxcError) and not isinstance(error, Unavailable):
            raise error
        self.failures += 1
        if self.failures > self.limit:
            raise EventStreamLost(
                f"the event stream ended {self.failures} times in a row", self.last_event_id
            ) from error
        if isinstance(error, Unavailable) and error.retry_after is not None:
            hint = error.retry_after
        elif parser.retry_ms is not None:
            hint = parser.retry_ms / 1000
        else:
            hint = self.base * 2.0 ** (self.failures - 1)
        return min(hint, MAX_RECONNECT_WAIT_S)
