"""What each target provider can carry, and where: the part rules the repairs and render share."""

from __future__ import annotations

import re
from typing import Final

from app.domain.formats._gemini_parts import is_own_thought
from app.domain.formats._responses_kinds import (
    ASSISTANT_CONTENT,
    SENT_INPUT_CONTENT,
    is_item,
    opaque_answer,
)
from app.domain.formats.targets import MODELLED_TYPES, Target, opaque_type
from app.domain.memo import per_value
from app.domain.messages import (
    ImagePart,
    Message,
    OpaquePart,
    Part,
    ReasoningPart,
    ResultItem,
    Role,
    TextPart,
    ToolCallPart,
    ToolResultPart,
    provider_meta,
)

# Anthropic rejects tool_use ids outside this pattern; OpenAI rejects message names outside it.
ANTHROPIC_ID: Final = re.compile(r"[A-Za-z0-9_-]+")
OPENAI_NAME: Final = re.compile(r"[A-Za-z0-9_-]{1,64}")

# Gemini data fields that only the model writes (server-side code execution).
GEMINI_MODEL_ONLY: Final = frozenset({"executableCode", "codeExecutionResult"})

# The part kinds each role may hold in each target's request.
ALLOWED: Final[dict[Target, dict[Role, tuple[type, ...]]]] = {
    "openai": {
        "system": (TextPart,),
        "user": (TextPart, ImagePart, OpaquePart, ToolResultPart),
        "assistant": (TextPart, ToolCallPart, OpaquePart),
        "tool": (ToolResultPart,),
    },
    "anthropic": {
        "system": (TextPart,),
        "user": (TextPart, ImagePart, OpaquePart, ToolResultPart),
        "assistant": (TextPart, ToolCallPart, ReasoningPart, OpaquePart),
        "tool": (ToolResultPart,),
    },
    "gemini": {
        "system": (TextPart,),
        "user": (TextPart, ImagePart, OpaquePart, ToolResultPart),
        "assistant": (TextPart, ImagePart, ToolCallPart, ReasoningPart, OpaquePart),
        "tool": (ToolResultPart,),
    },
    "responses": {
        "system": (TextPart,),
        "user": (TextPart, ImagePart, OpaquePart, ToolResultPart),
        "assistant": (TextPart, ToolCallPart, ReasoningPart, OpaquePart),
        "tool": (ToolResultPart,),
    },
}


def is_blank(text: str) -> bool:
    """Empty or whitespace only."""
    return not text.strip()


def carried(part: Part | ResultItem, target: Target) -> bool:
    """False for what the converters leave out by design: another provider's blocks, and
    reasoning for Chat Completions, or from another provider (a signature only its own provider
    can read; documented cross-provider losses, not repairs): a Responses reasoning item is its
    verbatim item, a Gemini thought carries its signature, Anthropic's is a signed block."""
    if isinstance(part, OpaquePart):
        return part.provider == target
    if isinstance(part, ReasoningPart):
        if "item" in provider_meta(part.metadata, "responses"):
            return target == "responses"
        return target == ("gemini" if is_own_thought(part) else "anthropic")
    return True


def fits(part: Part, role: Role, target: Target) -> bool:
    """Whether ``target`` accepts ``part`` in a message of ``role``."""
    if not isinstance(part, ALLOWED[target][role]):
        return False
    if target == "gemini" and isinstance(part, ImagePart):
        return part.data is not None  # Gemini reads images inline; a URL it cannot fetch
    if isinstance(part, OpaquePart):
        return _opaque_fits(part, role)
    return True


def _opaque_fits(part: OpaquePart, role: Role) -> bool:
    kind = opaque_type(part)
    if kind is None or kind in MODELLED_TYPES[part.provider]:
        return False
    if kind == "refusal" and not isinstance(part.data.get("refusal"), str):
        return False  # the APIs refuse a refusal part without its text (found by a property test)
    if part.provider == "openai":
        # OpenAI assistant content holds text and refusals; a refusal is never user content.
        return (kind == "refusal") == (role == "assistant")
    if part.provider == "gemini":
        return role == "assistant" or kind not in GEMINI_MODEL_ONLY
    if part.provider == "responses":
        # Whole items go anywhere in the list; content parts are those their message's role
        # takes (the API refuses any other type).
        if is_item(part):
            return True
        return kind in (ASSISTANT_CONTENT if role == "assistant" else SENT_INPUT_CONTENT)
    return not (role == "assistant" and kind == "image")


def item_fits(item: ResultItem, target: Target, is_error: bool | None) -> bool:
    """Whether ``target`` accepts ``item`` inside a tool result."""
    if isinstance(item, TextPart):
        return True
    # OpenAI tool messages and Gemini function responses hold text only; Anthropic error
    # results hold text only.
    if target in ("openai", "gemini") or (is_error and target == "anthropic"):
        return False
    if isinstance(item, OpaquePart):
        kind = opaque_type(item)
        if target == "responses":  # a function_call_output list holds input content parts
            return kind in ("input_image", "input_file")
        return kind is not None and kind not in MODELLED_TYPES[item.provider]
    return True


@per_value
def sendable(message: Message, target: Target) -> bool:
    """Whether anything of ``message`` reaches ``target`` (parts already fitted to its role)."""
    return any(carried(part, target) for part in message.content)


def has_content_besides_results(message: Message, target: Target) -> bool:
    """Whether ``message`` reaches ``target`` with more than tool results."""
    return any(
        carried(part, target) and not isinstance(part, ToolResultPart) and not opaque_answer(part)
        for part in message.content
    )


def describe(part: Part | ResultItem) -> str:
    """A short human name for a part, for warnings."""
    if isinstance(part, ToolResultPart):
        return f"tool result for call {part.call_id!r}"
    if isinstance(part, ToolCallPart):
        return f"tool call {part.id!r}"
    if isinstance(part, OpaquePart):
        kind = opaque_type(part)
        return f"{part.provider} block of type {kind!r}" if kind else f"{part.provider} block"
    return {"text": "text", "image": "image", "reasoning": "reasoning"}[part.type]
