"""Opaque parts of posted canonical messages that hold a known shape: refused, not dropped."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from app.domain.errors import Path
from app.domain.formats._foreign import ANTHROPIC_BLOCKS, CHAT_PARTS, OPENAI_PARTS, RESPONSES_PARTS
from app.domain.formats.targets import MODELLED_TYPES, opaque_type
from app.domain.messages import Message, OpaquePart, ToolResultPart


def opaque_problems(messages: Sequence[Message]) -> list[tuple[Path, str]]:
    """Opaque parts of posted canonical messages that hold a shape ctxc models (a ``tool_use``
    kept opaque would answer nothing) or another provider's block: located at ``data.type``."""
    problems: list[tuple[Path, str]] = []
    for i, message in enumerate(messages):
        for j, part in enumerate(message.content):
            places: list[tuple[Path, object]] = [((i, "content", j), part)]
            if isinstance(part, ToolResultPart) and isinstance(part.content, tuple):
                places += [((i, "content", j, "content", k), x) for k, x in enumerate(part.content)]
            for path, item in places:
                why = _opaque_problem(item) if isinstance(item, OpaquePart) else None
                if why is not None:
                    problems.append(((*path, "data", "type"), why))
    return problems


def _opaque_problem(part: OpaquePart) -> str | None:
    kind = part.data.get("type")
    if part.provider == "gemini":
        if "type" in part.data:  # Gemini refuses a field it does not know
            return 'a Gemini part has no "type": give it the provider its type belongs to'
        kind = opaque_type(part)
    if not isinstance(kind, str):
        return None
    if kind in MODELLED_TYPES[part.provider]:
        return (
            f"ctxc models {part.provider} {kind!r} blocks: send it as a canonical part, or the "
            f'message with "format": "{part.provider}"'
        )
    owner = next((name for name, kinds in _OTHERS.get(part.provider, ()) if kind in kinds), None)
    if owner is not None:
        return f'type {kind!r} is not an {part.provider} block: give it "provider": "{owner}"'
    return None


# Per provider: the other providers' block types that it never has.
_OTHERS: Final[dict[str, tuple[tuple[str, frozenset[str]], ...]]] = {
    "openai": (("anthropic", ANTHROPIC_BLOCKS), ("responses", RESPONSES_PARTS)),
    "anthropic": (("openai", OPENAI_PARTS), ("responses", RESPONSES_PARTS)),
    "responses": (("anthropic", ANTHROPIC_BLOCKS), ("openai", CHAT_PARTS)),
}
