"""Oversized tool results (seeds/003 ``compactToolResults``): a head and tail preview.

A textual tool result of more than ``max_tokens`` tokens is replaced, in the view only, by its
first ``head_tokens`` and last ``tail_tokens`` tokens (cut at line ends where one is near) around
one bracketed line that says how much was left out and where the whole text is. Results with more
than text, and results compacted already, are left as they are.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial

from app.domain.messages import Message, Part, ToolResultPart
from app.domain.tool_payloads.compaction import (
    CONTENT_FIELD,
    PREVIEW_KEY,
    Compaction,
    Omitted,
    fresh_text,
    text_digest,
)


@dataclass(frozen=True)
class PreviewRules:
    max_tokens: int = 2_000
    head_tokens: int = 500
    tail_tokens: int = 500


def _head(text: str, chars: int) -> str:
    head = text[:chars]
    cut = head.rfind("\n", chars // 2)
    return head[:cut] if cut >= 0 else head


def _tail(text: str, chars: int) -> str:
    tail = text[len(text) - chars :] if chars else ""
    cut = tail.find("\n", 0, chars // 2)
    return tail[cut + 1 :] if cut >= 0 else tail


def preview(text: str, tokens: int, rules: PreviewRules, pointer: Callable[[int], str]) -> str:
    """The head and tail of ``text`` (``tokens`` long) around ``pointer(characters left out)``."""
    per_token = len(text) / max(tokens, 1)
    head = _head(text, round(rules.head_tokens * per_token))
    tail = _tail(text, round(rules.tail_tokens * per_token))
    return f"{head}\n[{pointer(len(text) - len(head) - len(tail))}]\n{tail}"


Count = Callable[[str], int]
Pointer = Callable[[int, str, int, int], str]


def preview_oversized(
    messages: Sequence[Message],
    rules: PreviewRules,
    count: Callable[[int], Count],
    pointer: Pointer,
    keep: frozenset[int] = frozenset(),
) -> Compaction:
    """``messages`` with each oversized result previewed (the input is left as it is).

    ``count(index)``: how to count the tokens of a result text of message ``index``;
    ``pointer(index, call_id, tokens, characters left out)``: the line between head and tail;
    ``keep``: indexes of messages left whole.
    """
    out = list(messages)
    omitted: dict[int, tuple[Omitted, ...]] = {}
    for i, message in enumerate(messages):
        if i in keep or not message.tool_results:
            continue
        line = partial(pointer, i)
        done = [_previewed(part, rules, count(i), line) for part in message.content]
        lost = tuple(o for _, o in done if o is not None)
        if lost:
            out[i] = message.model_copy(update={"content": tuple(p for p, _ in done)})
            omitted[i] = lost
    return Compaction(tuple(out), omitted)


def _previewed(
    part: Part, rules: PreviewRules, count: Count, pointer: Callable[[str, int, int], str]
) -> tuple[Part, Omitted | None]:
    if not isinstance(part, ToolResultPart):
        return part, None
    text = fresh_text(part)
    # A token is at least one byte: most results are ruled out without counting.
    if text is None or len(text.encode()) <= rules.max_tokens:
        return part, None
    tokens = count(text)
    if tokens <= rules.max_tokens:
        return part, None
    shown = preview(text, tokens, rules, lambda left: pointer(part.call_id, tokens, left))
    sha, size = text_digest(part, text)
    lost = Omitted(part.call_id, "result", CONTENT_FIELD, size, sha, text)
    meta = {"tokens": tokens, "bytes": lost.bytes, "sha256": lost.sha256}
    metadata = {**part.metadata, PREVIEW_KEY: meta}
    return part.model_copy(update={"content": shown, "metadata": metadata}), lost
