"""Counting a posted request (nothing stored)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from app.domain.formats.convert import Format, parse_messages
from app.domain.models import Catalog
from app.domain.providers import estimate_note
from app.domain.tokens import REPLY_PRIMING, TokenCounter, count_messages, request_total


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
    catalog: Catalog,
) -> RequestCount:
    """Per-message and total tokens of a request for a provider (or an explicit encoding)."""
    profile = catalog.resolve(provider)
    enc = counter.encoder(encoding or profile.encoding)
    messages = parse_messages(fmt, raw_messages, system)
    per_message = count_messages(messages, enc)
    # Tool schemas are rendered by the provider in an unpublished way: counted as their JSON.
    tool_tokens = enc.count(json.dumps(tools, ensure_ascii=False)) if tools else 0
    note = estimate_note(profile, enc.name, messages, bool(tools))
    total = request_total(per_message) + tool_tokens
    return RequestCount(profile.name, enc.name, note is None, note, per_message, tool_tokens, total)
