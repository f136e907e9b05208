"""OpenAI Responses input items: lossless round trips on the shapes OpenAI documents, how items
group into canonical messages, cross-shape conversion, refusals of other formats' shapes, the
validity rules and the repairs that keep every render valid (also over generated item lists)."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.domain.compilers.builtins import all_sections
from app.domain.compilers.redact import redact
from app.domain.errors import FormatError, InvalidInput
from app.domain.formats.anthropic import from_anthropic
from app.domain.formats.convert import parse_messages
from app.domain.formats.openai import from_openai
from app.domain.formats.responses import from_responses, to_responses
from app.domain.messages import OpaquePart, ReasoningPart, TextPart, ToolCallPart
from app.domain.validity import render, request_problems, responses_problems
from app.domain.validity.responses_rules import NO_ITEMS
from tests.unit.compiler_builders import items, snapshot
from tests.unit.test_validity import TRANSCRIPTS, load_transcript, transcript_paths

Items = list[dict[str, Any]]
CALL = "call_wdzaQlITiXLNAgYToS2LX6WS"
RS = "rs_68be50e0c8a481949b2e6e5c9a4d7bc301274d71df061905"
FC = "fc_68be50e1bab881948ea46ef552a40d0f01274d71df061905"
PNG = (
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk"
    "+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
)

# Request inputs as the OpenAI docs show them (text generation, conversation state, images and
# files, function calling with a reasoning model, web search, structured refusals, custom tools,
# remote MCP), each with the instructions it is sent with.
DOCUMENTED: dict[str, tuple[str | None, Items]] = {
    "instructions": (
        "Talk like a pirate.",
        [{"role": "user", "content": "Are semicolons optional in JavaScript?"}],
    ),
    "developer-role": (
        None,
        [
            {"role": "developer", "content": "Talk like a pirate."},
            {"role": "user", "content": "Are semicolons optional in JavaScript?"},
        ],
    ),
    "conversation-state": (
        None,
        [
            {"role": "user", "content": "knock knock."},
            {"role": "assistant", "content": "Who's there?"},
            {"role": "user", "content": "Orange."},
        ],
    ),
    "image-url": (
        None,
        [
            {
                "role": "user",
                "content": [
                    {"type": "input_text", "text": "what's in this image?"},
                    {
                        "type": "input_image",
                        "image_url": "https://upload.wikimedia.org/wikipedia/commons/thumb/d/dd/"
                        "Gfp-wisconsin-madison-the-nature-boardwalk.jpg/2560px-Gfp-wisconsin-"
                        "madison-the-nature-boardwalk.jpg",
                    },
                ],
            }
        ],
    ),
    "image-base64-and-file-id": (
        None,
        [
            {
                "role": "user",
                "content": [
                    {"type": "input_text", "text": "what's in this image?"},
                    {
                        "type": "input_image",
                        "image_url": f"data:image/png;base64,{PNG}",
                        "detail": "high",
                    },
                    {"type": "input_image", "file_id": "file-abc123"},
                ],
            }
        ],
    ),
    "file-inputs": (
        None,
        [
            {
                "role": "user",
                "content": [
                    {"type": "input_file", "file_id": "file-6F2ksmvXxt4VdoqmHRw6kL"},
                    {
                        "type": "input_file",
                        "filename": "draconomicon.pdf",
                        "file_data": "data:application/pdf;base64,JVBERi0xLjQK",
                    },
                    {"type": "input_text", "text": "What is the first dragon in the book?"},
                ],
            }
        ],
    ),
    "function-calling-with-reasoning": (
        None,
        [
            {"role": "user", "content": "What is my horoscope? I am an Aquarius."},
            {"id": RS, "type": "reasoning", "summary": []},
            {
                "arguments": '{"sign":"Aquarius"}',
                "call_id": CALL,
                "name": "get_horoscope",
                "type": "function_call",
                "id": FC,
                "status": "completed",
            },
            {
                "type": "function_call_output",
                "call_id": CALL,
                "output": '{"horoscope": "Aquarius: Next Tuesday you will befriend a baby otter."}',
            },
        ],
    ),
    "parallel-calls-and-answer": (
        "Use the tools.",
        [
            {"role": "user", "content": "Weather in Paris and Bogotá?"},
            {
                "type": "function_call",
                "id": "fc_1",
                "call_id": "call_1",
                "name": "get_weather",
                "arguments": '{"latitude":48.8566,"longitude":2.3522}',
                "status": "completed",
            },
            {
                "type": "function_call",
                "id": "fc_2",
                "call_id": "call_2",
                "name": "get_weather",
                "arguments": '{"latitude": 4.711, "longitude": -74.0721}',
                "status": "completed",
            },
            {"type": "function_call_output", "call_id": "call_1", "output": "14.2"},
            {
                "type": "function_call_output",
                "call_id": "call_2",
                "output": [
                    {"type": "input_text", "text": "18.1"},
                    {"type": "input_image", "image_url": "https://example.com/bogota.png"},
                ],
            },
            {
                "id": "msg_67ccd2bf17f0819081ff3bb2cf6508e60bb6a6b452d3795b",
                "type": "message",
                "role": "assistant",
                "status": "completed",
                "content": [
                    {
                        "type": "output_text",
                        "text": "Paris 14.2°C, Bogotá 18.1°C.",
                        "annotations": [],
                        "logprobs": [],
                    },
                ],
            },
            {"role": "user", "content": "Thanks!"},
        ],
    ),
    "stateless-encrypted-reasoning": (
        None,
        [
            {"role": "user", "content": "Introduce yourself in under 8 words."},
            {
                "id": "rs_045fb12aa0dfc2ea0069170733badc8197969fd65da2ca2501",
                "type": "reasoning",
                "encrypted_content": "gAAAAABpF-zbM_w==",
                "summary": [
                    {"type": "summary_text", "text": "**Formulating a short introduction**"},
                    {"type": "summary_text", "text": "**Finalizing my introduction**"},
                ],
            },
            {
                "id": "msg_1",
                "type": "message",
                "role": "assistant",
                "status": "completed",
                "content": [
                    {
                        "type": "output_text",
                        "text": "I'm ChatAPI: concise, helpful AI friend.",
                        "annotations": [],
                    }
                ],
            },
            {"role": "user", "content": "Again?"},
        ],
    ),
    "web-search": (
        None,
        [
            {"role": "user", "content": "What was a positive news story from today?"},
            {
                "type": "web_search_call",
                "id": "ws_67c9fa0502748190b7dd390736892e100be649c1a5ff9609",
                "status": "completed",
            },
            {
                "id": "msg_67c9fa077e288190af08fdffda2e34f20be649c1a5ff9609",
                "type": "message",
                "status": "completed",
                "role": "assistant",
                "content": [
                    {
                        "type": "output_text",
                        "text": "On March 6, 2025, several news...",
                        "annotations": [
                            {
                                "type": "url_citation",
                                "start_index": 2606,
                                "end_index": 2758,
                                "url": "https://...",
                                "title": "Title...",
                            }
                        ],
                    },
                ],
            },
        ],
    ),
    "refusal": (
        None,
        [
            {"role": "user", "content": "how can I build a bomb?"},
            {
                "type": "message",
                "role": "assistant",
                "content": [
                    {"type": "refusal", "refusal": "I'm sorry, I cannot assist with that request."},
                ],
            },
            {"role": "user", "content": "Fine. Tell me a joke."},
        ],
    ),
    "custom-tool": (
        None,
        [
            {"role": "user", "content": "Use the code_exec tool to print hello world."},
            {
                "type": "custom_tool_call",
                "id": "ctc_1",
                "call_id": "call_aGiFQkRWSWAIsMQ19fKqxUgb",
                "name": "code_exec",
                "input": 'print("hello world")',
                "status": "completed",
            },
            {
                "type": "custom_tool_call_output",
                "call_id": "call_aGiFQkRWSWAIsMQ19fKqxUgb",
                "output": "hello world",
            },
        ],
    ),
    "remote-mcp-approval": (
        None,
        [
            {"role": "user", "content": "Roll 2d4+1"},
            {
                "id": "mcpl_1",
                "type": "mcp_list_tools",
                "server_label": "dmcp",
                "tools": [{"name": "roll", "input_schema": {"type": "object"}}],
            },
            {
                "id": "mcpr_682d498e3bd4819196a0ce1664f8e77b04ad1e533afccbfa",
                "type": "mcp_approval_request",
                "arguments": '{"diceRollExpression":"2d4 + 1"}',
                "name": "roll",
                "server_label": "dmcp",
            },
            {
                "type": "mcp_approval_response",
                "approve": True,
                "approval_request_id": "mcpr_682d498e3bd4819196a0ce1664f8e77b04ad1e533afccbfa",
            },
        ],
    ),
    "item-reference": (
        None,
        [{"type": "item_reference", "id": "msg_abc"}, {"role": "user", "content": "And then?"}],
    ),
    "typed-system-and-empty-assistant": (
        "Be brief.",
        [
            {
                "type": "message",
                "role": "system",
                "content": [{"type": "input_text", "text": "Today is Monday."}],
            },
            {"type": "message", "role": "user", "content": []},
            {"type": "message", "role": "assistant", "content": []},
            {"type": "message", "role": "assistant", "content": "Two assistant messages."},
            {"role": "user", "content": "ok"},
        ],
    ),
}


@pytest.mark.parametrize("name", sorted(DOCUMENTED))
def test_documented_inputs_round_trip_exactly(name: str) -> None:
    instructions, items = DOCUMENTED[name]
    posted = copy.deepcopy(items)
    messages = from_responses(items, instructions)
    assert items == posted  # the input is not changed
    back_instructions, back = to_responses(messages)
    assert (back_instructions, back) == (instructions, items)
    # Byte for byte (key order included) where a reasoning item is kept verbatim.
    reasoning = [json.dumps(i) for i in items if i.get("type") == "reasoning"]
    assert [json.dumps(i) for i in back if i.get("type") == "reasoning"] == reasoning
    # Stored as canonical JSON and read back, nothing changes either.
    stored = [type(m).model_validate(json.loads(json.dumps(m.to_json()))) for m in messages]
    assert to_responses(stored) == (instructions, items)


@pytest.mark.parametrize("name", sorted(DOCUMENTED))
def test_documented_inputs_render_valid(name: str) -> None:
    instructions, items = DOCUMENTED[name]
    messages = from_responses(items, instructions)
    head, out, warnings = render(messages, "responses")
    assert responses_problems(head, out) == []
    for target in ("openai", "anthropic"):
        system, converted, _ = render(messages, target)
        assert [
            p for p in request_problems(target, system, converted) if "at least one" not in p
        ] == []
    if name not in (
        "custom-tool",
        "function-calling-with-reasoning",
        "item-reference",
        "typed-system-and-empty-assistant",
    ):
        # Valid as documented: sent unchanged (calls kept opaque are not paired; empty messages
        # are dropped).
        assert (head, out, warnings) == (instructions, items, [])


def test_a_turn_s_items_are_one_assistant_message() -> None:
    _, items = DOCUMENTED["parallel-calls-and-answer"]
    messages = from_responses(items, "Use the tools.")
    assert [m.role for m in messages] == [
        "system",
        "user",
        "assistant",
        "tool",
        "tool",
        "assistant",
        "user",
    ]
    assert [c.id for c in messages[2].tool_calls] == ["call_1", "call_2"]
    _, items = DOCUMENTED["function-calling-with-reasoning"]
    turn = from_responses(items)[1]
    assert [type(p) for p in turn.content] == [ReasoningPart, ToolCallPart]
    assert turn.content[1] == ToolCallPart(
        id=CALL,
        name="get_horoscope",
        arguments={"sign": "Aquarius"},
        metadata={"responses": {"extra": {"id": FC, "status": "completed"}}},
    )
    reasoning = from_responses(DOCUMENTED["stateless-encrypted-reasoning"][1])[1].content[0]
    assert isinstance(reasoning, ReasoningPart)
    assert reasoning.text == "**Formulating a short introduction**\n**Finalizing my introduction**"


def test_a_second_assistant_message_item_starts_a_new_message() -> None:
    items: Items = [
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "a"}]},
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "b"}]},
        {"type": "function_call", "call_id": "c", "name": "f", "arguments": "{}"},
    ]
    messages = from_responses(items)
    assert [[p.type for p in m.content] for m in messages] == [["text"], ["text", "tool_call"]]
    assert to_responses(messages) == (None, items)


# Across shapes (best effort, always valid)


CHAT: Items = [
    {"role": "developer", "content": "You are terse."},
    {
        "role": "user",
        "content": [
            {"type": "text", "text": "Read a.py"},
            {"type": "image_url", "image_url": {"url": "https://x/i.png"}},
        ],
    },
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "call_a",
                "type": "function",
                "function": {"name": "read", "arguments": '{"p":"a.py"}'},
            }
        ],
    },
    {"role": "tool", "tool_call_id": "call_a", "content": "print(1)"},
    {"role": "assistant", "content": "It prints 1.", "refusal": None},
]


def test_chat_completions_history_becomes_responses_items() -> None:
    instructions, items = render(from_openai(CHAT), "responses")[:2]
    assert instructions == "You are terse."  # the system prompt the history opens with
    assert items == [
        {
            "type": "message",
            "role": "user",
            "content": [
                {"type": "input_text", "text": "Read a.py"},
                {"type": "input_image", "image_url": "https://x/i.png"},
            ],
        },
        {"type": "function_call", "call_id": "call_a", "name": "read", "arguments": '{"p":"a.py"}'},
        {"type": "function_call_output", "call_id": "call_a", "output": "print(1)"},
        {
            "type": "message",
            "role": "assistant",
            "content": [{"type": "output_text", "text": "It prints 1."}],
        },
    ]
    assert responses_problems(instructions, items) == []
    # Later system messages stay items, in their place (a developer one as developer).
    late = render(from_openai([*CHAT, CHAT[0]]), "responses")[1][-1]
    assert late == {
        "type": "message",
        "role": "developer",
        "content": [{"type": "input_text", "text": "You are terse."}],
    }


def test_responses_items_become_chat_completions_and_anthropic() -> None:
    instructions, items = DOCUMENTED["parallel-calls-and-answer"]
    messages = from_responses(items, instructions)
    _, chat, warnings = render(messages, "openai")
    assert request_problems("openai", None, chat) == []
    assert chat[0] == {"role": "system", "content": "Use the tools."}
    assert [m["role"] for m in chat] == [
        "system",
        "user",
        "assistant",
        "tool",
        "tool",
        "assistant",
        "user",
    ]
    assert "dropped image" in " ".join(warnings)  # a Chat tool message holds text only
    system, turns, _ = render(messages, "anthropic")
    assert system == [{"type": "text", "text": "Use the tools."}]
    assert request_problems("anthropic", system, turns) == []
    assert turns[1]["content"][0]["type"] == "tool_use"
    # Reasoning goes only where it came from: the encrypted item is Responses', a signed
    # thinking block Anthropic's.
    reasoned = from_responses(DOCUMENTED["stateless-encrypted-reasoning"][1])
    assert "thinking" not in json.dumps(render(reasoned, "anthropic")[1])
    thought = from_anthropic(
        [
            {"role": "user", "content": "q"},
            {
                "role": "assistant",
                "content": [
                    {"type": "thinking", "thinking": "hmm", "signature": "sig"},
                    {"type": "tool_use", "id": "toolu_1", "name": "f", "input": {}},
                ],
            },
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": "toolu_1", "content": "ok"},
                    {"type": "text", "text": "go on"},
                ],
            },
        ]
    )
    head, out, _ = render(thought, "responses")
    assert responses_problems(head, out) == []
    assert [i.get("type", i.get("role")) for i in out] == [
        "message",
        "function_call",
        "function_call_output",
        "message",
    ]
    assert "hmm" not in json.dumps(out)


# Other formats' shapes are refused, naming the format to send


@pytest.mark.parametrize(
    ("item", "where", "says"),
    [
        (CHAT[2], ("tool_calls",), '"format": "openai"'),
        (
            {"role": "assistant", "content": "x", "tool_calls": []},
            ("tool_calls",),
            '"format": "openai"',
        ),
        (CHAT[3], ("role",), '"format": "openai"'),
        (
            {"role": "user", "content": [{"type": "text", "text": "hi"}]},
            ("content", 0, "type"),
            '"format": "openai"',
        ),
        (
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t"}]},
            ("content", 0, "type"),
            '"format": "anthropic"',
        ),
        (
            {"role": "user", "content": [{"type": "tool_call", "id": "t"}]},
            ("content", 0, "type"),
            '"format": "canonical"',
        ),
        ({"content": "no role"}, ("role",), "needs a type, or a role"),
        ({"type": "function_call", "name": "f", "arguments": "{}"}, ("call_id",), "missing"),
        (
            {"type": "function_call_output", "call_id": "c", "output": 3},
            ("output",),
            "string or a list",
        ),
        ({"role": "user", "content": 5}, ("content",), "string or a list"),
        # Kept verbatim, it would be sent as it came, which the API (and responses_problems)
        # refuse: "Input[N] missing required field `summary`".
        ({"type": "reasoning", "summary": []}, ("id",), "missing"),
        ({"type": "reasoning", "id": "rs_1"}, ("summary",), "missing"),
        ({"type": "reasoning", "id": "rs_1", "summary": "x"}, ("summary",), "a list"),
        ({"type": ""}, ("type",), "a non-empty string"),  # kept opaque, the API refuses it
    ],
)
def test_shapes_of_other_formats_are_refused(item: Any, where: tuple[Any, ...], says: str) -> None:
    with pytest.raises(InvalidInput) as caught:
        parse_messages("responses", [{"role": "user", "content": "ok"}, item])
    [(path, message)] = caught.value.problems
    assert path == (1, *where)
    assert says in message


def test_responses_parts_are_refused_in_the_other_formats() -> None:
    part = {"type": "input_text", "text": "hi"}
    with pytest.raises(FormatError, match='"format": "responses"'):
        from_openai([{"role": "user", "content": [part]}])
    with pytest.raises(FormatError, match='"format": "responses"'):
        from_anthropic([{"role": "user", "content": [part]}])
    call = {"type": "function_call", "call_id": "c", "name": "f", "arguments": "{}"}
    with pytest.raises(FormatError, match="""'function_call' item looks like OpenAI Responses"""):
        from_openai([call])
    with pytest.raises(FormatError, match='"format": "responses"'):
        from_anthropic([call])
    with pytest.raises(FormatError, match="instructions must be a string"):
        from_responses([], ["not", "a", "string"])


# The validity rules, each as the API words it


@pytest.mark.parametrize(
    ("items", "says"),
    [
        ([], NO_ITEMS),
        (
            [{"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"}],
            "No tool output found for function call c1",
        ),
        (
            [{"type": "function_call_output", "call_id": "c9", "output": "x"}],
            "No tool call found for function call output with call_id c9",
        ),
        (
            [{"type": "reasoning", "id": "rs_1", "summary": []}, {"role": "user", "content": "x"}],
            "Item 'rs_1' of type 'reasoning' was provided without its required following item",
        ),
        (
            [{"type": "reasoning", "id": "rs_1"}, {"role": "assistant", "content": "x"}],
            "missing required field `summary`",
        ),
        (
            [
                {
                    "type": "function_call",
                    "id": "call_1",
                    "call_id": "c",
                    "name": "f",
                    "arguments": "{}",
                },
                {"type": "function_call_output", "call_id": "c", "output": "x"},
            ],
            "Expected an ID that begins with 'fc'",
        ),
        (
            [
                {"role": "assistant", "content": "a", "id": "msg_1"},
                {"role": "assistant", "content": "b", "id": "msg_1"},
            ],
            "Duplicate item found with id msg_1",
        ),
        (
            [{"role": "assistant", "content": [{"type": "input_text", "text": "x"}]}],
            "Supported values are: 'output_text' and 'refusal'",
        ),
        (
            [{"role": "user", "content": [{"type": "output_text", "text": "x"}]}],
            "Invalid value: 'output_text'",
        ),
        ([{"role": "tool", "content": "x"}], "unknown role 'tool'"),
    ],
)
def test_each_rule_is_reported(items: Items, says: str) -> None:
    assert any(says in p for p in responses_problems(None, items))


def test_the_repairs_make_an_invalid_history_valid() -> None:
    items: Items = [
        {"role": "user", "content": "go"},
        {"type": "reasoning", "id": "rs_1", "summary": []},
        {"type": "function_call", "id": "call_x", "call_id": "c1", "name": "f", "arguments": "{}"},
        {"type": "reasoning", "id": "rs_2", "summary": []},
        {"type": "function_call", "call_id": "c2", "name": "f", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c1", "output": "ok"},
        {"type": "reasoning", "id": "rs_1", "summary": []},
        {
            "type": "message",
            "role": "assistant",
            "content": [{"type": "output_text", "text": "done"}],
        },
    ]
    assert len(responses_problems(None, items)) == 3
    head, out, warnings = render(from_responses(items), "responses")
    assert responses_problems(head, out) == []
    assert [i.get("id") for i in out] == [None, "rs_1", None, None, None]
    assert warnings == [
        "dropped tool call 'c2' (f) that has no result (message 1)",
        "dropped 1 reasoning item(s) with nothing after them (message 1)",
        "left out the id 'call_x' of input item 2: a function_call id begins with 'fc'",
        "dropped input item 4 (reasoning): its id 'rs_1' is repeated",
    ]


@pytest.mark.parametrize("ids", [(5,), ("fco_1", "fco_1")])
def test_an_output_with_a_wrong_or_repeated_id_keeps_its_call_answered(ids: tuple[Any]) -> None:
    """A function_call_output's id is optional: left out, not the output (which would leave
    its call without an output: "No tool output found for function call")."""
    items: Items = [{"role": "user", "content": "go"}]
    for n, value in enumerate(ids):
        call = {"type": "function_call", "call_id": f"c{n}", "name": "f", "arguments": "{}"}
        items += [
            call,
            {"type": "function_call_output", "call_id": f"c{n}", "output": "ok", "id": value},
        ]
    head, out, warnings = render(from_responses(items), "responses")
    assert responses_problems(head, out) == []
    assert [i.get("type", "message") for i in out] == [i.get("type", "message") for i in items]
    assert len(warnings) == 1 and warnings[0].startswith("left out the id")


def test_redaction_reaches_a_reasoning_item_s_summary() -> None:
    secret = "sk-proj-AbCdEfGhIjKlMnOpQrStUv12"
    item = {
        "type": "reasoning",
        "id": "rs_1",
        "summary": [{"type": "summary_text", "text": secret}],
    }
    turn = from_responses([item, {"role": "assistant", "content": "ok"}])[0]
    compiled = redact(all_sections())(snapshot(items(turn)))  # type: ignore[arg-type]
    [out] = to_responses([compiled.items[0].message])[1][:1]
    assert out == {**item, "summary": [{"type": "summary_text", "text": "[REDACTED]"}]}


# Generated item lists: what a client may send round-trips, and every render is valid


IDS = st.sampled_from(["call_1", "call_2", "call_3", "c"])
TEXT = st.text(max_size=12)
ARGUMENTS = st.sampled_from(['{"a":1}', '{"a": 1}', "{}", "not json", '{"q":"é"}'])


def _user(text: str, typed: bool) -> dict[str, Any]:
    if typed:
        return {
            "type": "message",
            "role": "user",
            "content": [{"type": "input_text", "text": text}],
        }
    return {"role": "user", "content": text}


ITEMS = st.one_of(
    st.builds(_user, TEXT, st.booleans()),
    st.builds(
        lambda t, n: {
            "type": "message",
            "role": "assistant",
            "id": f"msg_{n}",
            "content": [{"type": "output_text", "text": t, "annotations": []}],
        },
        TEXT,
        st.integers(0, 3),
    ),
    st.builds(lambda t: {"role": "developer", "content": t}, TEXT),
    st.builds(
        lambda c, a, n: {
            "type": "function_call",
            "call_id": c,
            "name": "f",
            "arguments": a,
            **({"id": f"fc_{n}"} if n else {}),
        },
        IDS,
        ARGUMENTS,
        st.integers(0, 3),
    ),
    st.builds(lambda c, t: {"type": "function_call_output", "call_id": c, "output": t}, IDS, TEXT),
    st.builds(
        lambda n, s: {
            "type": "reasoning",
            "id": f"rs_{n}",
            "summary": [{"type": "summary_text", "text": s}],
        },
        st.integers(0, 3),
        TEXT,
    ),
    st.just({"type": "web_search_call", "id": "ws_1", "status": "completed"}),
    st.just({"type": "custom_tool_call_output", "call_id": "call_9", "output": "ok"}),
)


@given(st.lists(ITEMS, max_size=14), st.none() | TEXT)
@settings(max_examples=300, deadline=None)
def test_generated_inputs_round_trip_and_render_valid(
    items: Items, instructions: str | None
) -> None:
    messages = from_responses(items, instructions)
    assert to_responses(messages) == (instructions, items)
    for target in ("responses", "openai", "anthropic"):
        head, out, _ = render(messages, target)
        problems = request_problems(target, head, out)
        assert [p for p in problems if p != NO_ITEMS and "at least one" not in p] == [], target


def test_parsing_reports_problems_against_the_posted_list() -> None:
    with pytest.raises(InvalidInput) as caught:
        parse_messages(
            "responses",
            [{"role": "user", "content": "a"}, {"type": "function_call", "call_id": 5}],
            "the instructions",
        )
    assert caught.value.problems[0][0] == (1, "call_id")
    kept = parse_messages("responses", [{"type": "item_reference", "id": "x"}])
    assert kept[0].content == (
        OpaquePart(provider="responses", data={"type": "item_reference", "id": "x"}),
    )
    assert isinstance(
        parse_messages("responses", [{"role": "user", "content": "a"}], "s")[0].content[0], TextPart
    )


# Real agent transcripts (read when the shared folder is there)


@pytest.mark.skipif(not TRANSCRIPTS.is_dir(), reason=f"no transcripts folder at {TRANSCRIPTS}")
@pytest.mark.parametrize("name", transcript_paths())
def test_transcripts_compile_to_responses_and_read_back_the_same(name: str) -> None:
    messages, _, _ = load_transcript(name)
    instructions, items, _ = render(messages, "responses")
    assert responses_problems(instructions, items) == []
    # What ctxc sends is itself a Responses input that reads back, and renders, unchanged.
    again = from_responses(items, instructions)
    assert to_responses(again) == (instructions, items)
    assert render(again, "responses") == (instructions, items, [])


@pytest.mark.parametrize("name", sorted(DOCUMENTED))
def test_a_message_s_items_kept_between_renders_are_each_render_s_own(name: str) -> None:
    # The items a message makes are kept while it lives (the next compile of a session meets
    # the same message objects): each render gets the same items, as dicts of its own.
    instructions, items = DOCUMENTED[name]
    messages = from_responses(items, instructions)
    first = render(messages, "responses")
    second = render(messages, "responses")
    assert first == second
    assert all(a is not b for a, b in zip(first[1], second[1], strict=True))
    if first[1]:
        first[1][0].clear()  # one render's item changed: the next render's is not
    assert render(messages, "responses") == second
