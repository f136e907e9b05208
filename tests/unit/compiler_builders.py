"""Builders for compiler tests: messages, stored items and snapshots with simple token counts."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from app.domain.compilers.base import Compiled, Item, Snapshot
from app.domain.messages import Message, TextPart, ToolCallPart, ToolResultPart

NOW = datetime(2025, 3, 1, 12, 30, tzinfo=UTC)


def count(message: Message) -> int:
    """A deterministic stand-in for tiktoken: 4 per message plus one per word of text."""
    return 4 + len(message.text.split())


def user(text: str = "hi", **metadata: Any) -> Message:
    return Message(role="user", content=(TextPart(text=text),), metadata=metadata)


def system(text: str) -> Message:
    return Message(role="system", content=(TextPart(text=text),))


def assistant(text: str = "", *call_ids: str, **metadata: Any) -> Message:
    parts: list[Any] = [TextPart(text=text)] if text else []
    parts += [ToolCallPart(id=c, name="run", arguments={"cmd": c}) for c in call_ids]
    return Message(role="assistant", content=tuple(parts), metadata=metadata)


def tool(call_id: str, text: str = "ok", **metadata: Any) -> Message:
    result = ToolResultPart(call_id=call_id, content=text)
    return Message(role="tool", content=(result,), metadata=metadata)


def results(*call_ids: str, **metadata: Any) -> Message:
    """A user turn carrying tool results, as Anthropic sends them."""
    parts = tuple(ToolResultPart(call_id=c, content="ok") for c in call_ids)
    return Message(role="user", content=parts, metadata=metadata)


Entry = Message | tuple[str, Message]


def items(*entries: Entry, tokens: int | Sequence[int] | None = None) -> tuple[Item, ...]:
    """Stored items with seqs 1..n; a bare message goes to ``messages``; tokens as given."""
    out = []
    for n, entry in enumerate(entries):
        section, message = entry if isinstance(entry, tuple) else ("messages", entry)
        if tokens is None:
            cost = count(message)
        else:
            cost = tokens if isinstance(tokens, int) else tokens[n]
        out.append(Item(n + 1, section, message, cost))
    return tuple(out)


def snapshot(stored: Sequence[Item] = (), **fields: Any) -> Snapshot:
    """A snapshot for tenant ``acme`` at NOW with the builder's count."""
    defaults: dict[str, Any] = {"tenant": "acme", "now": NOW, "count": count}
    return Snapshot(items=tuple(stored), **{**defaults, **fields})


def seqs(compiled: Compiled) -> list[int]:
    return [item.seq for item in compiled.items]


def texts(compiled: Compiled) -> list[str]:
    return [item.message.text for item in compiled.items]


def left(compiled: Compiled, reason: str) -> list[int]:
    return sorted(s for entry in compiled.left_out if entry.reason == reason for s in entry.seqs)
