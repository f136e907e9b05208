"""The recall tool, pure: its definition and results per shape, the model's arguments, pages that
join to exactly the text (real tiktoken), and the decorator in a compile."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.adapters.tokenizers import load_counter
from app.api.sidecar.recalling import MAX_RECALLS, REPLY_ROOM, page_tokens
from app.domain.calibration import Calibration, Sample
from app.domain.compilers.base import Item
from app.domain.compilers.registry import build
from app.domain.compilers.spec import parse_spec
from app.domain.compiling import Output, Target, compile_request
from app.domain.errors import InvalidInput
from app.domain.messages import Message, TextPart, ToolCallPart, ToolResultPart
from app.domain.providers import PROFILES
from app.domain.recall import (
    DESCRIPTION,
    PARAMETERS,
    BadArguments,
    Pointer,
    page_of,
    page_text,
    parse_arguments,
    pointer_text,
    tool_result,
    with_tools,
)
from app.domain.recall import definition as tool_definition
from app.domain.tokens import count_message
from app.domain.validity import anthropic_problems, openai_problems
from app.services.compiling import Compilation
from tests.unit.compiler_builders import NOW, snapshot

COUNTER = load_counter()
O200K = COUNTER.encoder("o200k_base")


def test_the_tool_definition_in_each_shape() -> None:
    assert tool_definition("openai", "recall_it") == {
        "type": "function",
        "function": {"name": "recall_it", "description": DESCRIPTION, "parameters": PARAMETERS},
    }
    assert tool_definition("anthropic") == {
        "name": "ctxc_recall",
        "description": DESCRIPTION,
        "input_schema": PARAMETERS,
    }
    assert tool_definition("responses") == {
        "type": "function",
        "name": "ctxc_recall",
        "description": DESCRIPTION,
        "parameters": PARAMETERS,
    }
    assert tool_definition("gemini") == {
        "functionDeclarations": [
            {"name": "ctxc_recall", "description": DESCRIPTION, "parameters": PARAMETERS}
        ]
    }
    with pytest.raises(ValueError, match="no tool shape"):
        tool_definition("xml")


def test_the_tool_result_in_each_shape() -> None:
    assert tool_result("openai", "ctxc_recall", "c1", "text", False) == {
        "role": "tool",
        "tool_call_id": "c1",
        "content": "text",
    }
    assert tool_result("anthropic", "ctxc_recall", "c1", "gone", True) == {
        "type": "tool_result",
        "tool_use_id": "c1",
        "content": "gone",
        "is_error": True,
    }
    assert "is_error" not in tool_result("anthropic", "ctxc_recall", "c1", "text", False)
    assert tool_result("responses", "ctxc_recall", "c1", "text", False) == {
        "type": "function_call_output",
        "call_id": "c1",
        "output": "text",
    }
    assert tool_result("gemini", "ctxc_recall", None, "gone", True) == {
        "functionResponse": {"name": "ctxc_recall", "response": {"error": "gone"}},
    }
    assert tool_result("gemini", "r", "id1", "text", False) == {
        "functionResponse": {"name": "r", "response": {"output": "text"}, "id": "id1"},
    }


@pytest.mark.parametrize("shape", ["openai", "anthropic", "responses", "gemini"])
def test_the_callers_tools_come_first_and_a_same_named_one_is_replaced(shape: str) -> None:
    mine = tool_definition(shape, "run_tests")
    old = tool_definition(shape, "ctxc_recall")
    recall = tool_definition(shape)
    assert with_tools(shape, None, [recall]) == [recall]
    assert with_tools(shape, [mine, old, "odd"], [recall]) == [mine, "odd", recall]


def test_a_gemini_entry_keeps_its_other_declarations() -> None:
    [mine] = tool_definition("gemini", "run_tests")["functionDeclarations"]
    [old] = tool_definition("gemini", "ctxc_recall")["functionDeclarations"]
    recall = tool_definition("gemini")
    both = {"functionDeclarations": [old, mine], "x": 1}
    assert with_tools("gemini", [both], [recall]) == [
        {"functionDeclarations": [mine], "x": 1},
        recall,
    ]


def test_the_models_arguments() -> None:
    assert parse_arguments({"call_id": "c1", "seq": 3}) == Pointer("c1", 3)
    assert parse_arguments('{"call_id": "c1", "seq": "3", "offset": 10, "x": 1}') == Pointer(
        "c1", 3, None, 10
    )
    assert parse_arguments({"sha256": "AB" * 32}) == Pointer(sha256="ab" * 32)
    assert parse_arguments({"call_id": "c1", "seq": 0}) == Pointer("c1")
    assert parse_arguments({"seq": 3, "offset": 5}) == Pointer(seq=3, offset=5)  # a message
    for wrong in [
        "",
        "[1]",
        "{",
        [],
        {},
        {"seq": 0},
        {"call_id": "c", "sha256": "a" * 64},
        {"call_id": 5},
        {"call_id": ""},
        {"sha256": "xyz"},
        {"call_id": "c", "seq": -1},
        {"call_id": "c", "seq": True},
        {"call_id": "c", "offset": 1.5},
        {"call_id": "c" * 513},
        {"call_id": "a\x00b"},
        "[" * 100_000,
    ]:
        with pytest.raises(BadArguments):
            parse_arguments(wrong)


def test_pointers_and_the_next_page() -> None:
    assert pointer_text("ctxc_recall", "c1", 12) == 'ctxc_recall {"call_id": "c1", "seq": 12}'
    assert pointer_text("ctxc_recall", None, 12) == 'ctxc_recall {"seq": 12}'
    assert Pointer(seq=12).next(40) == {"seq": 12, "offset": 40}
    assert pointer_text("r", "é/1") == 'r {"call_id": "é/1"}'
    assert Pointer("c1", 4).next(100) == {"call_id": "c1", "seq": 4, "offset": 100}
    assert Pointer(sha256="a" * 64).next(7) == {"sha256": "a" * 64, "offset": 7}


def pages(text: str, max_tokens: int) -> list[str]:
    out, start = [], 0
    while True:
        page = page_of(text, start, max_tokens, O200K.count)
        assert page.start == start and page.total == len(text)
        assert O200K.count(page.text) <= max_tokens
        out.append(page.text)
        if page.end >= len(text):
            return out
        assert page.end > start
        start = page.end


LINES = st.lists(
    st.text(st.characters(codec="utf-8"), max_size=80)
    | st.sampled_from(["日本語のテキスト", "👩‍👩‍👧🙂", "e\u0301", "\r", "", "x" * 300]),
    max_size=60,
)


@settings(max_examples=150, deadline=None)
@given(LINES, st.sampled_from(["\n", "\r\n", ""]), st.integers(64, 300))
def test_pages_join_to_exactly_the_text(lines: list[str], end: str, max_tokens: int) -> None:
    text = end.join(lines)
    assert "".join(pages(text, max_tokens)).encode() == text.encode()


def test_pages_end_after_a_line_and_hold_at_most_the_tokens() -> None:
    text = "".join(f"line {n}: {'日本' * (n % 9)} 🙂\n" for n in range(2_000))
    found = pages(text, 100)
    assert "".join(found) == text and len(found) > 20
    assert all(p.endswith("\n") for p in found)
    # Text that is many tokens a character still fits (the safe fallback).
    dense = "🙂👩‍👩‍👧" * 500
    assert "".join(pages(dense, 64)) == dense
    assert pages("", 64) == [""]


def test_the_page_text_names_the_next_call_until_the_last() -> None:
    text = "a\n" * 1_000
    pointer = Pointer("c1", 5)
    first = page_of(text, 0, 64, O200K.count)
    shown = page_text(first, "ctxc_recall", pointer)
    assert shown.startswith(first.text)
    line = shown[len(first.text) :]
    assert line == (
        f"\n[ctxc_recall: characters 0 to {first.end:,} of 2,000; the next page: "
        f'ctxc_recall {{"call_id": "c1", "seq": 5, "offset": {first.end}}}]'
    )
    last = page_of(text, 1_990, 64, O200K.count)
    end = "[r: characters 1,990 to 2,000 of 2,000: the end of the text]"
    assert page_text(last, "r", pointer).endswith(end)
    whole = page_of("short", 0, 64, O200K.count)
    assert page_text(whole, "r", pointer) == "short"


# The decorator in a compile (real tokens)

BIG = "\n".join(f"row {n} " + "data " * 20 for n in range(400))


def history() -> list[Message]:
    def called(call_id: str) -> Message:
        part = ToolCallPart(id=call_id, name="read", arguments={"path": "a"})
        return Message(role="assistant", content=(part,))

    def answered(call_id: str) -> Message:
        return Message(role="tool", content=(ToolResultPart(call_id=call_id, content=BIG),))

    ask = Message(role="user", content=(TextPart(text="read a twice"),))
    return [ask, called("c1"), answered("c1"), called("c2"), answered("c2"), ask]


def compile_with(spec: Any, output: str, session: str | None = "s1") -> Any:
    profile = PROFILES["anthropic" if output == "anthropic" else "openai"]
    encoder = COUNTER.encoder(profile.encoding)
    stored = tuple(
        Item(n + 1, "messages", m, count_message(m, encoder)) for n, m in enumerate(history())
    )
    snap = snapshot(stored, count=lambda m: count_message(m, encoder), session_id=session, now=NOW)
    return compile_request(snap, build(parse_spec(spec)), Target(profile, 200_000))


@pytest.mark.parametrize("output", ["openai", "anthropic"])
def test_the_decorator_adds_the_tool_and_names_the_pointers(output: str) -> None:
    spec = {"decorators": ["tool_compaction", "compact_tool_results", "token_limit", "recall"]}
    done = compile_with(spec, output)
    plain = compile_with({"decorators": spec["decorators"][:3]}, output)
    assert done.tools == (tool_definition(output),) and plain.tools == ()
    text = json.dumps(done.messages)
    assert 'The original: ctxc_recall {\\"call_id\\": \\"c1\\", \\"seq\\": 3}' in text
    assert "ctxc_recall" not in json.dumps(plain.messages)
    assert done.total > plain.total
    if output == "openai":
        assert openai_problems(done.messages) == []
    else:
        assert anthropic_problems(done.system, done.messages) == []


def test_the_recall_tool_claims_its_tokens_in_the_budget() -> None:
    def limited(max_tokens: int) -> Any:
        window = {"name": "token_limit", "params": {"max_tokens": max_tokens}}
        return compile_with({"decorators": ["tool_compaction", window, "recall"]}, "openai")

    fits = compile_with({"decorators": ["tool_compaction", "recall"]}, "openai")
    tool_cost = fits.total - compile_with({"decorators": ["tool_compaction"]}, "openai").total
    # Everything counts: the messages, the tool, the reply priming.
    assert limited(fits.total).seqs == fits.seqs
    assert len(limited(fits.total - 1).seqs) < len(fits.seqs) and tool_cost > 0


def test_the_decorator_needs_a_session_and_the_outer_place() -> None:
    with pytest.raises(InvalidInput) as err:
        compile_with({"decorators": ["recall"]}, "openai", session=None)
    assert err.value.problems[0][0] == ("compiler", "decorators", 0, "params")
    for spec, where in [
        (["recall", "tool_compaction"], "tool_compaction"),
        (["tool_compaction", "recall", "token_limit"], "token_limit"),
    ]:
        with pytest.raises(InvalidInput) as err:
            build(parse_spec({"decorators": spec}))
        assert err.value.problems == (
            (
                ("compiler", "decorators", spec.index("recall"), "name"),
                f"recall must come after {where}",
            ),
        )
    with pytest.raises(InvalidInput):
        build(parse_spec({"decorators": [{"name": "recall", "params": {"name": "a b"}}]}))
    build(parse_spec({"decorators": ["token_limit", "recall", "inject"]}))


def test_sidecar_pages_fit_the_room_left_in_the_provider_s_tokens() -> None:
    """The room left is in the provider's tokens (a calibrated total); a page is counted in
    estimated ones: at a factor of 1.5 a page is two thirds of the room's share."""
    window, total = 12_000, 2_000
    output = Output(None, [], None, total, {}, window, False, None, [], [], [])
    share = (window - total - REPLY_ROOM) // MAX_RECALLS
    assert page_tokens(Compilation("c", PROFILES["anthropic"], output), 1) == share
    calibration = Calibration(1.5, 3, "session", Sample(1, 1, 1))
    calibrated = Compilation("c", PROFILES["anthropic"], output, calibration=calibration)
    assert page_tokens(calibrated, 1) == calibration.budget(window - total - REPLY_ROOM) // 3
    assert calibration.count(page_tokens(calibrated, 1) * MAX_RECALLS) <= share * MAX_RECALLS
