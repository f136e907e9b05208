"""Provider-valid output: the validators, the repairs, the Anthropic shape, and the guarantee."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from app.domain.formats.anthropic import from_anthropic
from app.domain.formats.openai import from_openai
from app.domain.limits import message_problems
from app.domain.messages import (
    ImagePart,
    Message,
    OpaquePart,
    Part,
    ReasoningPart,
    TextPart,
    ToolCallPart,
    ToolResultPart,
)
from app.domain.validity import (
    TARGETS,
    Target,
    anthropic_problems,
    make_valid,
    openai_problems,
    render,
    request_problems,
)
from app.domain.validity.repair import Earlier, Unknowable, each_pass, repair_passes
from app.domain.validity.responses_rules import NO_ITEMS
from app.domain.validity.untouched import facts, untouched
from tests.unit.strategies import json_objects, messy_text

TRANSCRIPTS = Path(__file__).resolve().parents[3] / "shared" / "transcripts"
NO_MESSAGES = "no messages: the API needs at least one"
NO_CONTENTS = "contents is not specified: the API needs at least one content"


# Canonical builders


def text(value: str) -> TextPart:
    return TextPart(text=value)


def call(call_id: str, name: str = "f") -> ToolCallPart:
    return ToolCallPart(id=call_id, name=name, arguments={"q": 1})


def result(call_id: str, content: Any = "ok", **fields: Any) -> ToolResultPart:
    return ToolResultPart(call_id=call_id, content=content, **fields)


def user(*parts: Part | str) -> Message:
    return Message(role="user", content=tuple(text(p) if isinstance(p, str) else p for p in parts))


def assistant(*parts: Part | str) -> Message:
    content = tuple(text(p) if isinstance(p, str) else p for p in parts)
    return Message(role="assistant", content=content)


def system(value: str) -> Message:
    return Message(role="system", content=(text(value),))


def tool(*results: ToolResultPart) -> Message:
    return Message(role="tool", content=results)


def thinking(value: str = "hmm") -> ReasoningPart:
    return ReasoningPart(text=value, signature="sig")


def problems_of(target: Target, messages: Sequence[Message], **options: Any) -> list[str]:
    """The validator's problems with ``render``'s output; an empty list is allowed."""
    system_value, out, _ = render(messages, target, **options)
    found = request_problems(target, system_value, out)
    return [p for p in found if p not in (NO_MESSAGES, NO_CONTENTS, NO_ITEMS)]


def assert_valid_everywhere(messages: Sequence[Message]) -> None:
    for target in TARGETS:
        assert problems_of(target, messages) == [], target


def snapshot(messages: Sequence[Message]) -> str:
    return json.dumps([m.model_dump(mode="json") for m in messages], sort_keys=True)


def oa_call(call_id: str, arguments: Any = "{}") -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": "f", "arguments": arguments}}


# The OpenAI validator

OA_USER = {"role": "user", "content": "hi"}
OA_CALLS = {"role": "assistant", "content": None, "tool_calls": [oa_call("a"), oa_call("b")]}
OA_TOOL_A = {"role": "tool", "tool_call_id": "a", "content": "ok"}
OA_TOOL_B = {"role": "tool", "tool_call_id": "b", "content": "ok"}


def test_openai_accepts_a_well_formed_request() -> None:
    messages = [
        {"role": "developer", "content": [{"type": "text", "text": "rules"}]},
        OA_USER,
        OA_CALLS,
        OA_TOOL_A,
        OA_TOOL_B,
        {"role": "assistant", "content": "done", "name": "bot-1"},
    ]
    assert openai_problems(messages) == []


@pytest.mark.parametrize(
    ("messages", "expected"),
    [
        pytest.param([], NO_MESSAGES, id="empty-list"),
        pytest.param([{"role": "robot", "content": "x"}], "message 0: unknown role", id="role"),
        pytest.param(
            [OA_USER, {"role": "assistant", "content": None}],
            "message 1: an assistant message needs content or tool_calls",
            id="assistant-empty",
        ),
        pytest.param([OA_TOOL_A], "message 0: a tool message must follow", id="tool-first"),
        pytest.param(
            [OA_USER, OA_CALLS, {**OA_TOOL_A, "tool_call_id": "zz"}, OA_TOOL_A, OA_TOOL_B],
            "message 2: tool_call_id 'zz' is not a tool call of message 1",
            id="tool-unknown-id",
        ),
        pytest.param(
            [OA_USER, OA_CALLS, OA_TOOL_A, OA_USER, OA_TOOL_B],
            "message 1: tool call(s) ['b'] have no tool message before message 3",
            id="tool-after-user",
        ),
        pytest.param(
            [OA_USER, OA_CALLS, OA_TOOL_A],
            "message 1: tool call(s) ['b'] have no tool message at the end",
            id="call-unanswered-at-end",
        ),
        pytest.param(
            [OA_USER, OA_CALLS, OA_TOOL_A, OA_TOOL_A, OA_TOOL_B],
            "message 3: tool call 'a' is answered twice",
            id="answered-twice",
        ),
        pytest.param(
            [OA_USER, {**OA_CALLS, "tool_calls": [oa_call("a"), oa_call("a")]}, OA_TOOL_A],
            "message 1: tool call id 'a' is used twice",
            id="duplicate-ids",
        ),
        pytest.param(
            [OA_USER, {**OA_CALLS, "tool_calls": [oa_call("a", {"q": 1})]}, OA_TOOL_A],
            "message 1: tool call 0: function.name and function.arguments must be strings",
            id="arguments-object",
        ),
        pytest.param(
            [{"role": "system", "content": [{"type": "image_url", "image_url": {"url": "u"}}]}],
            "message 0: content part 0: a system message holds text parts only",
            id="system-image",
        ),
        pytest.param(
            [
                OA_USER,
                {**OA_CALLS, "tool_calls": [oa_call("a")]},
                {**OA_TOOL_A, "content": [{"type": "image_url", "image_url": {"url": "u"}}]},
            ],
            "message 2: content part 0: a tool message holds text parts only",
            id="tool-image",
        ),
        pytest.param(
            [OA_USER, {"role": "assistant", "content": [{"type": "image_url"}]}],
            "message 1: content part 0: assistant content holds text and refusal parts only",
            id="assistant-image",
        ),
        pytest.param(
            [{"role": "user", "content": []}],
            "message 0: content must be a string or a non-empty list of parts",
            id="empty-parts",
        ),
        pytest.param(
            [OA_USER, {"role": "assistant", "content": "x", "tool_calls": []}],
            "message 1: tool_calls must be a non-empty list",
            id="empty-tool-calls",
        ),
        pytest.param(
            [{"role": "user", "content": "x", "name": "John Doe"}],
            "message 0: name 'John Doe' is not 1-64 of A-Z a-z 0-9 _ -",
            id="name",
        ),
        pytest.param(
            [OA_USER, {**OA_CALLS, "tool_calls": [{"id": "a", "function": {}}]}],
            "message 1: tool call 0: type must be 'function'",
            id="untyped-call",
        ),
    ],
)
def test_openai_detects(messages: list[Any], expected: str) -> None:
    found = openai_problems(messages)
    assert any(p.startswith(expected) for p in found), found


# The Anthropic validator

AN_USER = {"role": "user", "content": "hi"}
AN_USE = {"type": "tool_use", "id": "a", "name": "f", "input": {}}
AN_CALLS = {"role": "assistant", "content": [{"type": "text", "text": "let me see"}, AN_USE]}
AN_RESULT = {"type": "tool_result", "tool_use_id": "a", "content": "ok"}
AN_RESULTS = {"role": "user", "content": [AN_RESULT, {"type": "text", "text": "and?"}]}
AN_THINK = {"type": "thinking", "thinking": "t", "signature": "s"}


def test_anthropic_accepts_a_well_formed_request() -> None:
    messages = [
        AN_USER,
        {"role": "assistant", "content": [AN_THINK, {"type": "text", "text": "x"}, AN_USE]},
        AN_RESULTS,
        {"role": "assistant", "content": "prefill"},
    ]
    assert anthropic_problems([{"type": "text", "text": "be kind"}], messages) == []


@pytest.mark.parametrize(
    ("system_value", "messages", "expected"),
    [
        pytest.param(None, [], NO_MESSAGES, id="empty-list"),
        pytest.param(
            None, [{"role": "system", "content": "x"}], "message 0: role must be", id="role"
        ),
        pytest.param(
            None,
            [{"role": "assistant", "content": "x"}],
            "message 0: the first turn must be a user turn",
            id="first-user",
        ),
        pytest.param(
            None, [AN_USER, AN_USER], "message 1: a second user turn in a row", id="same-role"
        ),
        pytest.param(
            None,
            [AN_USER, AN_CALLS, {"role": "user", "content": "no result"}],
            "message 1: tool_use ['a'] without a tool_result in the next turn",
            id="use-without-result",
        ),
        pytest.param(
            None,
            [AN_USER, AN_CALLS],
            "message 1: tool_use ['a'] without a tool_result in the next turn",
            id="use-at-end",
        ),
        pytest.param(
            None,
            [{"role": "user", "content": [AN_RESULT]}],
            "message 0: tool_result for 'a' answers no tool_use of the turn before",
            id="result-without-use",
        ),
        pytest.param(
            None,
            [
                AN_USER,
                AN_CALLS,
                {"role": "user", "content": [{"type": "text", "text": "x"}, AN_RESULT]},
            ],
            "message 2: block 1: a tool_result block after another kind of block",
            id="results-first",
        ),
        pytest.param(
            None,
            [AN_USER, AN_CALLS, AN_RESULTS, AN_CALLS, AN_RESULTS],
            "message 3: block 1: tool_use id 'a' is used twice in the request",
            id="unique-ids",
        ),
        pytest.param(
            None,
            [{"role": "user", "content": [{"type": "text", "text": " \n"}]}],
            "message 0: block 0: empty or whitespace-only text block",
            id="blank-text",
        ),
        pytest.param(
            None, [{"role": "user", "content": ""}], "message 0: block 0: empty", id="blank-string"
        ),
        pytest.param(None, [{"role": "user", "content": []}], "message 0: empty content", id="no"),
        pytest.param(
            [{"type": "text", "text": ""}], [AN_USER], "system block 0: empty", id="blank-system"
        ),
        pytest.param(" ", [AN_USER], "system: blank system prompt", id="blank-system-string"),
        pytest.param(
            None,
            [AN_USER, {"role": "assistant", "content": [{"type": "text", "text": "x"}, AN_THINK]}],
            "message 1: block 1: a thinking block after another kind of block",
            id="thinking-first",
        ),
        pytest.param(
            None,
            [AN_USER, {"role": "assistant", "content": "the answer is "}],
            "message 1: a final assistant turn cannot end with whitespace",
            id="prefill-whitespace",
        ),
        pytest.param(
            None,
            [AN_USER, {"role": "assistant", "content": [{**AN_USE, "id": "a.b"}]}],
            "message 1: block 0: tool_use id 'a.b' is not made of",
            id="id-pattern",
        ),
        pytest.param(
            None,
            [
                AN_USER,
                AN_CALLS,
                {"role": "user", "content": [{**AN_RESULT, "content": "", "is_error": True}]},
            ],
            "message 2: block 0: tool_result content is blank",
            id="empty-result",
        ),
        pytest.param(
            None,
            [
                AN_USER,
                AN_CALLS,
                {
                    "role": "user",
                    "content": [{"type": "tool_result", "tool_use_id": "a", "is_error": True}],
                },
            ],
            "message 2: block 0: an error tool_result needs content",
            id="error-result-without-content",
        ),
        pytest.param(
            None,
            [AN_USER, {"role": "assistant", "content": [AN_RESULT]}],
            "message 1: block 0: an assistant turn cannot hold a tool_result block",
            id="result-in-assistant",
        ),
        pytest.param(
            None,
            [{"role": "user", "content": [AN_THINK]}],
            "message 0: block 0: a user turn cannot hold a thinking block",
            id="thinking-in-user",
        ),
    ],
)
def test_anthropic_detects(system_value: Any, messages: list[Any], expected: str) -> None:
    found = anthropic_problems(system_value, messages)
    assert any(p.startswith(expected) for p in found), found


# The issue's invalid-as-stored histories compile to valid output, saying what changed


def test_a_final_tool_call_without_result_is_dropped_keeping_the_rest() -> None:
    messages = [user("hi"), assistant("let me look", call("a", "search"))]
    for target in TARGETS:
        repaired, warnings = make_valid(messages, target)
        assert repaired == [user("hi"), assistant("let me look")]
        assert warnings == ["dropped tool call 'a' (search) that has no result (message 1)"]
    assert_valid_everywhere(messages)


def test_a_call_whose_result_comes_too_late_is_dropped_with_its_result() -> None:
    messages = [user("hi"), assistant(call("a")), user("wait"), tool(result("a"))]
    repaired, warnings = make_valid(messages, "openai")
    assert repaired == [user("hi"), user("wait")]
    assert warnings == [
        "dropped tool call 'a' (f) that has no result (message 1)",
        "dropped tool result for call 'a' (message 3): it is not in the round of its call",
        "dropped empty assistant message (message 1)",
        "dropped empty tool message (message 3)",
    ]
    assert_valid_everywhere(messages)


def test_results_without_their_call_are_dropped() -> None:
    messages = [user("hi"), tool(result("x")), assistant("ok"), user(result("y"), "more")]
    repaired, warnings = make_valid(messages, "anthropic")
    assert repaired == [user("hi"), assistant("ok"), user("more")]
    assert warnings == [
        "dropped tool result for unknown call 'x' (message 1)",
        "dropped tool result for unknown call 'y' (message 3)",
        "dropped empty tool message (message 1)",
    ]
    assert_valid_everywhere(messages)


def test_a_second_result_for_one_call_is_dropped() -> None:
    messages = [user("hi"), assistant(call("a")), tool(result("a")), tool(result("a", "again"))]
    repaired, warnings = make_valid(messages, "openai")
    assert repaired == messages[:3]
    assert warnings[0] == "dropped a second tool result for call 'a' (message 3)"
    assert_valid_everywhere(messages)


def test_duplicate_tool_ids_in_one_message_are_renamed_in_call_and_result() -> None:
    messages = [
        user("hi"),
        assistant(call("a", "one"), call("a", "two")),
        tool(result("a", "first")),
        tool(result("a", "second")),
    ]
    for target in TARGETS:
        repaired, warnings = make_valid(messages, target)
        assert repaired[1].tool_calls[1] == call("a__2", "two")
        assert repaired[3] == tool(result("a__2", "second"))
        assert warnings == ["renamed tool call id 'a' to 'a__2' (message 1): a duplicate"]
    assert_valid_everywhere(messages)


def test_ids_reused_across_rounds_are_renamed_for_anthropic_only() -> None:
    round_ = [assistant(call("a")), tool(result("a"))]
    messages = [user("hi"), *round_, *round_]
    assert make_valid(messages, "openai") == (messages, [])
    repaired, warnings = make_valid(messages, "anthropic")
    assert [m.tool_calls or m.tool_results for m in repaired[3:]] == [
        (call("a__2"),),
        (result("a__2"),),
    ]
    assert warnings == ["renamed tool call id 'a' to 'a__2' (message 3): a duplicate"]
    assert_valid_everywhere(messages)


def test_ids_anthropic_refuses_are_rewritten() -> None:
    messages = [user("hi"), assistant(call("functions.get:0")), tool(result("functions.get:0"))]
    repaired, warnings = make_valid(messages, "anthropic")
    assert repaired[2] == tool(result("functions_get_0"))
    assert warnings == [
        "renamed tool call id 'functions.get:0' to 'functions_get_0' (message 1): Anthropic ids"
        " are A-Z a-z 0-9 _ -"
    ]
    assert make_valid(messages, "openai") == (messages, [])


def test_blank_text_blocks_are_dropped_for_both_targets() -> None:
    messages = [user("hi", " "), assistant("", call("a")), tool(result("a")), user("\n\t")]
    for target in ("anthropic", "openai"):
        repaired, warnings = make_valid(messages, target)  # type: ignore[arg-type]
        assert repaired == [user("hi"), assistant(call("a")), tool(result("a"))]
        assert warnings == [
            "dropped blank text part (message 0)",
            "dropped blank text part (message 1)",
            "dropped blank text part (message 3)",
            "dropped empty user message (message 3)",
        ]
    assert_valid_everywhere(messages)


def test_blank_and_error_tool_results_for_anthropic() -> None:
    messages = [
        user("hi"),
        assistant(call("a"), call("b"), call("c")),
        tool(result("a", " "), result("b", "", is_error=True), result("c", (text(""),))),
    ]
    _, out, warnings = render(messages, "anthropic")
    assert out[2]["content"] == [
        {"type": "tool_result", "tool_use_id": "a"},
        {"type": "tool_result", "tool_use_id": "b", "content": "(no output)", "is_error": True},
        {"type": "tool_result", "tool_use_id": "c"},
    ]
    assert warnings == [
        "removed the blank content of tool result for call 'a' (message 2)",
        "gave the empty error tool result for call 'b' (message 2) the text '(no output)'",
        "dropped blank text from tool result for call 'c' (message 2)",
    ]
    assert_valid_everywhere(messages)


# Parts a target refuses in a role


def test_parts_a_role_cannot_hold_are_dropped_with_a_warning() -> None:
    image = ImagePart(url="https://example.com/a.png")
    messages = [
        Message(role="system", content=(text("rules"), image)),
        user("look", image),
        assistant("here", image),
        Message(role="user", content=(thinking(),)),
    ]
    _, oa, oa_warnings = render(messages, "openai")
    assert oa == [
        {"role": "system", "content": "rules"},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "look"},
                {"type": "image_url", "image_url": {"url": "https://example.com/a.png"}},
            ],
        },
        {"role": "assistant", "content": "here"},
    ]
    assert oa_warnings == [
        "dropped image from system message 0: openai does not accept it there",
        "dropped image from assistant message 2: openai does not accept it there",
        "dropped user message 3: nothing in it reaches openai",
    ]
    _, _, an_warnings = render(messages, "anthropic")
    assert an_warnings == [
        "dropped image from system message 0: anthropic does not accept it there",
        "dropped image from assistant message 2: anthropic does not accept it there",
        "dropped reasoning from user message 3: anthropic does not accept it there",
        "dropped empty user message (message 3)",
    ]
    assert_valid_everywhere(messages)


def test_openai_reasoning_only_turns_are_dropped_but_kept_for_anthropic() -> None:
    messages = [user("hi"), assistant(thinking()), assistant("answer")]
    repaired, warnings = make_valid(messages, "openai")
    assert repaired == [user("hi"), assistant("answer")]
    assert warnings == ["dropped assistant message 1: nothing in it reaches openai"]
    assert make_valid(messages, "anthropic") == (messages, [])
    assert_valid_everywhere(messages)


def test_hand_made_opaque_blocks_that_bypass_the_checks_are_dropped() -> None:
    forged = OpaquePart(provider="anthropic", data={"type": "tool_result", "tool_use_id": "z"})
    document = OpaquePart(provider="anthropic", data={"type": "document", "source": {}})
    messages = [user("hi", forged, document)]
    repaired, warnings = make_valid(messages, "anthropic")
    assert repaired == [user("hi", document)]
    assert warnings == [
        "dropped anthropic block of type 'tool_result' from user message 0: anthropic does not"
        " accept it there"
    ]


def test_openai_names_are_made_acceptable() -> None:
    messages = [
        Message(role="user", content=(text("hi"),), name="John Doe"),
        Message(role="user", content=(text("yo"),), name=""),
    ]
    _, out, warnings = render(messages, "openai")
    assert [m.get("name") for m in out] == ["John_Doe", None]
    assert warnings == [
        "changed name 'John Doe' to 'John_Doe' (message 0): OpenAI names are 1-64 of"
        " A-Z a-z 0-9 _ -",
        "dropped the empty name (message 1): OpenAI names are 1-64 of A-Z a-z 0-9 _ -",
    ]


def test_openai_legacy_function_results_go_out_as_tool_messages() -> None:
    messages = from_openai(
        [
            OA_USER,
            {"role": "assistant", "content": None, "tool_calls": [oa_call("f")]},
            {"role": "function", "name": "f", "content": "42"},
        ]
    )
    _, out, warnings = render(messages, "openai")
    assert out[2] == {"role": "tool", "content": "42", "tool_call_id": "f", "name": "f"}
    assert warnings == []
    assert openai_problems(out) == []


def test_openai_shapes_the_api_refuses_are_normalised_silently() -> None:
    untyped = ToolCallPart(id="a", name="f", arguments={}, metadata={"openai": {"untyped": True}})
    messages = [
        user("hi"),
        Message(role="assistant", content=(untyped,), metadata={"openai": {"content": "parts"}}),
        Message(role="tool", content=(result("a", ""),), metadata={"openai": {"content": "null"}}),
        Message(
            role="assistant",
            content=(text("done"),),
            metadata={"openai": {"extra": {"tool_calls": []}}},
        ),
    ]
    _, out, warnings = render(messages, "openai")
    assert out[1:] == [
        {"role": "assistant", "content": None, "tool_calls": [oa_call("a")]},
        {"role": "tool", "content": "", "tool_call_id": "a"},
        {"role": "assistant", "content": "done"},
    ]
    assert warnings == []
    assert openai_problems(out) == []


# The Anthropic shape


def test_anthropic_merges_consecutive_turns_and_says_so() -> None:
    messages = [user("a"), user("b"), assistant("c"), assistant("d")]
    system_value, out, warnings = render(messages, "anthropic")
    assert system_value is None
    assert out == [
        {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
        {
            "role": "assistant",
            "content": [{"type": "text", "text": "c"}, {"type": "text", "text": "d"}],
        },
    ]
    assert warnings == [
        "merged consecutive user messages 0 and 1 into one turn",
        "merged consecutive assistant messages 2 and 3 into one turn",
    ]


def test_openai_tool_messages_become_one_user_turn_without_warnings() -> None:
    messages = [
        user("hi"),
        assistant(call("a"), call("b")),
        tool(result("a")),
        tool(result("b")),
        user("thanks"),
    ]
    _, out, warnings = render(messages, "anthropic")
    assert out[2] == {
        "role": "user",
        "content": [
            {"type": "tool_result", "tool_use_id": "a", "content": "ok"},
            {"type": "tool_result", "tool_use_id": "b", "content": "ok"},
            {"type": "text", "text": "thanks"},
        ],
    }
    assert warnings == []


def test_anthropic_first_turn_is_a_user_turn() -> None:
    messages = [system("rules"), assistant("hello")]
    system_value, out, warnings = render(messages, "anthropic")
    assert system_value == [{"type": "text", "text": "rules"}]
    assert out == [
        {"role": "user", "content": "(continuing the conversation)"},
        {"role": "assistant", "content": [{"type": "text", "text": "hello"}]},
    ]
    assert warnings == [
        "inserted a user turn '(continuing the conversation)' before the first assistant turn"
        " (message 1)"
    ]


def test_anthropic_thinking_first_and_kept_with_its_turn() -> None:
    messages = [user("q"), assistant("draft", thinking("a")), assistant(thinking("b"), "final")]
    _, out, warnings = render(messages, "anthropic")
    assert [b["type"] for b in out[1]["content"]] == ["thinking", "thinking", "text", "text"]
    assert [b.get("thinking") for b in out[1]["content"][:2]] == ["a", "b"]
    assert warnings == [
        "merged consecutive assistant messages 1 and 2 into one turn",
        "moved thinking to the start of the assistant turn (messages 1, 2)",
    ]


def test_anthropic_tool_results_first_in_their_user_turn() -> None:
    messages = [user("q"), assistant(call("a")), user("here you go", result("a"))]
    _, out, warnings = render(messages, "anthropic")
    assert [b["type"] for b in out[2]["content"]] == ["tool_result", "text"]
    assert warnings == ["moved tool results to the start of the user turn (message 2)"]


def test_anthropic_system_messages_move_to_system() -> None:
    messages = [system("one"), user("q"), system("two"), assistant("a")]
    system_value, out, warnings = render(messages, "anthropic")
    assert system_value == [{"type": "text", "text": "one"}, {"type": "text", "text": "two"}]
    assert [turn["role"] for turn in out] == ["user", "assistant"]
    assert warnings == ["moved system message 2 into the system prompt"]


def test_a_system_message_inside_a_round_splits_it_for_openai_only() -> None:
    messages = [user("q"), assistant(call("a")), system("note"), tool(result("a"))]
    assert make_valid(messages, "anthropic") == (messages, [])
    repaired, _ = make_valid(messages, "openai")
    assert repaired == [user("q"), system("note")]


def test_anthropic_final_assistant_turn_loses_trailing_whitespace() -> None:
    messages = [user("q"), assistant("The answer is \n")]
    _, out, warnings = render(messages, "anthropic")
    assert out[-1] == {"role": "assistant", "content": [{"type": "text", "text": "The answer is"}]}
    assert warnings == ["removed trailing whitespace from the final assistant turn (message 1)"]
    _, oa, oa_warnings = render(messages, "openai")
    assert oa[-1]["content"] == "The answer is \n"
    assert oa_warnings == []


def test_caller_metadata_never_reaches_a_provider() -> None:
    secret = {"pinned": True, "execution_id": "secret-marker"}
    messages = [m.model_copy(update={"metadata": secret}) for m in (user("q"), assistant("a"))]
    for target in TARGETS:
        assert "secret-marker" not in json.dumps(render(messages, target)[:2])


# Delta compiles: calls the provider already holds


def test_results_for_prior_calls_are_kept() -> None:
    messages = [tool(result("p1")), user("and now?"), assistant(call("p1")), tool(result("p1"))]
    for target in TARGETS:
        repaired, warnings = make_valid(messages, target, prior_call_ids=frozenset({"p1"}))
        assert repaired[0] == messages[0]
        # Without prior_call_ids the same result answers nothing and is dropped.
        assert make_valid(messages[:2], target)[0] == [messages[1]]
        if target in ("anthropic", "responses"):
            # The provider holds 'p1' already: a new call may not reuse it (Anthropic and
            # Responses pair by id across the request; OpenAI and Gemini within a round).
            assert repaired[2:] == [assistant(call("p1__2")), tool(result("p1__2"))]
            assert warnings == ["renamed tool call id 'p1' to 'p1__2' (message 2): a duplicate"]
        else:
            assert (repaired, warnings) == (messages, [])


def test_a_prior_result_after_the_first_closing_message_is_dropped() -> None:
    messages = [user("q"), tool(result("p1"))]
    repaired, warnings = make_valid(messages, "openai", prior_call_ids=frozenset({"p1"}))
    assert repaired == [user("q")]
    assert warnings[0] == (
        "dropped tool result for call 'p1' (message 1): it is not in the round of its call"
    )


# Purity


def test_inputs_are_left_unchanged() -> None:
    messages = [
        system("rules"),
        assistant(" x ", call("a.b"), call("a.b"), thinking()),
        user(" ", result("a.b", (text(""),), is_error=True)),
        assistant("end "),
    ]
    before = snapshot(messages)
    copies = list(messages)
    for target in TARGETS:
        make_valid(messages, target)
        render(messages, target, prior_call_ids=frozenset({"z"}))
    assert snapshot(messages) == before
    assert all(a is b for a, b in zip(messages, copies, strict=True))


def test_an_empty_history_renders_to_an_empty_list() -> None:
    assert render([], "openai") == (None, [], [])
    assert render([], "anthropic") == (None, [], [])
    assert render([system("only a system prompt")], "anthropic")[1] == []


# The guarantee, on generated messy histories

IDS = st.sampled_from(["a", "b", "c", "a__2", "x.y", "x_y", ""])
IMAGES = st.sampled_from(
    [ImagePart(url="https://example.com/i.png"), ImagePart(data="AAAA", media_type="image/png")]
)
OPAQUE_TYPES = ["refusal", "input_audio", "document", "image", "text", "tool_use", "thinking"]
GEMINI_FIELDS = ["fileData", "executableCode", "codeExecutionResult", "text", "functionCall"]
OPAQUE_TYPES += ["input_file", "web_search_call", "custom_tool_call_output", "function_call"]
OPAQUES = st.builds(
    OpaquePart,
    provider=st.sampled_from(["openai", "anthropic", "responses"]),
    data=st.one_of(
        st.builds(lambda kind: {"type": kind, "x": 1}, st.sampled_from(OPAQUE_TYPES)),
        st.just({"no": "type"}),
        st.just({"type": "web_search_call", "id": "ws_1", "status": "completed"}),
    ),
) | st.builds(
    OpaquePart,
    provider=st.just("gemini"),
    data=st.one_of(
        st.builds(lambda kind: {kind: {"x": 1}}, st.sampled_from(GEMINI_FIELDS)),
        st.just({"thoughtSignature": "s"}),
    ),
)
RS_ITEM = {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "s"}]}
REASONING = st.sampled_from(
    [
        thinking(),
        ReasoningPart(redacted_data="xyz"),
        ReasoningPart(text=" ", signature=None),
        ReasoningPart(text="plan", signature="g", metadata={"gemini": {"thought": True}}),
        ReasoningPart(text="s", metadata={"responses": {"item": RS_ITEM}}),
        ReasoningPart(metadata={"responses": {"item": {**RS_ITEM, "id": "rs_2", "summary": []}}}),
    ]
)
TEXTS = st.builds(TextPart, text=messy_text)
CALLS = st.builds(
    ToolCallPart,
    id=IDS,
    name=st.sampled_from(["f", "g"]),
    arguments=json_objects | st.text(max_size=5),
    metadata=st.sampled_from(
        [
            {},
            {"openai": {"untyped": True}},
            {"openai": {"custom": True}},
            {"gemini": {"id": "absent"}},
            {"responses": {"extra": {"id": "fc_1", "status": "completed"}}},
            {"responses": {"extra": {"id": "call_1"}}},
        ]
    ),
)
RESULT_CONTENT = messy_text | st.lists(TEXTS | IMAGES | OPAQUES, max_size=3).map(tuple)
RESULTS = st.builds(
    ToolResultPart,
    call_id=IDS,
    content=RESULT_CONTENT,
    is_error=st.sampled_from([None, True, False]),
    metadata=st.sampled_from([{}, {"gemini": {"response": "json", "name": "g"}}]),
)
PARTS = {
    "system": TEXTS | IMAGES | REASONING | OPAQUES | RESULTS,
    "user": TEXTS | IMAGES | REASONING | OPAQUES | RESULTS,
    "assistant": TEXTS | CALLS | CALLS | REASONING | OPAQUES | IMAGES,
    "tool": RESULTS,
}
HINTS = st.sampled_from(
    [
        {},
        {"pinned": True, "execution_id": "secret-marker"},
        {"openai": {"content": "parts"}},
        {"openai": {"content": "null"}},
        {"openai": {"content": "absent"}},
        {"openai": {"role": "developer"}},
        {"openai": {"role": "function"}},
        {"anthropic": {"content": "string"}},
        {"responses": {"role": "developer", "item": True, "string": True}},
        {"responses": {"untyped": True, "extra": {"id": "msg_1"}}},
        {"responses": {"empty": True, "extra": {"id": "item_1"}}},
    ]
)


@st.composite
def messages_(draw: st.DrawFn) -> Message:
    role = draw(st.sampled_from(["system", "user", "assistant", "tool"]))
    parts = draw(st.lists(PARTS[role], min_size=1 if role == "tool" else 0, max_size=4))
    name = draw(st.sampled_from([None, "bob", "John Doe", ""]))
    return Message(role=role, content=tuple(parts), name=name, metadata=draw(HINTS))


@st.composite
def rounds(draw: st.DrawFn) -> list[Message]:
    """An assistant turn with calls and its results: as tool messages, or mixed in a user turn."""
    calls = draw(st.lists(CALLS, min_size=1, max_size=3))
    results = [result(c.id, draw(RESULT_CONTENT)) for c in calls]
    head = assistant(*draw(st.lists(REASONING | TEXTS, max_size=2)), *calls)
    if draw(st.booleans()):
        return [head, *(tool(r) for r in results)]
    mixed = draw(st.permutations([*results, *draw(st.lists(TEXTS | IMAGES, max_size=2))]))
    return [head, user(*mixed)]


PREFILLS = st.builds(lambda value: [assistant(value + " \n")], st.text(min_size=1, max_size=5))
HISTORIES = st.lists(messages_().map(lambda m: [m]) | rounds() | PREFILLS, max_size=12).map(
    lambda items: [m for item in items for m in item]
)


def user_opaque(provider: str, data: dict[str, Any]) -> list[Message]:
    return [
        Message(role="system", content=()),
        Message(role="user", content=(OpaquePart(provider=provider, data=data),)),  # type: ignore[arg-type]
    ]


@given(HISTORIES)
@settings(max_examples=500, deadline=None)
# A content part Responses reads but refuses in a message (found by this test).
@example(user_opaque("responses", {"type": "input_audio", "x": 1}))
def test_any_accepted_history_renders_valid_for_both_providers(messages: list[Message]) -> None:
    assert message_problems(messages) == []  # the app accepts it
    before = snapshot(messages)
    for target in TARGETS:
        assert problems_of(target, messages) == [], target
        assert "secret-marker" not in json.dumps(render(messages, target)[:2])
    assert snapshot(messages) == before


@given(HISTORIES, st.sampled_from(TARGETS))
@settings(max_examples=200, deadline=None)
def test_make_valid_leaves_nothing_to_repair(messages: list[Message], target: Target) -> None:
    repaired, _ = make_valid(messages, target)
    assert make_valid(repaired, target) == (repaired, [])


CALL_IDS = st.frozensets(IDS, max_size=2)
NO_CALLS: frozenset[str] = frozenset()
_ONE_SHOT = ("anthropic", NO_CALLS, NO_CALLS, False, "checked", "none", 0)
RS_REASONING = ReasoningPart(text="s", metadata={"responses": {"item": RS_ITEM}})
EMPTIED = assistant(thinking(), "")  # for OpenAI: nothing left to send once fitted
_PRIOR_P1 = (frozenset({"p1"}), NO_CALLS, False, "none", "none", 0)
EDITS = st.sampled_from(["none", "drop", "copy", "swap"])


def edited(messages: list[Message], edit: str, at: int) -> list[Message]:
    """``messages`` with one small edit at ``at``: a message dropped, repeated or swapped."""
    if not messages or edit == "none":
        return messages
    n = at % len(messages)
    out = list(messages)
    if edit == "drop":
        del out[n]
    elif edit == "copy":
        out.insert(n, out[n])
    else:
        out[n - 1], out[n] = out[n], out[n - 1]
    return out


@given(
    HISTORIES,
    st.sampled_from(TARGETS),
    CALL_IDS,
    CALL_IDS,
    st.booleans(),
    st.sampled_from(["none", "checked", "unchecked"]),
    EDITS,
    st.integers(0, 30),
)
@settings(max_examples=600, deadline=None)
# A prior call's result after the first closing message; a call id twice in one message with
# one result; a Responses reasoning item with nothing after it.
@example(
    [user("hi"), tool(result("a"))], "openai", frozenset({"a"}), NO_CALLS, False, "none", "none", 0
)
@example([user("q"), assistant(call("a"), call("a")), tool(result("a"))], *_ONE_SHOT)
@example([user("q"), assistant("t", RS_REASONING)], "responses", *_ONE_SHOT[1:])
# An assistant turn the fitting leaves empty joins the round before it (found in review).
@example([tool(result("p1")), EMPTIED, tool(result("p1"))], "openai", *_PRIOR_P1)
@example(
    [assistant(call("c1")), tool(result("c1")), user("ok"), EMPTIED, tool(result("p1"))],
    "openai",
    *_PRIOR_P1,
)
@example(
    [user("q"), assistant(call("c1")), tool(result("c1")), assistant(" "), tool(result("c1"))],
    "anthropic",
    *_ONE_SHOT[1:],
)
def test_one_walk_tells_what_the_repairs_leave_as_it_is(
    messages: list[Message],
    target: Target,
    prior: frozenset[str],
    calls: frozenset[str],
    repaired_first: bool,
    earlier_kind: str,
    edit: str,
    at: int,
) -> None:
    """``untouched`` tells exactly when every pass would leave the view as it is, with no
    warning, and otherwise a part they leave as it is; ``repair_passes`` (which repairs only
    the rest) answers as the passes over the whole view."""
    if repaired_first:  # a view the compile's second repair meets, or one edit away from it
        messages = edited(make_valid(messages, target, prior_call_ids=prior)[0], edit, at)
    checked = frozenset(f"{base}{tail}" for base in "abcx_" for tail in ("", "__2", "__3"))
    earlier = (
        None
        if earlier_kind == "none"
        else Earlier(calls, calls, checked if earlier_kind == "checked" else frozenset())
    )
    calls = frozenset() if earlier is None else calls
    try:
        expected = each_pass(messages, target, prior, earlier=earlier, want_ids=True)
    except Unknowable:
        expected = None
    kept = untouched([facts(m, target) for m in messages], target, prior, calls)
    if expected is None:
        assert kept < len(messages)
        with pytest.raises(Unknowable):
            repair_passes(messages, target, prior, earlier=earlier, want_ids=True)
        return
    entries, passes, _ = expected
    whole = entries == list(enumerate(messages)) and not any(passes)
    assert (kept == len(messages)) == whole
    assert entries[:kept] == list(enumerate(messages[:kept]))  # left as they are
    assert repair_passes(messages, target, prior, earlier=earlier, want_ids=True) == expected


# Real transcripts


def transcript_paths() -> list[str]:
    if not TRANSCRIPTS.is_dir():
        return []
    return sorted(str(p.relative_to(TRANSCRIPTS)) for p in TRANSCRIPTS.glob("*/*.json"))


def load_transcript(name: str) -> tuple[list[Message], Any, Any]:
    document = json.loads((TRANSCRIPTS / name).read_text(encoding="utf-8"))
    if name.startswith("openai/"):
        return from_openai(document["messages"]), None, document["messages"]
    system_value = document.get("system")
    return from_anthropic(document["messages"], system_value), system_value, document["messages"]


@pytest.mark.skipif(not TRANSCRIPTS.is_dir(), reason=f"no transcripts folder at {TRANSCRIPTS}")
@pytest.mark.parametrize("name", transcript_paths())
def test_real_transcripts_render_valid_for_both_providers(name: str) -> None:
    messages, _, _ = load_transcript(name)
    assert messages
    for target in TARGETS:
        assert problems_of(target, messages) == [], target


@pytest.mark.skipif(not TRANSCRIPTS.is_dir(), reason=f"no transcripts folder at {TRANSCRIPTS}")
@pytest.mark.parametrize("name", [n for n in transcript_paths() if n.startswith("openai/")])
def test_valid_openai_transcripts_render_unchanged(name: str) -> None:
    messages, _, original = load_transcript(name)
    if openai_problems(original):
        pytest.skip("the transcript itself needs repairs")
    assert render(messages, "openai") == (None, original, [])
