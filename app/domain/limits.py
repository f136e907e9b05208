"""Input limits: what both databases can store exactly, checked before anything is written."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from app.domain.errors import Path
from app.domain.messages import (
    ImagePart,
    Message,
    OpaquePart,
    ReasoningPart,
    TextPart,
    ToolCallPart,
    ToolResultPart,
)

MAX_DEPTH = 64
MAX_ID_CHARS = 512
MAX_NAME_CHARS = 256

Problem = tuple[Path, str]

# Parts a role may not hold: messy histories are stored as they come, but a tool call outside an
# assistant turn or a result inside one has no place in any provider's shape and would be lost.
FORBIDDEN_PARTS: dict[str, tuple[type, ...]] = {
    "system": (ToolCallPart,),
    "user": (ToolCallPart,),
    "assistant": (ToolResultPart,),
    "tool": (TextPart, ImagePart, ToolCallPart, ReasoningPart, OpaquePart),
}


def _text_problem(value: str) -> str | None:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return "contains a lone surrogate (not valid Unicode)"
    return None


def json_problems(value: Any) -> list[Problem]:
    """Lone surrogates, non-finite numbers and nesting deeper than MAX_DEPTH, with their paths."""
    problems: list[Problem] = []
    stack: list[tuple[Path, Any]] = [((), value)]
    while stack:
        path, item = stack.pop()
        if len(path) > MAX_DEPTH:
            problems.append((path, f"nested deeper than {MAX_DEPTH} levels"))
        elif isinstance(item, str):
            if (problem := _text_problem(item)) is not None:
                problems.append((path, problem))
        elif isinstance(item, float) and not math.isfinite(item):
            problems.append((path, "numbers must be finite"))
        elif isinstance(item, dict):
            for key, child in item.items():
                if (problem := _text_problem(key)) is not None:
                    problems.append((path, f"a key {problem}"))
                stack.append(((*path, key), child))
        elif isinstance(item, list | tuple):
            stack.extend(((*path, i), child) for i, child in enumerate(item))
    return sorted(problems, key=lambda p: [str(x) for x in p[0]])


def identifier_problem(value: str, limit: int) -> str | None:
    """Why ``value`` cannot serve as a stored identifier (None when it can)."""
    if len(value) > limit:
        return f"longer than {limit} characters"
    if "\x00" in value:
        return "contains a NUL character"
    return None


def message_problems(messages: Sequence[Message]) -> list[Problem]:
    """Per message: parts its role may not hold, and identifiers too long or with NUL."""
    problems: list[Problem] = []
    for i, message in enumerate(messages):
        if message.name is not None and (p := identifier_problem(message.name, MAX_NAME_CHARS)):
            problems.append(((i, "name"), p))
        forbidden = FORBIDDEN_PARTS[message.role]
        for j, part in enumerate(message.content):
            if isinstance(part, forbidden):
                problems.append(
                    ((i, "content", j), f"a {message.role} message cannot hold {part.type}")
                )
            problems += [((i, "content", j, f), p) for f, p in _part_identifiers(part)]
        if message.role == "tool" and not message.content:
            problems.append(((i, "content"), "a tool message needs a tool result"))
    return problems


def _part_identifiers(part: object) -> list[tuple[str, str]]:
    checks: list[tuple[str, str, int]] = []
    if isinstance(part, ToolCallPart):
        checks = [("id", part.id, MAX_ID_CHARS), ("name", part.name, MAX_NAME_CHARS)]
    elif isinstance(part, ToolResultPart):
        checks = [("call_id", part.call_id, MAX_ID_CHARS)]
    return [(field, p) for field, value, limit in checks if (p := identifier_problem(value, limit))]
