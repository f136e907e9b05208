"""Cutting a history into chunks that each fit a summariser's window.

Chunks are consecutive runs of whole messages, packed greedily in order: a chunk takes the next
message while the sum of ``count`` over it stays within ``budget``. A message over the budget on
its own is never packed with others: it is cut, between characters of its transcript text (at a
line end where one is near), into pieces that fit, each a chunk of its own. A piece is a message
of the same role and name with one text part and ``metadata["piece"] = [k, n]``. In order, the
chunks hold every message (or its pieces); none is over the budget unless one character is.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from app.domain.messages import Message, TextPart
from app.domain.summaries.transcript import render_message

Count = Callable[[Message], int]
Chunk = tuple[Message, ...]


def chunk_messages(messages: Sequence[Message], budget: int, count: Count) -> list[Chunk]:
    """``messages`` as consecutive chunks, each within ``budget`` as ``count`` measures it."""
    chunks: list[Chunk] = []
    current: list[Message] = []
    used = 0
    for message in messages:
        cost = count(message)
        if current and used + cost > budget:
            chunks.append(tuple(current))
            current, used = [], 0
        if cost > budget:
            chunks += [(piece,) for piece in split_message(message, budget, count)]
            continue
        current.append(message)
        used += cost
    if current:
        chunks.append(tuple(current))
    return chunks


def split_message(message: Message, budget: int, count: Count) -> tuple[Message, ...]:
    """``message``'s transcript text cut into piece messages that each fit ``budget``."""
    text = render_message(message)
    size = max(1, len(text) * budget * 9 // (10 * max(count(message), 1)))
    texts: list[str] = []
    start = 0
    while start < len(text):
        piece, size = _fitting(message, text, start, size, budget, count)
        texts.append(piece)
        start += len(piece)
    return tuple(_piece(message, piece, k, len(texts)) for k, piece in enumerate(texts, 1))


def _fitting(
    message: Message, text: str, start: int, size: int, budget: int, count: Count
) -> tuple[str, int]:
    """The longest piece from ``start`` that fits (shrinking ``size``), and the size used."""
    while True:
        end = min(len(text), start + size)
        if end < len(text):
            newline = text.rfind("\n", start + size // 2, end)
            end = newline + 1 if newline >= 0 else end
        piece = text[start:end]
        if size == 1 or count(_piece(message, piece, 1, 1)) <= budget:
            return piece, size
        size = max(1, size * 3 // 4)


def _piece(message: Message, text: str, k: int, n: int) -> Message:
    return Message(
        role=message.role,
        name=message.name,
        content=(TextPart(text=text),),
        metadata={"piece": [k, n]},
    )
