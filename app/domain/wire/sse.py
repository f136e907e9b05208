"""Server-sent events read incrementally, per the WHATWG rules, from bytes split anywhere.

Lines end at CRLF, LF or CR (a CR ending one chunk and an LF opening the next are one line end);
a BOM opens the stream at most once; ``data`` lines of one event are joined with LF; comments and
unknown fields are skipped; a blank line dispatches the event (one with no ``data`` is dropped).
Work is linear in the input (no regex, no rescans) and memory bounded: a line or an event's data
over ``max_chars`` raises WireError before it is kept.
"""

from __future__ import annotations

import codecs
from dataclasses import dataclass

from app.domain.wire.reply import WireError

BOM = "\ufeff"


@dataclass(frozen=True)
class Event:
    """One dispatched event: its type (``message`` when unnamed) and its data."""

    event: str
    data: str


class EventParser:
    """Bytes in, dispatched events out."""

    def __init__(self, max_chars: int) -> None:
        self._max = max_chars
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._started = False  # the BOM check is done
        self._skip_lf = False  # the last line ended at a CR: an LF next is part of that end
        self._line: list[str] = []  # the unfinished line, in pieces
        self._line_chars = 0
        self._event = ""
        self._data: list[str] = []
        self._data_chars = 0

    def feed(self, chunk: bytes) -> list[Event]:
        """The events that ``chunk`` completes."""
        return self._text(self._decoder.decode(chunk))

    def _text(self, text: str) -> list[Event]:
        if not text:
            return []
        if not self._started:
            self._started = True
            text = text.removeprefix(BOM)
        if self._skip_lf and text.startswith("\n"):
            text = text[1:]
        if text:
            self._skip_lf = text.endswith("\r")
        lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
        events: list[Event] = []
        for line in lines[:-1]:
            event = self._line_end(line)
            if event is not None:
                events.append(event)
        self._add_piece(lines[-1])
        return events

    def _add_piece(self, piece: str) -> None:
        self._line_chars += len(piece)
        if self._line_chars > self._max:
            raise WireError(f"an event stream line is over {self._max} characters")
        if piece:
            self._line.append(piece)

    def _line_end(self, piece: str) -> Event | None:
        self._add_piece(piece)
        line = "".join(self._line)
        self._line.clear()
        self._line_chars = 0
        if not line:
            return self._dispatch()
        name, colon, value = line.partition(":")
        if not name:
            return None  # a comment
        if colon:
            value = value.removeprefix(" ")
        if name == "data":
            self._add_data(value)
        elif name == "event":
            self._event = value
        return None  # id and retry matter to a reconnecting client, not to reading a reply

    def _add_data(self, value: str) -> None:
        self._data_chars += len(value) + 1
        if self._data_chars > self._max:
            raise WireError(f"an event's data is over {self._max} characters")
        self._data.append(value)

    def _dispatch(self) -> Event | None:
        data, event = "\n".join(self._data), self._event or "message"
        had_data = bool(self._data)
        self._data.clear()
        self._data_chars = 0
        self._event = ""
        return Event(event, data) if had_data else None
