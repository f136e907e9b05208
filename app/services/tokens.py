"""Counting a posted request (nothing stored)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from app.domain.formats.convert import Format, parse_messages
from app.domain.messages import TextPart
from app.domain.providers import get_profile
from app.domain.tokens import REPLY_PRIMING, TokenCounter, count_messages, request_total

PRIVATE_TOKENIZER = "{provider}'s tokenizer is not public: counts are {encoding} estimates"
OTHER_ENCODING = "counted with {encoding}, not {provider}'s own {own}"
APPROXIMATE_PARTS = "images, tool calls, tool definitions or opaque blocks are approximate"


@dataclass(frozen=True)
class RequestCount:
    provider: str
    encoding: str
    exact: bool
    note: str | None
    messages: list[int]
    tools: int
    total: int
    reply_priming: int = REPLY_PRIMING


def count_request(
    counter: TokenCounter,
    fmt: Format,
    raw_messages: Any,
    system: Any,
    provider: str,
    encoding: str | None,
    tools: list[dict[str, Any]] | None,
) -> RequestCount:
    """Per-message and total tokens of a request for a provider (or an explicit encoding)."""
    profile = get_profile(provider)
    enc = counter.encoder(encoding or profile.encoding)
    messages = parse_messages(fmt, raw_messages, system)
    per_message = count_messages(messages, enc)
    # Tool schemas are rendered by the provider in an unpublished way: counted as their JSON.
    tool_tokens = enc.count(json.dumps(tools, ensure_ascii=False)) if tools else 0
    notes = []
    if not profile.exact:
        notes.append(PRIVATE_TOKENIZER.format(provider=profile.name, encoding=enc.name))
    elif enc.name != profile.encoding:
        notes.append(
            OTHER_ENCODING.format(encoding=enc.name, provider=profile.name, own=profile.encoding)
        )
    if tools or any(not isinstance(p, TextPart) for m in messages for p in m.content):
        notes.append(APPROXIMATE_PARTS)
    total = request_total(per_message) + tool_tokens
    note = "; ".join(notes) or None
    return RequestCount(profile.name, enc.name, not notes, note, per_message, tool_tokens, total)
