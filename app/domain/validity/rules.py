"""The validator of each target's request shape, by target (tests run it on every output)."""

from __future__ import annotations

from typing import Any

from app.domain.formats.targets import Target
from app.domain.validity.anthropic_rules import anthropic_problems
from app.domain.validity.gemini_rules import gemini_problems
from app.domain.validity.openai_rules import openai_problems
from app.domain.validity.responses_rules import responses_problems


def request_problems(
    target: Target, system: Any, messages: list[Any], prior_call_ids: frozenset[str] = frozenset()
) -> list[str]:
    """The rules of ``target``'s API that a request breaks: ``system`` is Anthropic's system
    prompt, Gemini's ``systemInstruction`` or Responses' ``instructions`` (None for Chat
    Completions, whose system prompt is a message), ``messages`` its messages, turns, contents
    or input items."""
    if target == "openai":
        problems = [] if system is None else ["Chat Completions has no separate system prompt"]
        return problems + openai_problems(messages, prior_call_ids)
    if target == "anthropic":
        return anthropic_problems(system, messages, prior_call_ids)
    if target == "gemini":
        return gemini_problems(system, messages, prior_call_ids)
    return responses_problems(system, messages, prior_call_ids)
