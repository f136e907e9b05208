"""The structural rules Anthropic Messages enforces on a request's ``system`` and ``messages``."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Final

from app.domain.validity.breakpoints import breakpoint_problems
from app.domain.validity.targets import ANTHROPIC_ID, is_blank

THINKING: Final = ("thinking", "redacted_thinking")
# Blocks each role may not hold.
_NOT_IN: Final[dict[str, tuple[str, ...]]] = {
    "user": ("tool_use", *THINKING),
    "assistant": ("tool_result", "image"),
}


def anthropic_problems(
    system: Any, messages: list[Any], prior_call_ids: frozenset[str] = frozenset()
) -> list[str]:
    """Every rule of the Messages API that ``system`` and ``messages`` break, naming the index.

    ``prior_call_ids``: tool_use ids the provider already holds (a resumed session's delta may
    open with their results).
    """
    problems = _system_problems(system) + breakpoint_problems(system, messages)
    if not messages:
        problems.append("no messages: the API needs at least one")
    state = _State(prior=list(prior_call_ids))
    for i, turn in enumerate(messages):
        problems += state.step(i, turn)
    problems += state.finish()
    if messages and isinstance(messages[-1], dict) and messages[-1].get("role") == "assistant":
        problems += _prefill_problems(len(messages) - 1, messages[-1])
    return problems


def _system_problems(system: Any) -> list[str]:
    if system is None:
        return []
    if isinstance(system, str):
        return ["system: blank system prompt"] if is_blank(system) else []
    if not isinstance(system, list):
        return ["system: must be a string or a list of text blocks"]
    problems = []
    for j, block in enumerate(system):
        if not isinstance(block, dict) or block.get("type") != "text":
            problems.append(f"system block {j}: the system prompt holds text blocks only")
        elif (p := _text(block)) is not None:
            problems.append(f"system block {j}: {p}")
    return problems


def _text(block: dict[str, Any]) -> str | None:
    text = block.get("text")
    if not isinstance(text, str):
        return "a text block needs a string text"
    return "empty or whitespace-only text block" if is_blank(text) else None


def blocks_of(turn: dict[str, Any]) -> list[Any] | None:
    """The turn's content as a block list (a string is one text block); None when malformed."""
    content = turn.get("content")
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return content if isinstance(content, list) else None


@dataclass
class _State:
    """Walks the turns: roles alternate from a user turn, tool_use ids pair with tool_results."""

    previous_role: Any = None
    pending: list[str] = field(default_factory=list)  # tool_use ids of the previous turn
    pending_owner: int = 0
    tool_use_ids: set[str] = field(default_factory=set)
    prior: list[str] = field(default_factory=list)  # answerable by the first turn only

    def step(self, index: int, turn: Any) -> list[str]:
        """The problems of one turn, and of the turn before when this one leaves calls open."""
        if not isinstance(turn, dict):
            return [f"message {index}: not an object", *self.finish()]
        role = turn.get("role")
        if role == "system" and index > 0:
            return [f"message {index}: {p}" for p in self._system_turn(turn)]
        problems = self._role_problems(index, role)
        blocks = blocks_of(turn)
        if not blocks:
            problems.append("empty content" if blocks == [] else "content must be text or blocks")
            blocks = []
        problems += [f"block {j}: {p}" for j, b in enumerate(blocks) if (p := self._block(role, b))]
        problems += _order_problems(role, blocks)
        problems += self._answers(blocks)
        self.previous_role = role
        return [f"message {index}: {p}" for p in problems] + self._advance(index, role, blocks)

    def _system_turn(self, turn: dict[str, Any]) -> list[str]:
        """A system message between turns (Claude Code's mid-conversation system messages): text
        only; it separates the turns around it (they need not alternate across it), and the
        calls of the turn before it stay open for the turn after it."""
        self.previous_role = "system"
        blocks = blocks_of(turn)
        if not blocks:
            return ["empty content" if blocks == [] else "content must be text or blocks"]
        found = [
            (j, _text(b) if _is(b, "text") else "a system message holds text blocks only")
            for j, b in enumerate(blocks)
        ]
        return [f"block {j}: {p}" for j, p in found if p is not None]

    def _role_problems(self, index: int, role: Any) -> list[str]:
        if role not in ("user", "assistant"):
            return [f"role must be 'user' or 'assistant', not {role!r}"]
        if index == 0 and role != "user":
            return ["the first turn must be a user turn"]
        if role == self.previous_role:
            return [f"a second {role} turn in a row"]
        return []

    def _block(self, role: Any, block: Any) -> str | None:
        if not isinstance(block, dict) or not isinstance(block.get("type"), str):
            return "not a block object with a string type"
        kind = block["type"]
        if kind in _NOT_IN.get(role, ()):
            return f"{'an' if role == 'assistant' else 'a'} {role} turn cannot hold a {kind} block"
        if kind == "text":
            return _text(block)
        if kind == "tool_use":
            return self._tool_use(block)
        if kind == "tool_result":
            return _tool_result(block)
        return None

    def _tool_use(self, block: dict[str, Any]) -> str | None:
        call_id = block.get("id")
        if not isinstance(call_id, str) or not ANTHROPIC_ID.fullmatch(call_id):
            return f"tool_use id {call_id!r} is not made of A-Z a-z 0-9 _ -"
        if call_id in self.tool_use_ids:
            return f"tool_use id {call_id!r} is used twice in the request"
        self.tool_use_ids.add(call_id)
        if not isinstance(block.get("name"), str) or not isinstance(block.get("input"), dict):
            return "a tool_use block needs a string name and an object input"
        return None

    def _answers(self, blocks: list[Any]) -> list[str]:
        results = [b.get("tool_use_id") for b in blocks if _is(b, "tool_result")]
        answerable, self.prior = self.pending + self.prior, []
        problems = [
            f"tool_result for {cid!r} answers no tool_use of the turn before"
            for cid in results
            if cid not in answerable
        ]
        twice = {repr(cid) for cid in results if results.count(cid) > 1}
        problems += [f"tool_result for {cid} appears twice" for cid in sorted(twice)]
        self.pending = [cid for cid in self.pending if cid not in results]
        return problems

    def _advance(self, index: int, role: Any, blocks: list[Any]) -> list[str]:
        problems = self.finish()
        if role == "assistant":
            self.pending = [b.get("id") for b in blocks if _is(b, "tool_use")]
            self.pending_owner = index
        return problems

    def finish(self) -> list[str]:
        """The previous turn's tool_use ids that got no tool_result, as a problem of that turn."""
        missing, self.pending = self.pending, []
        if not missing:
            return []
        return [
            f"message {self.pending_owner}: tool_use {missing!r} without a tool_result in the"
            " next turn"
        ]


def _tool_result(block: dict[str, Any]) -> str | None:
    if not isinstance(block.get("tool_use_id"), str):
        return "a tool_result needs a string tool_use_id"
    content = block.get("content")
    if isinstance(content, str) and is_blank(content):
        return "tool_result content is blank (leave it out instead)"
    items = [{"type": "text", "text": content}] if isinstance(content, str) else content
    if "content" in block and not isinstance(items, list):
        return "tool_result content must be a string or a list of blocks"
    if "content" in block and not items:
        return "tool_result content is empty (leave it out instead)"
    for item in items or []:
        if not isinstance(item, dict) or not isinstance(item.get("type"), str):
            return "tool_result content holds a non-block"
        if item["type"] == "text" and (p := _text(item)) is not None:
            return f"tool_result content: {p}"
    if block.get("is_error") is True and (
        not items or any(item["type"] != "text" for item in items)
    ):
        return "an error tool_result needs content, all of it text"
    return None


def _order_problems(role: Any, blocks: list[Any]) -> list[str]:
    """User turns hold tool results first; assistant turns hold thinking first."""
    first = ("tool_result",) if role == "user" else THINKING if role == "assistant" else ()
    kinds = [b.get("type") if isinstance(b, dict) else None for b in blocks]
    late = [
        j
        for j, kind in enumerate(kinds)
        if kind in first and any(k not in first for k in kinds[:j])
    ]
    what = "tool_result" if role == "user" else "thinking"
    return [f"block {j}: a {what} block after another kind of block" for j in late]


def _prefill_problems(index: int, turn: dict[str, Any]) -> list[str]:
    blocks = blocks_of(turn)
    last: Any = blocks[-1] if blocks else None
    text = last.get("text") if _is(last, "text") else None
    if isinstance(text, str) and text != text.rstrip():
        return [f"message {index}: a final assistant turn cannot end with whitespace"]
    return []


def _is(block: Any, kind: str) -> bool:
    return isinstance(block, dict) and block.get("type") == kind
