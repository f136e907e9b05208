"""Summariser requests that reuse the conversation's prompt cache, and the usage they report.

A provider caches a prompt by its prefix. When the messages to summarise are the whole history
taken (``Request.source`` set) and the session's prompts are sent in the backend's own shape,
the request sends the messages left ahead of them (``Source.lead``), the messages themselves
and the messages kept after them (``Source.rest``, when the whole fits the window) as a compile
renders them (``domain.validity.shaping.render``: the prompt the agent last sent, so the prefix
its calls cached, up to its last breakpoint, is read again), then the instructions last, as a
final user turn saying how many of the messages above to summarise. Otherwise (another shape,
or a history cut into chunks) it is the transcript request: the instructions as the system
prompt and the transcript in one user turn.
"""

from __future__ import annotations

from typing import Any

from app.adapters.summarizers.base import Request, Usage
from app.domain.formats.anthropic import System
from app.domain.messages import JSONObject
from app.domain.summaries.prompts import final_turn
from app.domain.validity.shaping import render

EPHEMERAL = {"type": "ephemeral"}


def conversation(request: Request, shape: str) -> tuple[Any, list[JSONObject]] | None:
    """``(system, messages)`` of the cache-reusing request for a backend speaking ``shape``
    (the messages ending with the instruction turn), or None when the transcript request is
    the one to send."""
    source = request.source
    if source is None or source.target != shape or request.part is not None:
        return None
    taken = [*source.lead, *request.messages]
    system, messages, _ = render(taken, shape)  # type: ignore[arg-type]
    if not messages:
        return None
    upto = None
    if source.rest:  # the whole prompt, if the kept messages render after the taken unchanged
        _, whole, _ = render([*taken, *source.rest], shape)  # type: ignore[arg-type]
        if whole[: len(messages)] == messages and len(whole) > len(messages):
            messages, upto = whole, (_turns(messages), _turns(whole))
    said = final_turn(request.reason, request.max_tokens, request.extra, request.carried, upto)
    return system, [*messages, {"role": "user", "content": said}]


def _turns(messages: list[JSONObject]) -> int:
    """How many of ``messages`` are the conversation's (a system prompt among them aside)."""
    return sum(1 for m in messages if m.get("role") not in ("system", "developer"))


def with_breakpoint(system: System, messages: list[JSONObject]) -> list[JSONObject]:
    """Anthropic ``messages`` with a ``cache_control`` breakpoint on the last block before the
    instruction turn (a string content becomes its one text block: the same prompt), so the
    cached prefix is read up to there."""
    prefix, last = messages[:-1], messages[-1]
    if not prefix:
        return messages
    head = dict(prefix[-1])
    content = head.get("content")
    if isinstance(content, str):
        head["content"] = [{"type": "text", "text": content, "cache_control": EPHEMERAL}]
    elif isinstance(content, list) and content and isinstance(content[-1], dict):
        head["content"] = [*content[:-1], {**content[-1], "cache_control": EPHEMERAL}]
    return [*prefix[:-1], head, last]


def openai_usage(answer: Any) -> Usage | None:
    """``usage.prompt_tokens`` and ``usage.prompt_tokens_details.cached_tokens``."""
    usage = answer.get("usage") if isinstance(answer, dict) else None
    if not isinstance(usage, dict):
        return None
    details = usage.get("prompt_tokens_details")
    cached = details.get("cached_tokens") if isinstance(details, dict) else None
    return Usage(_count(usage.get("prompt_tokens")), _count(cached))


def anthropic_usage(answer: Any) -> Usage | None:
    """``usage.input_tokens`` plus the cache's read and written tokens (counted apart)."""
    usage = answer.get("usage") if isinstance(answer, dict) else None
    if not isinstance(usage, dict):
        return None
    read = _count(usage.get("cache_read_input_tokens"))
    written = _count(usage.get("cache_creation_input_tokens"))
    return Usage(_count(usage.get("input_tokens")) + read + written, read, written)


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0
