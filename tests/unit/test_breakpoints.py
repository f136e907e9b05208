"""Anthropic's four prompt-cache breakpoints: the rendered request never holds more."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from app.domain.formats.convert import parse_messages
from app.domain.validity import anthropic_problems
from app.domain.validity.breakpoints import MAX_BREAKPOINTS, breakpoint_problems
from app.domain.validity.shaping import render

MARK = {"type": "ephemeral"}


def _turns(marked: list[bool]) -> list[dict[str, Any]]:
    """A user/assistant conversation whose turn i carries a breakpoint when ``marked[i]``."""
    turns = []
    for i, mark in enumerate(marked):
        block: dict[str, Any] = {"type": "text", "text": f"turn {i}"}
        if mark:
            block["cache_control"] = MARK
        turns.append({"role": "user" if i % 2 == 0 else "assistant", "content": [block]})
    return turns


def _marked(system: Any, messages: list[Any]) -> list[str]:
    blocks = list(system) if isinstance(system, list) else []
    blocks += [b for m in messages if isinstance(m["content"], list) for b in m["content"]]
    return [b.get("text", "") for b in blocks if "cache_control" in b]


def test_a_request_with_five_breakpoints_is_a_problem() -> None:
    assert breakpoint_problems(None, _turns([True] * 5))
    assert not breakpoint_problems(None, _turns([True] * 4))


def test_the_system_prompt_and_the_newest_breakpoints_are_kept() -> None:
    system = [{"type": "text", "text": "rules", "cache_control": MARK}]
    turns = _turns([True] * 7)
    out_system, out, warnings = render(parse_messages("anthropic", turns, system), "anthropic")
    assert _marked(out_system, out) == ["rules", "turn 4", "turn 5", "turn 6"]
    assert any("cache_control" in w for w in warnings)
    assert not anthropic_problems(out_system, out)
    # The input is left as it was.
    assert all("cache_control" in t["content"][0] for t in turns)


@given(st.lists(st.booleans(), min_size=1, max_size=30), st.integers(0, 6))
def test_no_rendered_request_holds_more_than_four(marked: list[bool], in_system: int) -> None:
    system = [{"type": "text", "text": f"s{j}", "cache_control": MARK} for j in range(in_system)]
    messages = parse_messages("anthropic", _turns(marked), system or None)
    out_system, out, _ = render(messages, "anthropic")
    kept = _marked(out_system, out)
    assert len(kept) == min(MAX_BREAKPOINTS, in_system + sum(marked))
    assert not breakpoint_problems(out_system, out)
