"""``render``: repaired canonical messages in the exact request shape of the target provider."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from app.domain.formats.anthropic import System as AnthropicSystem
from app.domain.formats.openai import openai_messages
from app.domain.formats.targets import Target
from app.domain.memo import per_value
from app.domain.messages import JSONObject, Message
from app.domain.validity.anthropic_turns import anthropic_request
from app.domain.validity.gemini_turns import gemini_request
from app.domain.validity.repair import Entry, repair
from app.domain.validity.responses_items import responses_request

# The request's system prompt beside its messages: Anthropic's `system`, Gemini's
# `systemInstruction` object (None for OpenAI, whose system messages stay in the list).
System = AnthropicSystem | JSONObject


def render(
    messages: Sequence[Message],
    target: Target,
    *,
    prior_call_ids: frozenset[str] = frozenset(),
) -> tuple[System, list[JSONObject], list[str]]:
    """``(system, messages, warnings)`` for ``target``: repaired, converted and shape-fixed.

    ``system`` is always None for OpenAI (system messages stay in the list); for Gemini it is
    the ``systemInstruction`` object; for Responses it is the ``instructions`` (and the list the
    ``input`` items). The list is empty
    only when nothing could be sent; the compile step refuses to send an empty list.
    """
    entries, warnings = repair(messages, target, prior_call_ids)
    system, out = shape(entries, target, warnings)
    return system, out, warnings


def shape(
    entries: list[Entry], target: Target, warnings: list[str]
) -> tuple[System, list[JSONObject]]:
    """The provider request for already repaired entries (``repair``'s output)."""
    if target == "anthropic":
        return anthropic_request(entries, warnings)
    if target == "gemini":
        return gemini_request(entries, warnings)
    if target == "responses":
        return responses_request(entries, warnings)
    return None, [dict(out) for _, m in entries for out in _openai_shaped(m, target)]


@per_value
def _openai_shaped(message: Message, _: Target) -> tuple[JSONObject, ...]:
    """The Chat Completions messages of one repaired message, made once while it lives (a
    session's stored messages come back as the same objects every compile): each compile gets
    its own copies of them."""
    return tuple(_tidy(out) for out in openai_messages(message))


def _tidy(message: JSONObject) -> JSONObject:
    """Representation fixes the converter's faithful round trip leaves in (no content changes)."""
    out = dict(message)
    role = out.get("role")
    if role == "assistant" and out.get("content") == []:
        out["content"] = None  # all its parts were dropped; its tool calls remain
    if role == "tool" and out.get("content") in (None, []):
        out["content"] = ""  # a tool message needs content; an empty result has none
    if out.get("tool_calls") == []:
        del out["tool_calls"]  # OpenAI refuses an empty tool_calls list
    if isinstance(out.get("tool_calls"), list):
        out["tool_calls"] = [_typed(call) for call in out["tool_calls"]]
    return out


def _typed(call: Any) -> Any:
    # A call recorded without its type is written back without it; the API requires one.
    if isinstance(call, dict) and "type" not in call and "function" in call:
        return {"id": call.get("id"), "type": "function", **call}
    return call
