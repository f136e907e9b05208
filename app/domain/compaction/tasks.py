"""The opening task cut to head and tail when it is the bulk of a history a provider refused.

After a ``prompt_too_long`` report the full compaction summarises every round it may take, but
never the opening task (``keep_task``): a session whose bulk is that message (a pasted log, a
long spec) would be sent as it was and refused again. Then the task is cut instead, in the
stored message: each text part over its share of the cap keeps its head and tail around a line
naming where the whole text is (the original is kept by sha256 and archived, as tool-result
previews are), so a short task sentence beside long reminder blocks stays whole.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial

from app.domain.compaction.planning import CompactionPolicy
from app.domain.compilers.base import Item, api_rounds, is_prompt, opening_task
from app.domain.compilers.newest import capped
from app.domain.messages import Message, Part, TextPart
from app.domain.tool_payloads.compaction import (
    CONTENT_FIELD,
    PREVIEW_KEY,
    Omitted,
    payload_sha256,
    payload_size,
)
from app.domain.tool_payloads.previews import preview

# The line between head and tail, given the original's sha256 and the characters left out.
Pointer = Callable[[str, int], str]


@dataclass(frozen=True)
class Cut:
    """The task's message cut, and the original texts it took out."""

    seq: int
    message: Message
    omitted: tuple[Omitted, ...]


def bulky_task(items: Sequence[Item], policy: CompactionPolicy) -> Item | None:
    """The opening task when it is the bulk of ``items``: over the summary's budget and larger
    than everything else (else None)."""
    rounds = api_rounds(items)
    n = opening_task(rounds) if policy.keep_task else None
    if n is None:
        return None
    task = next(i for i in rounds[n] if is_prompt(i))
    rest = sum(i.tokens for i in items) - task.tokens
    return task if task.tokens > max(policy.summary_tokens, rest) else None


def cut_task(task: Item, cap: int, count: Callable[[str], int], pointer: Pointer) -> Cut | None:
    """``task`` with each text part over its share of ``cap`` tokens cut to head and tail
    (None when no part is)."""
    texts = [p for p in task.message.content if isinstance(p, TextPart)]
    share = max(1, cap // max(1, len(texts)))
    parts: list[Part] = []
    omitted: list[Omitted] = []
    for part in task.message.content:
        tokens = count(part.text) if isinstance(part, TextPart) else 0
        if not isinstance(part, TextPart) or tokens <= share:
            parts.append(part)
            continue
        sha = payload_sha256(part.text)
        text = preview(part.text, tokens, capped(share), partial(pointer, sha))
        lost = Omitted("", "result", CONTENT_FIELD, payload_size(part.text), sha, part.text)
        meta = {"tokens": tokens, "bytes": lost.bytes, "sha256": sha}
        parts.append(
            part.model_copy(update={"text": text, "metadata": {**part.metadata, PREVIEW_KEY: meta}})
        )
        omitted.append(lost)
    if not omitted:
        return None
    message = task.message.model_copy(update={"content": tuple(parts)})
    return Cut(task.seq, message, tuple(omitted))
