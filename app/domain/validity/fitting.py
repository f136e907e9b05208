"""The first repair: fit each message's parts, name and hints to what the target accepts."""

from __future__ import annotations

import re
from typing import Any, Final

from app.domain.formats.targets import Target
from app.domain.memo import per_value
from app.domain.messages import (
    Message,
    Part,
    ReasoningPart,
    ResultItem,
    Role,
    TextPart,
    ToolResultPart,
    provider_meta,
    with_provider_meta,
)
from app.domain.validity.targets import OPENAI_NAME, carried, describe, fits, is_blank, item_fits

# Anthropic refuses an error result without content; this is what it is given instead.
NO_OUTPUT: Final = "(no output)"

_NAME_CHAR: Final = re.compile(r"[^A-Za-z0-9_-]")


def fit_message(index: int, message: Message, target: Target, warnings: list[str]) -> Message:
    """``message`` with what ``target`` cannot accept removed or adjusted, one warning each."""
    if fits_as_is(message, target):
        return message
    return _fitted(index, message, target, warnings)


@per_value
def fits_as_is(message: Message, target: Target) -> bool:
    """Whether ``target`` takes ``message`` as it is, without a warning."""
    warnings: list[str] = []
    return _fitted(0, message, target, warnings) is message and not warnings


def _fitted(index: int, message: Message, target: Target, warnings: list[str]) -> Message:
    update: dict[str, Any] = {}
    parts = [
        fitted
        for part in message.content
        if (fitted := _fit_part(index, part, message.role, target, warnings)) is not None
    ]
    if tuple(parts) != message.content:
        update["content"] = tuple(parts)
    if target == "openai":
        update |= _openai_fields(index, message, warnings)
    return message.model_copy(update=update) if update else message


def _fit_part(
    index: int, part: Part, role: Role, target: Target, warnings: list[str]
) -> Part | None:
    if not carried(part, target):
        return part
    if not fits(part, role, target):
        warnings.append(
            f"dropped {describe(part)} from {role} message {index}: {target} does not accept it"
            " there"
        )
        return None
    # Anthropic refuses empty and whitespace-only text blocks; OpenAI takes them, but a blank
    # message tells the model nothing: both leave it out (a message left empty is dropped).
    if isinstance(part, TextPart) and is_blank(part.text):
        warnings.append(f"dropped blank text part (message {index})")
        return None
    if target == "gemini" and isinstance(part, ReasoningPart) and _empty_thought(part):
        warnings.append(f"dropped empty reasoning (message {index})")
        return None
    if isinstance(part, ToolResultPart):
        return _fit_result(index, part, target, warnings)
    return part


def _empty_thought(part: ReasoningPart) -> bool:
    # Gemini refuses an empty text part; a signed one is what it answers itself.
    return not part.text and part.signature is None


def _fit_result(
    index: int, part: ToolResultPart, target: Target, warnings: list[str]
) -> ToolResultPart:
    content = part.content
    if isinstance(content, tuple):
        content = tuple(item for item in content if _keep_item(index, part, item, target, warnings))
    fitted = part if content == part.content else part.model_copy(update={"content": content})
    if target == "anthropic" and _empty_for_anthropic(fitted):
        return _empty_anthropic_result(index, fitted, warnings)
    return fitted


def _keep_item(
    index: int, part: ToolResultPart, item: ResultItem, target: Target, warnings: list[str]
) -> bool:
    where = f"{describe(part)} (message {index})"
    if not carried(item, target):
        return True
    if not item_fits(item, target, part.is_error):
        warnings.append(f"dropped {describe(item)} from {where}: {target} does not accept it")
        return False
    if isinstance(item, TextPart) and target == "anthropic" and is_blank(item.text):
        warnings.append(f"dropped blank text from {where}")
        return False
    return True


def _empty_for_anthropic(part: ToolResultPart) -> bool:
    if isinstance(part.content, str):
        return is_blank(part.content)
    return not any(carried(item, "anthropic") for item in part.content)


def _empty_anthropic_result(
    index: int, part: ToolResultPart, warnings: list[str]
) -> ToolResultPart:
    """Anthropic refuses blank result content: leave it out, or give an error result a text."""
    where = f"{describe(part)} (message {index})"
    if part.is_error:
        warnings.append(f"gave the empty error {where} the text {NO_OUTPUT!r}")
        return part.model_copy(update={"content": NO_OUTPUT})
    if isinstance(part.content, str) and part.content:
        warnings.append(f"removed the blank content of {where}")
    hint = provider_meta(part.metadata, "anthropic") | {"content": "absent"}
    metadata = with_provider_meta(part.metadata, "anthropic", hint)
    return part.model_copy(update={"content": "", "metadata": metadata})


def _openai_fields(index: int, message: Message, warnings: list[str]) -> dict[str, Any]:
    update: dict[str, Any] = {}
    name = message.name
    if name is not None and not OPENAI_NAME.fullmatch(name):
        safe = _NAME_CHAR.sub("_", name)[:64] or None
        update["name"] = safe
        done = f"changed name {name!r} to {safe!r}" if safe else "dropped the empty name"
        warnings.append(f"{done} (message {index}): OpenAI names are 1-64 of A-Z a-z 0-9 _ -")
    hint = provider_meta(message.metadata, "openai")
    if message.role == "tool" and hint.get("role") == "function":
        # A legacy function message carries no tool_call_id; a tool message pairs with its call.
        rest = {key: value for key, value in hint.items() if key != "role"}
        update["metadata"] = with_provider_meta(message.metadata, "openai", rest)
    return update
