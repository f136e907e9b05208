"""Anthropic request shape from repaired canonical messages: system moved out, turns merged and
ordered the way the Messages API requires."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Final

from app.domain.formats.anthropic import System, anthropic_message, in_messages, to_anthropic
from app.domain.memo import per_value
from app.domain.messages import JSONObject, Message, TextPart, ToolResultPart
from app.domain.validity.anthropic_rules import THINKING, blocks_of
from app.domain.validity.breakpoints import limit_breakpoints
from app.domain.validity.repair import Entry
from app.domain.validity.targets import carried

CONTINUE_TEXT: Final = "(continuing the conversation)"
# The user turn put first when the conversation would open with the assistant.
CONTINUATION: Final = Message(role="user", content=(TextPart(text=CONTINUE_TEXT),))


def opens_with_assistant(messages: Iterable[Message]) -> bool:
    """Whether the first turn (system messages aside) is the assistant's: Anthropic's shape
    then puts ``CONTINUATION`` first."""
    first = next((m for m in messages if m.role != "system"), None)
    return first is not None and first.role == "assistant"


@dataclass
class _Turn:
    sources: list[int]  # input indices of the messages merged into this turn
    body: JSONObject
    results_only: bool  # the usual shape of a tool message: merging it is routine, not a repair


def anthropic_request(entries: list[Entry], warnings: list[str]) -> tuple[System, list[JSONObject]]:
    """``(system, messages)`` for repaired entries, adding a warning per change of shape."""
    system = _system(entries, warnings)
    turns = [
        _Turn([i], dict(_kept_turn(m, "anthropic")), _results_only(m))
        for i, m in entries
        if m.role != "system" or in_messages(m)
    ]
    turns = _merge(turns, warnings)
    for turn in turns:
        _order(turn, warnings)
    _user_first(turns, warnings)
    _trim_final(turns, warnings)
    return limit_breakpoints(system, [turn.body for turn in turns], warnings)


@per_value
def _kept_turn(message: Message, _: str) -> JSONObject:
    """A repaired message's turn, made once while it lives (a session's stored messages come
    back as the same objects every compile). Each compile takes its own copy of it, whose keys
    the steps below replace (they never change what the turn's values hold)."""
    return anthropic_message(message)


def _system(entries: list[Entry], warnings: list[str]) -> System:
    first_turn = next((i for i, m in entries if m.role != "system"), None)
    systems = [(i, m) for i, m in entries if m.role == "system" and not in_messages(m)]
    for i, _ in systems:
        if first_turn is not None and i > first_turn:
            warnings.append(f"moved system message {i} into the system prompt")
    system, _ = to_anthropic([m for _, m in systems])
    return system


def _results_only(message: Message) -> bool:
    sent = [p for p in message.content if carried(p, "anthropic")]
    return bool(sent) and all(isinstance(p, ToolResultPart) for p in sent)


def _merge(turns: list[_Turn], warnings: list[str]) -> list[_Turn]:
    """Consecutive turns of one role become one turn, their blocks concatenated."""
    out: list[_Turn] = []
    for turn in turns:
        previous = out[-1] if out else None
        # A system turn between turns stays apart: never merged into the turns around it.
        role = turn.body["role"]
        if previous is None or role == "system" or previous.body["role"] != role:
            out.append(turn)
            continue
        if not (previous.results_only or turn.results_only):
            warnings.append(
                f"merged consecutive {turn.body['role']} messages {previous.sources[-1]} and"
                f" {turn.sources[0]} into one turn"
            )
        previous.body = _joined(previous.body, turn.body)
        previous.sources += turn.sources
        previous.results_only = turn.results_only
    return out


def _joined(first: JSONObject, second: JSONObject) -> JSONObject:
    out = dict(first)
    out["content"] = _blocks(first) + _blocks(second)
    for key, value in second.items():
        out.setdefault(key, value)
    return out


def _blocks(turn: JSONObject) -> list[Any]:
    return list(blocks_of(turn) or [])


def _order(turn: _Turn, warnings: list[str]) -> None:
    """Tool results first in a user turn, thinking first in an assistant turn (stable)."""
    role = turn.body["role"]
    if role == "system":
        return
    first, what = (("tool_result",), "tool results") if role == "user" else (THINKING, "thinking")
    blocks = turn.body["content"]
    if not isinstance(blocks, list):
        return
    ordered = [b for b in blocks if b.get("type") in first] + [
        b for b in blocks if b.get("type") not in first
    ]
    if ordered != blocks:
        turn.body["content"] = ordered
        warnings.append(f"moved {what} to the start of the {role} turn ({_cite(turn)})")


def _user_first(turns: list[_Turn], warnings: list[str]) -> None:
    if turns and turns[0].body["role"] != "user":
        turns.insert(0, _Turn([], {"role": "user", "content": CONTINUE_TEXT}, False))
        warnings.append(
            f"inserted a user turn {CONTINUE_TEXT!r} before the first assistant turn"
            f" ({_cite(turns[1])})"
        )


def _trim_final(turns: list[_Turn], warnings: list[str]) -> None:
    """A final assistant turn is a prefill, and Anthropic refuses one ending in whitespace."""
    if not turns or turns[-1].body["role"] != "assistant":
        return
    body = turns[-1].body
    content = body["content"]
    trimmed: Any
    if isinstance(content, str):
        trimmed = content.rstrip()
    elif content and content[-1].get("type") == "text" and isinstance(content[-1].get("text"), str):
        trimmed = [*content[:-1], {**content[-1], "text": content[-1]["text"].rstrip()}]
    else:
        return
    if trimmed != content:
        body["content"] = trimmed
        warnings.append(
            f"removed trailing whitespace from the final assistant turn ({_cite(turns[-1])})"
        )


def _cite(turn: _Turn) -> str:
    many = len(turn.sources) > 1
    return ("messages " if many else "message ") + ", ".join(str(i) for i in turn.sources)
