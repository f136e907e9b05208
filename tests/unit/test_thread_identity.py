"""What a thread ignores of a resent history (``threads.essential``): the breakpoints an
agent moves, one text block written back as a string, Claude Code's billing line; and what it
does not (an edit)."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from app.services.sidecar.threads import essential
from app.services.sidecar.threads import raw_digest as raw


def raw_digest(items: list[Any]) -> str:
    """The digest a thread compares of Anthropic ``items`` (the system prompt first)."""
    messages, system = essential("anthropic", items[1:], items[0])
    return raw([system, *messages])


def identity(item: Any) -> str:
    """What a thread knows of one message, or of a system prompt (a list of blocks)."""
    if isinstance(item, list):
        return raw_digest([item, {"role": "user", "content": "x"}])
    return raw_digest([[], item])


MARK = {"type": "ephemeral"}
SYSTEM = [
    {"type": "text", "text": "x-anthropic-billing-header: cc_version=2.1; cch=0a1b;"},
    {"type": "text", "text": "You are Claude Code.", "cache_control": MARK},
]


def history(n: int) -> list[Any]:
    """Anthropic items (the system prompt first): a task, then tool rounds."""
    items: list[Any] = [SYSTEM, {"role": "user", "content": [{"type": "text", "text": "task"}]}]
    for i in range(n):
        call = {"type": "tool_use", "id": f"t{i}", "name": "Read", "input": {"file": f"{i}.py"}}
        items.append({"role": "assistant", "content": [call]})
        result = {"type": "tool_result", "tool_use_id": f"t{i}", "content": f"line {i}\n" * 5}
        items.append({"role": "user", "content": [result]})
    return items


def marked(items: list[Any], where: set[int], billing: str) -> list[Any]:
    """``items`` with a breakpoint on the last block of each message at ``where``, one-block
    texts written as strings elsewhere, and the billing line ``billing``."""
    system = [{**SYSTEM[0], "text": f"x-anthropic-billing-header: {billing}"}, SYSTEM[1]]
    out: list[Any] = [system]
    for i, message in enumerate(items[1:], start=1):
        blocks = [dict(b) for b in message["content"]]
        if i in where:
            blocks[-1]["cache_control"] = MARK
            out.append({**message, "content": blocks})
        elif len(blocks) == 1 and blocks[0]["type"] == "text":
            out.append({**message, "content": blocks[0]["text"]})
        else:
            out.append({**message, "content": blocks})
    return out


@given(st.integers(1, 8), st.sets(st.integers(1, 17)), st.text(max_size=20))
def test_any_placement_of_breakpoints_is_the_same_thread(
    n: int, where: set[int], billing: str
) -> None:
    items = history(n)
    assert raw_digest(marked(items, where, billing)) == raw_digest(items)


@given(st.integers(1, 8), st.data())
def test_an_edit_is_another_thread(n: int, data: st.DataObject) -> None:
    items = history(n)
    at = data.draw(st.integers(2, len(items) - 1))
    edited = [*items[:at], *items[at + 1 :]]  # a message removed
    assert raw_digest(edited) != raw_digest(items)
    changed = list(items)
    changed[at] = {**items[at], "content": [{"type": "text", "text": "something else"}]}
    assert raw_digest(changed) != raw_digest(items)


def test_a_text_block_with_more_than_its_text_is_not_a_string() -> None:
    cited = {"type": "text", "text": "x", "citations": []}
    assert identity({"role": "user", "content": [cited]}) != identity(
        {"role": "user", "content": "x"}
    )
    plain = {"type": "text", "text": "x", "cache_control": MARK}
    assert identity({"role": "user", "content": [plain]}) == identity(
        {"role": "user", "content": "x"}
    )


def test_a_system_prompt_is_compared_without_its_billing_line() -> None:
    other = [{**SYSTEM[0], "text": "x-anthropic-billing-header: cch=ffff;"}, SYSTEM[1]]
    assert identity(other) == identity(SYSTEM)
    assert identity([SYSTEM[0], {**SYSTEM[1], "text": "You are someone."}]) != identity(SYSTEM)
