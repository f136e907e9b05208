"""Another format's shapes, recognised where they do not belong.

A part or field that is a known shape of another format (an Anthropic ``tool_use`` block in an
OpenAI message, an OpenAI ``image_url`` part in an Anthropic turn, a canonical ``tool_call``
part in either) would be kept opaque and then dropped from every compile. It is refused instead,
naming the format to send. Types known to no format (a provider's newer block) stay opaque.
"""

from __future__ import annotations

from typing import Final, Literal

from app.domain.messages import JSONObject

Shape = Literal["openai", "anthropic", "gemini", "responses", "canonical"]

# Anthropic Messages content blocks (request side) that are not OpenAI content parts.
ANTHROPIC_BLOCKS: Final = frozenset(
    {
        "image",
        "document",
        "search_result",
        "tool_use",
        "tool_result",
        "thinking",
        "redacted_thinking",
        "server_tool_use",
        "web_search_tool_result",
        "web_fetch_tool_result",
        "code_execution_tool_result",
        "bash_code_execution_tool_result",
        "text_editor_code_execution_tool_result",
        "mcp_tool_use",
        "mcp_tool_result",
        "container_upload",
    }
)
# OpenAI Chat Completions content parts and tool call shapes that are not Anthropic blocks.
OPENAI_PARTS: Final = frozenset({"image_url", "input_audio", "file", "refusal", "function"})
# OpenAI Responses content parts that neither Chat Completions nor Anthropic has.
RESPONSES_PARTS: Final = frozenset(
    {"input_text", "output_text", "input_image", "input_file", "summary_text", "reasoning_text"}
)
# Chat Completions content parts that a Responses message never holds.
CHAT_PARTS: Final = frozenset({"text", "image_url", "file", "function"})
# Responses input items that are not messages (a message of another format has a role).
RESPONSES_ITEMS: Final = frozenset(
    {"message", "function_call", "function_call_output", "reasoning", "item_reference"}
)
RESPONSES: Final[tuple[Shape, frozenset[str]]] = ("responses", RESPONSES_PARTS)
# Canonical part types that no provider format has.
CANONICAL_ONLY: Final = frozenset({"tool_call", "reasoning", "opaque"})
# Fields of an OpenAI message that an Anthropic turn never has.
OPENAI_MESSAGE_FIELDS: Final = ("tool_calls", "tool_call_id", "function_call")
OPENAI_ONLY_ROLES: Final = frozenset({"tool", "function", "developer", "system"})

_LOOKS: Final[dict[Shape, str]] = {
    "openai": 'looks like OpenAI; send "format": "openai"',
    "anthropic": 'looks like Anthropic; send "format": "anthropic"',
    "gemini": 'looks like Gemini; send "format": "gemini"',
    "responses": 'looks like OpenAI Responses; send "format": "responses"',
    "canonical": 'looks like a canonical part; send "format": "canonical"',
}


def advice(shape: Shape) -> str:
    """What to send instead of a part of ``shape``."""
    return _LOOKS[shape]


def foreign_in_openai(kind: str, part: JSONObject) -> Shape | None:
    """The format an OpenAI content part of type ``kind`` really belongs to, if another."""
    return _canonical(kind, part) or _among(kind, ("anthropic", ANTHROPIC_BLOCKS), RESPONSES)


def foreign_in_anthropic(kind: str, block: JSONObject) -> Shape | None:
    """The format an Anthropic content block of type ``kind`` really belongs to, if another."""
    return _canonical(kind, block) or _among(kind, ("openai", OPENAI_PARTS), RESPONSES)


def foreign_in_responses(kind: str, part: JSONObject) -> Shape | None:
    """The format a Responses content part of type ``kind`` really belongs to, if another."""
    return _canonical(kind, part) or _among(
        kind, ("anthropic", ANTHROPIC_BLOCKS), ("openai", CHAT_PARTS)
    )


def _among(kind: str, *owners: tuple[Shape, frozenset[str]]) -> Shape | None:
    return next((shape for shape, kinds in owners if kind in kinds), None)


def _canonical(kind: str, part: JSONObject) -> Shape | None:
    """ "canonical" for a part in ctxc's own shape (a type or fields only it has)."""
    if kind in CANONICAL_ONLY:
        return "canonical"
    if kind == "image" and "source" not in part and ("url" in part or "data" in part):
        return "canonical"
    if kind == "tool_result" and "call_id" in part and "tool_use_id" not in part:
        return "canonical"
    return None


def part_message(
    kind: str, shape: Shape, where: Literal["openai", "anthropic", "responses"]
) -> str:
    """The refusal of a part of type ``kind`` that belongs to ``shape``, found in ``where``."""
    names = {
        "openai": "an OpenAI content part",
        "anthropic": "an Anthropic content block",
        "responses": "an OpenAI Responses content part",
    }
    return f"type {kind!r} is not {names[where]}: this {advice(shape)}"
