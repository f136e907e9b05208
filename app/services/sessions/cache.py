"""Bounded in-memory caches for stateless compiles.

Agents post a growing history on every stateless compile. ``MessageCache`` parses and tokenises
each posted message once, then finds it by content hash; ``Lru`` is the size-bounded map under it
(the HTTP layer also keeps whole compile answers in one).

A message is counted only in the encodings a compile asks for, each once, when first asked; a
big batch is counted on up to ``COUNT_THREADS`` threads at once (tiktoken's encoder releases the
GIL, so the text of one message is encoded while another is walked).
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
from collections import deque
from collections.abc import Collection, Hashable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Generic, TypeVar

import orjson
from cachetools import LRUCache

from app.domain.compiling import Output
from app.domain.errors import FormatError, InvalidInput, Path
from app.domain.formats.convert import Format, parse_messages
from app.domain.formats.responses import group_turns
from app.domain.messages import Message
from app.domain.tokens import Encoder, TokenCounter, count_message

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")
# A parsed message and its token counts by encoding: filled per encoding as compiles ask for it
# (setting a key is atomic, and two threads counting the same message set the same value).
Entry = tuple[Message, dict[str, int]]
# Threads one batch is counted on (the calling one included), and the messages below which a
# batch is counted on the calling thread alone (a hand-over costs more than that).
COUNT_THREADS = max(1, min(4, os.cpu_count() or 1))
PARALLEL_MESSAGES = 64
CHUNK = 16
WARMED_KEPT = 4096  # sessions whose warmed output's key is known (about 600 bytes each)
KNOWN_PAYLOADS = 16_384  # originals known to be kept (about 300 bytes each)


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

    def pop(self, key: K) -> None:
        """Forget what ``key`` holds, if anything."""
        with self._lock:
            self._entries.pop(key, None)

    def put(self, key: K, value: V, size: int, replace: bool = False) -> None:
        """Keep ``value`` (unless it alone is over the bound), evicting the least recent; what
        ``key`` holds already stays, unless told to ``replace`` it."""
        if size > self.max_bytes:
            if replace:
                self.pop(key)
            return
        with self._lock:
            if replace or key not in self._entries:
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

    def __init__(
        self,
        counter: TokenCounter,
        max_bytes: int,
        threads: int = COUNT_THREADS,
        stored_bytes: int = 0,
        view_bytes: int = 0,
        tail_bytes: int = 0,
    ) -> None:
        self.counter = counter
        self.entries: Lru[bytes, Entry] = Lru(max_bytes)
        # Stored messages as a session compile parsed them, by session, history version, seq
        # and the time the row was written (app/services/compiling/stored.py); a session's keys
        # are its own (bounded by ``stored_bytes``).
        self.stored: Lru[tuple[str, int, int, Any], Message] = Lru(stored_bytes)
        # Session compiles' outputs, by tenant, session and a hash of the history's version and
        # last seq and all else the output depends on (app/services/compiling/remembered.py).
        self.views: Lru[tuple[str, str, bytes], Output] = Lru(view_bytes)
        # The tails long session compiles read, by tenant, session and digest: the next reads
        # what was stored since (app/services/compiling/tails.py).
        self.tails: Lru[tuple[str, str, str], Any] = Lru(tail_bytes)
        # The output a write last warmed, per tenant and session: the history version and last
        # seq it is of, and its key (one such output kept per session, while the session is
        # among the last ``WARMED_KEPT``: app/services/compiling/warming.py).
        self.warmed: LRUCache[tuple[str, str], tuple[tuple[int, int], tuple[str, str, bytes]]] = (
            LRUCache(WARMED_KEPT)
        )
        # Originals a session kept in its payloads when a compile last looked, by tenant,
        # session pk and sha256 (app/services/sessions/originals.py): what the next compile
        # checks in the statement that records it, instead of asking in one of their own.
        self.payloads: LRUCache[tuple[str, str, str], bool] = LRUCache(KNOWN_PAYLOADS)
        self.threads = threads
        self._pool: ThreadPoolExecutor | None = None
        self._pool_lock = threading.Lock()

    def parse(
        self,
        tenant: str,
        fmt: Format,
        raw: Sequence[Any],
        system: Any = None,
        encodings: Collection[str] | None = None,
        keys: list[bytes] | None = None,
    ) -> list[Entry]:
        """Every message of ``raw`` (Anthropic's ``system`` first), parsed and counted in
        ``encodings`` (default: every encoding of the counter), with what ``tenant`` sent before.
        ``keys`` gets each message's key, in the same order: the hash of the tenant and the
        message as sent (the system prompt's: of it as sent).

        Problems name the message index, as ``parse_messages`` does, for all bad messages.
        Messages are counted as they are parsed, by the pool's threads once there are enough of
        them, and by this thread after its last message is parsed.
        """
        names = tuple(self.counter.encoders if encodings is None else encodings)
        encoders = [(name, self.counter.encoder(name)) for name in names]
        # The system prompt is small and sent once: parsed as it comes (its errors say "system").
        system_messages = parse_messages(fmt, [], system) if system is not None else []
        out: list[Entry] = [(m, {}) for m in system_messages]
        problems: list[tuple[Path, str]] = []
        scope = hashlib.sha256(tenant.encode()).digest()
        if keys is not None and system_messages:
            system_key = hashlib.sha256(scope + canonical_json(["system", system])).digest()
            keys += [system_key] * len(system_messages)
        with _Counting(self, encoders) as counting:
            counting.add(out)
            for i, item in enumerate(raw):
                try:
                    entry = self._one(scope, fmt, item, (i,), keys)
                except InvalidInput as exc:
                    problems += exc.problems
                    continue
                out.append(entry)
                if not problems and fmt != "responses":
                    counting.add((entry,))
            if problems:
                raise InvalidInput(problems)
            if fmt == "responses":
                # Items are remembered one by one; a turn's items then join into one message.
                out = _turns(out)
                counting.add(out)
        return out

    def executor(self) -> ThreadPoolExecutor:
        """The pool whose threads help count big batches (``threads - 1`` of them)."""
        with self._pool_lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(self.threads - 1, thread_name_prefix="ctxc-count")
            return self._pool

    def _one(
        self, scope: bytes, fmt: Format, raw: Any, where: Path, keys: list[bytes] | None = None
    ) -> Entry:
        text = canonical_json([fmt, raw])
        key = hashlib.sha256(scope + text).digest()
        if keys is not None:
            keys.append(key)
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
        return message, {}


class _Counting:
    """One batch's counting, shared between the parsing thread and the pool's threads.

    Parsed messages that lack a count go into chunks; once ``PARALLEL_MESSAGES`` wait, the
    pool's threads are asked to help, and take chunks as the parsing thread adds them. When
    parsing ends (``__exit__``), the parsing thread counts whatever is left, then waits for the
    chunks a helper took. It never waits for a helper that has not started (another batch may
    hold the pool): what no helper took, it counts itself.
    """

    def __init__(self, cache: MessageCache, encoders: list[tuple[str, Encoder]]) -> None:
        self.cache, self.encoders = cache, encoders
        self.pending: list[tuple[Entry, str, Encoder]] = []
        self.chunks: deque[list[tuple[Entry, str, Encoder]]] = deque()
        self.queued = 0  # messages waiting in chunks, until helpers are asked for
        self.helping = False
        self.closed = False  # no more chunks come: helpers leave when the queue is empty
        self.running = 0  # helpers inside a chunk
        self.failures: list[BaseException] = []
        self.lock = threading.Condition()

    def __enter__(self) -> _Counting:
        return self

    def add(self, entries: Iterable[Entry]) -> None:
        """Count these entries (now or later) in every encoding they lack."""
        for entry in entries:
            for name, encoder in self.encoders:
                if name not in entry[1]:
                    self.pending.append((entry, name, encoder))
        if len(self.pending) >= CHUNK:
            self._queue()

    def _queue(self) -> None:
        chunk, self.pending = self.pending, []
        with self.lock:
            self.chunks.append(chunk)
            self.queued += len(chunk)
            self.lock.notify()
            start = not self.helping and self.queued >= PARALLEL_MESSAGES
            self.helping = self.helping or start
        if start and self.cache.threads > 1:
            pool = self.cache.executor()
            for _ in range(self.cache.threads - 1):
                pool.submit(self._help)

    def cancel(self) -> None:
        """Drop what is not counted yet (the batch is refused)."""
        self.pending = []
        with self.lock:
            self.chunks.clear()

    def _take(self, wait: bool) -> list[tuple[Entry, str, Encoder]] | None:
        """The next chunk (None once there is none left and none to come); a helper (``wait``)
        waits for the parsing thread to add one."""
        with self.lock:
            while wait and not self.chunks and not self.closed:
                self.lock.wait()
            if not self.chunks:
                return None
            if wait:  # a helper: the parsing thread waits for it to finish the chunk
                self.running += 1
            return self.chunks.popleft()

    def _help(self) -> None:
        while (chunk := self._take(wait=True)) is not None:
            try:
                _count(chunk)
            except BaseException as exc:  # handed to the parsing thread
                self.failures.append(exc)
            finally:
                with self.lock:
                    self.running -= 1
                    self.lock.notify_all()

    def __exit__(self, kind: object, *rest: object) -> None:
        if kind is not None:  # parsing failed: nothing to count
            self.cancel()
        if self.pending:
            self._queue()
        with self.lock:
            self.closed = True
            self.lock.notify_all()
        try:
            while (chunk := self._take(wait=False)) is not None:
                _count(chunk)
        finally:
            with self.lock:
                self.lock.wait_for(lambda: self.running == 0)
        if self.failures:
            raise self.failures[0]


def _turns(entries: list[Entry]) -> list[Entry]:
    """Responses entries (one per item) joined into turns; a joined message is counted anew
    (an item left alone keeps its remembered entry)."""
    alone = {id(message): (message, counts) for message, counts in entries}
    grouped = group_turns([message for message, _ in entries])
    return [alone.get(id(message), (message, {})) for message in grouped]


def _count(chunk: list[tuple[Entry, str, Encoder]]) -> None:
    for (message, counts), name, encoder in chunk:
        counts[name] = count_message(message, encoder)
