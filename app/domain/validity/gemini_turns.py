"""Gemini request shape from repaired canonical messages: the system instruction moved out,
same-role turns merged, every function call turn answered by the very next turn."""

from __future__ import annotations

from dataclasses import dataclass, field

from app.domain.formats._common import add_extra
from app.domain.formats._gemini_parts import PROVIDER, has_id, write_part, write_response
from app.domain.formats.gemini import SystemInstruction, system_instruction
from app.domain.messages import (
    JSONObject,
    Message,
    Part,
    ToolCallPart,
    ToolResultPart,
    provider_meta,
)
from app.domain.validity.anthropic_turns import CONTINUATION, CONTINUE_TEXT
from app.domain.validity.repair import Entry
from app.domain.validity.targets import carried


@dataclass
class _Turn:
    sources: list[int]  # input indices of the messages merged into this turn
    role: str
    parts: list[Part]
    results_only: bool = False  # a tool message: merging it is routine, not a repair
    extra: JSONObject = field(default_factory=dict)


def gemini_request(
    entries: list[Entry], warnings: list[str]
) -> tuple[SystemInstruction, list[JSONObject]]:
    """``(systemInstruction, contents)`` for repaired entries, a warning per change of shape."""
    system = _system(entries, warnings)
    turns = [_turn(i, m) for i, m in entries if m.role != "system"]
    turns = _merge(turns, warnings)
    turns = _answered(turns, warnings)
    if turns and turns[0].role != "user":
        turns.insert(0, _Turn([], "user", list(CONTINUATION.content)))
        warnings.append(
            f"inserted a user turn {CONTINUE_TEXT!r} before the first model turn"
            f" ({_cite(turns[1])})"
        )
    return system, _write(turns)


def _system(entries: list[Entry], warnings: list[str]) -> SystemInstruction:
    first_turn = next((i for i, m in entries if m.role != "system"), None)
    systems = [(i, m) for i, m in entries if m.role == "system"]
    for i, _ in systems:
        if first_turn is not None and i > first_turn:
            warnings.append(f"moved system message {i} into the system instruction")
    found = system_instruction([m for _, m in systems])
    return {"parts": [{"text": found}]} if isinstance(found, str) else found


def _turn(index: int, message: Message) -> _Turn:
    parts = [p for p in message.content if carried(p, "gemini")]
    role = "model" if message.role == "assistant" else "user"
    only = bool(parts) and all(isinstance(p, ToolResultPart) for p in parts)
    extra = provider_meta(message.metadata, PROVIDER).get("extra")
    return _Turn([index], role, parts, only, dict(extra) if isinstance(extra, dict) else {})


def _merge(turns: list[_Turn], warnings: list[str]) -> list[_Turn]:
    """Consecutive turns of one role become one turn, their parts concatenated."""
    out: list[_Turn] = []
    for turn in turns:
        previous = out[-1] if out else None
        if previous is None or previous.role != turn.role:
            out.append(turn)
            continue
        if not (previous.results_only or turn.results_only):
            warnings.append(
                f"merged consecutive {turn.role} messages {previous.sources[-1]} and"
                f" {turn.sources[0]} into one turn"
            )
        previous.parts += turn.parts
        previous.sources += turn.sources
        previous.results_only = turn.results_only
        for key, value in turn.extra.items():  # the first turn's win (no copy: linear)
            previous.extra.setdefault(key, value)
    return out


def _answered(turns: list[_Turn], warnings: list[str]) -> list[_Turn]:
    """The user turn after a function call turn holds exactly its responses, in call order;
    what else it held follows as a user turn of its own (so too for responses to the calls a
    resumed provider session holds, which open the contents)."""
    out: list[_Turn] = []
    for turn in turns:
        calls = [p.id for p in out[-1].parts if isinstance(p, ToolCallPart)] if out else []
        results = [p for p in turn.parts if isinstance(p, ToolResultPart)]
        if turn.role != "user" or not results:
            out.append(turn)
            continue
        order = {cid: n for n, cid in enumerate(calls)}
        ordered = sorted(results, key=lambda p: order.get(p.call_id, len(order)))
        rest: list[Part] = [p for p in turn.parts if not isinstance(p, ToolResultPart)]
        if ordered != results:
            warnings.append(f"put the function responses in call order ({_cite(turn)})")
        out.append(_Turn(turn.sources, "user", list(ordered), True, turn.extra))
        if rest:
            warnings.append(
                f"moved what accompanies the function responses into a user turn after them"
                f" ({_cite(turn)})"
            )
            out.append(_Turn(turn.sources, "user", rest))
    return out


def _write(turns: list[_Turn]) -> list[JSONObject]:
    contents: list[JSONObject] = []
    calls: dict[str, ToolCallPart] = {}
    for turn in turns:
        parts = []
        for part in turn.parts:
            written = (
                _response(part, calls) if isinstance(part, ToolResultPart) else write_part(part)
            )
            if written is not None:
                parts.append(written)
        if turn.role == "model":
            calls = {p.id: p for p in turn.parts if isinstance(p, ToolCallPart)}
        if parts:
            contents.append(add_extra({"role": turn.role, "parts": parts}, turn.extra))
    return contents


def _response(part: ToolResultPart, calls: dict[str, ToolCallPart]) -> JSONObject:
    """The response part, named (and given an id) as the call it answers."""
    hint = provider_meta(part.metadata, PROVIDER)
    call = calls.get(part.call_id)
    if call is not None:
        found = write_response(part, call.name, has_id(call))
    else:  # a call the provider already holds
        name = hint.get("name")
        named = name if isinstance(name, str) else part.call_id
        found = write_response(part, named, hint.get("id") != "absent")
    return add_extra({"functionResponse": found}, hint.get("extra"))


def _cite(turn: _Turn) -> str:
    many = len(turn.sources) > 1
    return ("messages " if many else "message ") + ", ".join(str(i) for i in turn.sources)
