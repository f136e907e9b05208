"""A session's stored messages as a compile reads them: rows of JSON text, parsed once.

Within a history version a stored row is never rewritten (a seq that a compaction's summary
takes again is another row, written at another time; a tool-payload compaction rewrites rows in
place, and moves the version), so what a compile parsed of it is kept, by session, history
version, seq and the time it was written, in a bounded cache (``MessageCache.stored``): a turn
parses only what is new. The append that moves a digest keeps the tail it parsed there too
(``catching_up``), for the compile after it. A session's keys are its own: no tenant hits, or
can time, another's.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import Row

from app.domain.compilers.base import Item
from app.domain.messages import Message, ToolCallPart, ToolResultPart
from app.services.sessions.cache import MessageCache
from app.services.tenancy import cpu
from app.storage.db import json_loads

# A session's history as the cache knows it: the session's pk and its history version.
History = tuple[str, int]
# What a parsed stored message is counted as in the cache: bytes per token of it, and for the
# objects around its text.
BYTES_PER_TOKEN = 12
OVERHEAD = 512
# A session compile this small (a typical delta), or a parse of this few rows, runs on the event
# loop: it takes about a millisecond, and a worker thread round trip costs a good part of that.
LIGHT_MESSAGES = 64
LIGHT_TOKENS = 16_384


def item_of(row: Row[Any]) -> Item:
    """The item of a stored message row (its content and metadata as JSON text, or parsed)."""
    message = {
        "role": row.role,
        "content": _parsed(row.content),
        "name": row.name,
        "metadata": _parsed(row.meta),
    }
    return Item(row.seq, row.section, Message.model_validate(message), row.tokens)


def _parsed(value: Any) -> Any:
    return json_loads(value) if isinstance(value, str) else value


def items_of(rows: Sequence[Row[Any]], history: History, cache: MessageCache) -> list[Item]:
    """The items of stored message rows of ``history`` (a session's pk and history version),
    each parsed once while the cache keeps it."""
    stored, items = cache.stored, []
    for row in rows:
        key = (*history, row.seq, row.at)
        message = stored.get(key)
        if message is None:
            item = item_of(row)
            stored.put(key, item.message, BYTES_PER_TOKEN * row.tokens + OVERHEAD)
            items.append(item)
        else:
            items.append(Item(row.seq, row.section, message, row.tokens))
    return items


async def parse(rows: Sequence[Row[Any]], history: History, cache: MessageCache) -> list[Item]:
    """``items_of`` on the event loop when the rows are few and small, else in a worker
    thread."""
    if few(rows):
        return items_of(rows, history, cache)
    return await cpu.run_sync(items_of, rows, history, cache)


def kept_bytes(items: Sequence[Item]) -> int:
    """What keeping parsed ``items`` beyond a compile costs, estimated in bytes."""
    return sum(BYTES_PER_TOKEN * i.tokens + OVERHEAD for i in items)


def few(rows: Sequence[Row[Any]]) -> bool:
    """Whether ``rows`` are few and small enough to parse on the event loop."""
    return len(rows) <= LIGHT_MESSAGES and sum(r.tokens for r in rows) <= LIGHT_TOKENS


def tool_ids(items: Sequence[Item], upto: int) -> list[str]:
    """The tool call ids the messages of ``items`` from seq ``upto`` on hold: their calls' ids
    and the ids their results answer."""
    return [
        part.id if isinstance(part, ToolCallPart) else part.call_id
        for item in items
        if item.seq >= upto
        for part in item.message.content
        if isinstance(part, ToolCallPart | ToolResultPart)
    ]
