"""The provider shapes ctxc renders (targets), and the block types each models itself."""

from __future__ import annotations

from typing import Final, Literal

from app.domain.formats._gemini_parts import MODELLED as GEMINI_MODELLED
from app.domain.formats._gemini_parts import part_kind
from app.domain.messages import OpaquePart

Target = Literal["openai", "anthropic", "gemini", "responses"]
TARGETS: tuple[Target, ...] = ("openai", "anthropic", "gemini", "responses")

# Opaque blocks of a type ctxc models itself would bypass every check (a hand-made "tool_use"
# block could answer nothing); such blocks are only ever made by hand, never by the converters.
MODELLED_TYPES: Final[dict[str, frozenset[str]]] = {
    "openai": frozenset({"text", "image_url"}),
    "anthropic": frozenset({"text", "tool_use", "tool_result", "thinking", "redacted_thinking"}),
    "gemini": GEMINI_MODELLED,
    "responses": frozenset(
        {
            "input_text",
            "output_text",
            "message",
            "function_call",
            "function_call_output",
            "reasoning",
        }
    ),
}


def opaque_type(part: OpaquePart) -> str | None:
    """The block's ``type`` when it is a string; for Gemini, the part's data field."""
    if part.provider == "gemini":
        return part_kind(part.data)
    kind = part.data.get("type")
    return kind if isinstance(kind, str) else None
