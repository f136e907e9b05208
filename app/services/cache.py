"""Bounded in-memory caches for stateless compiles.

Agents post a growing history on every stateless compile. ``MessageCache`` parses and tokenises
each posted message once, then finds it by content hash; ``Lru`` is the size-bounded map under it
(the HTTP layer also keeps whole compile answers in one).
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Hashable, Sequence
from typing import Any, Generic, TypeVar

import orjson
from cachetools import LRUCache

from app.domain.errors import FormatError, InvalidInput, Path
from app.domain.formats.convert import Format, parse_messages
from app.domain.messages import Message
from app.domain.tokens import TokenCounter

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")
Entry = tuple[Message, dict[str, int]]


class Lru(Generic[K, V]):
    """A thread-safe least-recently-used map bounded by the sizes its entries are put with.

    ``cachetools.LRUCache`` does the bookkeeping; it is not thread-safe (a read reorders it), and
    compiles run in worker threads, hence the lock.
    """

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self._entries: LRUCache[K, tuple[V, int]] = LRUCache(max_bytes, getsizeof=_size)
        self._lock = threading.Lock()
        self._hits = self._misses = 0

    def get(self, key: K) -> V | None:
        with self._lock:
            found = self._entries.get(key)
            if found is None:
                self._misses += 1
                return None
            self._hits += 1
        return found[0]

    def stats(self) -> tuple[int, int, int, int]:
        """Hits and misses so far, bytes and entries held (for the metrics)."""
        with self._lock:
            return self._hits, self._misses, int(self._entries.currsize), len(self._entries)

    def put(self, key: K, value: V, size: int) -> None:
        """Keep ``value`` (unless it alone is over the bound), evicting the least recent."""
        if size > self.max_bytes:
            return
        with self._lock:
            if key not in self._entries:
                self._entries[key] = (value, size)


def _size(entry: tuple[Any, int]) -> int:
    return entry[1]


def canonical_json(value: Any) -> bytes:
    """``value`` as JSON with sorted keys: equal values, equal bytes (non-finite numbers are
    refused before anything is cached, so none reaches here)."""
    try:
        return orjson.dumps(value, option=orjson.OPT_SORT_KEYS)
    except TypeError:  # integers beyond 64 bits
        return json.dumps(value, sort_keys=True, ensure_ascii=False).encode()


class MessageCache:
    """Parse-and-count with memory: the same posted message is never parsed or counted twice.

    Keyed by the sha256 of the tenant and the message's canonical JSON: a parsed message depends
    on nothing else, but a hit answers faster, so one tenant must never hit what another sent
    (that would tell it what the other sent). Bounded by the bytes of that JSON.
    """

    def __init__(self, counter: TokenCounter, max_bytes: int) -> None:
        self.counter = counter
        self.entries: Lru[bytes, Entry] = Lru(max_bytes)

    def parse(
        self, tenant: str, fmt: Format, raw: Sequence[Any], system: Any = None
    ) -> list[Entry]:
        """Every message of ``raw`` (Anthropic's ``system`` first), parsed and counted, with what
        ``tenant`` sent before.

        Problems name the message index, as ``parse_messages`` does, for all bad messages.
        """
        # The system prompt is small and sent once: parsed as it comes (its errors say "system").
        system_messages = parse_messages(fmt, [], system) if system is not None else []
        out = [(m, self.counter.count_all(m)) for m in system_messages]
        problems: list[tuple[Path, str]] = []
        scope = hashlib.sha256(tenant.encode()).digest()
        for i, item in enumerate(raw):
            try:
                out.append(self._one(scope, fmt, item, (i,)))
            except InvalidInput as exc:
                problems += exc.problems
        if problems:
            raise InvalidInput(problems)
        return out

    def _one(self, scope: bytes, fmt: Format, raw: Any, where: Path) -> Entry:
        text = canonical_json([fmt, raw])
        key = hashlib.sha256(scope + text).digest()
        found = self.entries.get(key)
        if found is not None:
            return found
        entry = self._parse(fmt, raw, where)
        self.entries.put(key, entry, len(text))
        return entry

    def _parse(self, fmt: Format, raw: Any, where: Path) -> Entry:
        try:
            [message] = parse_messages(fmt, [raw])
        except FormatError as exc:
            raise InvalidInput([((*where, *exc.path[1:]), exc.message)]) from None
        except InvalidInput as exc:
            raise InvalidInput([((*where, *p[1:]), m) for p, m in exc.problems]) from None
        return message, self.counter.count_all(message)
