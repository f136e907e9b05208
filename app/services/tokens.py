"""Counting a posted request (nothing stored)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from app.domain.formats.convert import Format, parse_messages
from app.domain.providers import get_profile
from app.domain.tokens import REPLY_PRIMING, TokenCounter, count_messages, request_total

ESTIMATE_NOTE = "{provider}'s tokenizer is not public: counts are {encoding} estimates"


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
    per_message = count_messages(parse_messages(fmt, raw_messages, system), enc)
    # Tool schemas are rendered by the provider in an unpublished way: counted as their JSON.
    tool_tokens = enc.count(json.dumps(tools, ensure_ascii=False)) if tools else 0
    exact = profile.exact and encoding in (None, profile.encoding)
    note = None if exact else ESTIMATE_NOTE.format(provider=profile.name, encoding=enc.name)
    total = request_total(per_message) + tool_tokens
    return RequestCount(profile.name, enc.name, exact, note, per_message, tool_tokens, total)
