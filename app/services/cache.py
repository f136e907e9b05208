"""A bounded cache of parsed, counted messages keyed by the hash of their posted JSON.

Agents post a growing history on every stateless compile: each message is parsed and tokenised
once, then found by content hash. Bounded by the bytes of the JSON it has seen (LRU).
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

from app.domain.errors import FormatError, InvalidInput, Path
from app.domain.formats.convert import Format, parse_messages
from app.domain.messages import Message
from app.domain.tokens import TokenCounter

Entry = tuple[Message, dict[str, int]]


class MessageCache:
    """Parse-and-count with memory: the same posted message is never parsed or counted twice."""

    def __init__(self, counter: TokenCounter, max_bytes: int) -> None:
        self.counter = counter
        self.max_bytes = max_bytes
        self._entries: OrderedDict[bytes, tuple[Entry, int]] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    def parse(self, fmt: Format, raw: Sequence[Any], system: Any = None) -> list[Entry]:
        """Every message of ``raw`` (Anthropic's ``system`` first), parsed and counted.

        Problems name the message index, as ``parse_messages`` does, for all bad messages.
        """
        # The system prompt is small and sent once: parsed as it comes (its errors say "system").
        system_messages = parse_messages(fmt, [], system) if system is not None else []
        out = [(m, self.counter.count_all(m)) for m in system_messages]
        problems: list[tuple[Path, str]] = []
        for i, item in enumerate(raw):
            try:
                out.append(self._one(fmt, item, (i,)))
            except InvalidInput as exc:
                problems += exc.problems
        if problems:
            raise InvalidInput(problems)
        return out

    def _one(self, fmt: Format, raw: Any, where: Path) -> Entry:
        text = json.dumps([fmt, raw], sort_keys=True, ensure_ascii=False).encode()
        key = hashlib.sha256(text).digest()
        with self._lock:
            found = self._entries.get(key)
            if found is not None:
                self._entries.move_to_end(key)
                return found[0]
        entry = self._parse(fmt, raw, where)
        self._store(key, entry, len(text))
        return entry

    def _parse(self, fmt: Format, raw: Any, where: Path) -> Entry:
        try:
            [message] = parse_messages(fmt, [raw])
        except FormatError as exc:
            raise InvalidInput([((*where, *exc.path[1:]), exc.message)]) from None
        except InvalidInput as exc:
            raise InvalidInput([((*where, *p[1:]), m) for p, m in exc.problems]) from None
        return message, self.counter.count_all(message)

    def _store(self, key: bytes, entry: Entry, size: int) -> None:
        with self._lock:
            if key in self._entries or size > self.max_bytes:
                return
            self._entries[key] = (entry, size)
            self._bytes += size
            while self._bytes > self.max_bytes:
                _, (_, dropped) = self._entries.popitem(last=False)
                self._bytes -= dropped
