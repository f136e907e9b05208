"""The Gemini ``generateContent`` shape: lossless round trips of documented requests, the
canonical mapping, cross-shape conversion, refusals, the request shaping and its validator."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.domain.errors import FormatError, InvalidInput
from app.domain.formats.anthropic import from_anthropic
from app.domain.formats.convert import parse_messages
from app.domain.formats.gemini import from_gemini, to_gemini
from app.domain.formats.openai import from_openai
from app.domain.messages import (
    ImagePart,
    Message,
    OpaquePart,
    ReasoningPart,
    TextPart,
    ToolCallPart,
    ToolResultPart,
)
from app.domain.validity import anthropic_problems, gemini_problems, openai_problems, render

# Requests recorded from the Gemini API documentation (REST, camelCase as the API answers).

# https://ai.google.dev/gemini-api/docs/text-generation (system instructions, multi-turn chat)
CHAT_SYSTEM = {"parts": [{"text": "You are a cat. Your name is Neko."}]}
CHAT = [
    {"role": "user", "parts": [{"text": "Hello"}]},
    {"role": "model", "parts": [{"text": "Great to meet you. What would you like to know?"}]},
    {
        "role": "user",
        "parts": [{"text": "I have two dogs in my house. How many paws are in my house?"}],
    },
]

# https://ai.google.dev/gemini-api/docs/function-calling (the lighting example)
LIGHTS_SYSTEM = {
    "parts": [
        {
            "text": "You are a helpful lighting system bot. You can turn lights on and off, and "
            "you can set the color. Do not perform any other tasks."
        }
    ]
}
LIGHTS = [
    {"role": "user", "parts": [{"text": "Turn the lights down to a romantic level"}]},
    {
        "role": "model",
        "parts": [
            {
                "functionCall": {
                    "name": "set_light_values",
                    "args": {"brightness": 25, "color_temp": "warm"},
                }
            }
        ],
    },
    {
        "role": "user",
        "parts": [
            {
                "functionResponse": {
                    "name": "set_light_values",
                    "response": {"result": {"brightness": 25, "colorTemperature": "warm"}},
                }
            }
        ],
    },
]

# https://ai.google.dev/gemini-api/docs/thought-signatures (sequential function calling)
FLIGHT = [
    {
        "role": "user",
        "parts": [
            {"text": "Check flight status for AA100 and book a taxi 2 hours before if delayed."}
        ],
    },
    {
        "role": "model",
        "parts": [
            {
                "functionCall": {"name": "check_flight", "args": {"flight": "AA100"}},
                "thoughtSignature": "<Signature A>",
            }
        ],
    },
    {
        "role": "user",
        "parts": [
            {
                "functionResponse": {
                    "name": "check_flight",
                    "response": {"status": "delayed", "departure_time": "12 PM"},
                }
            }
        ],
    },
    {
        "role": "model",
        "parts": [
            {
                "functionCall": {"name": "book_taxi", "args": {"time": "10 AM"}},
                "thoughtSignature": "<Signature B>",
            }
        ],
    },
    {
        "role": "user",
        "parts": [
            {"functionResponse": {"name": "book_taxi", "response": {"booking_status": "success"}}}
        ],
    },
]

# https://ai.google.dev/gemini-api/docs/thought-signatures (parallel function calling: only the
# first call carries the signature)
WEATHER = [
    {"role": "user", "parts": [{"text": "Check the weather in Paris and London."}]},
    {
        "role": "model",
        "parts": [
            {
                "functionCall": {"name": "get_current_temperature", "args": {"location": "Paris"}},
                "thoughtSignature": "<Signature_A>",
            },
            {"functionCall": {"name": "get_current_temperature", "args": {"location": "London"}}},
        ],
    },
    {
        "role": "user",
        "parts": [
            {"functionResponse": {"name": "get_current_temperature", "response": {"temp": "15C"}}},
            {"functionResponse": {"name": "get_current_temperature", "response": {"temp": "12C"}}},
        ],
    },
]

# https://ai.google.dev/gemini-api/docs/thinking (thought summaries) and
# https://ai.google.dev/gemini-api/docs/code-execution (code parts kept verbatim)
THOUGHTS_AND_CODE = [
    {"role": "user", "parts": [{"text": "What is the sum of the first 50 prime numbers?"}]},
    {
        "role": "model",
        "parts": [
            {"text": "**Calculating the sum**\n\nI will write code for it.", "thought": True},
            {
                "executableCode": {
                    "language": "PYTHON",
                    "code": "primes = []\nn = 2\nwhile len(primes) < 50:\n"
                    "    if all(n % p for p in primes):\n        primes.append(n)\n"
                    "    n += 1\nprint(sum(primes))\n",
                }
            },
            {"codeExecutionResult": {"outcome": "OUTCOME_OK", "output": "5117\n"}},
            {"text": "The sum of the first 50 prime numbers is 5117.", "thoughtSignature": "c2ln"},
        ],
    },
    {
        "role": "user",
        "parts": [
            {"inlineData": {"mimeType": "image/jpeg", "data": "/9j/4AAQSkZJRg=="}},
            {
                "fileData": {
                    "mimeType": "application/pdf",
                    "fileUri": "https://generativelanguage.googleapis.com/v1beta/files/abc",
                }
            },
            {"text": "And what is in these?"},
        ],
    },
]

# Gemini 3 function calls carry ids, answered by the responses' ids.
WITH_IDS = [
    {"role": "user", "parts": [{"text": "What is the weather in Boston?"}]},
    {
        "role": "model",
        "parts": [
            {
                "functionCall": {"id": "8f2b1a", "name": "get_weather", "args": {"city": "Boston"}},
                "thoughtSignature": "EqoBCqcB",
            }
        ],
    },
    {
        "role": "user",
        "parts": [
            {
                "functionResponse": {
                    "id": "8f2b1a",
                    "name": "get_weather",
                    "response": {"output": "Sunny, 21C"},
                }
            }
        ],
    },
]

DOCUMENTED = {
    "chat": (CHAT_SYSTEM, CHAT),
    "lights": (LIGHTS_SYSTEM, LIGHTS),
    "flight": (None, FLIGHT),
    "weather": (None, WEATHER),
    "thoughts_and_code": (None, THOUGHTS_AND_CODE),
    "with_ids": (None, WITH_IDS),
}


@pytest.mark.parametrize("name", DOCUMENTED)
def test_documented_requests_round_trip_losslessly(name: str) -> None:
    system, contents = DOCUMENTED[name]
    before = copy.deepcopy(contents)
    messages = from_gemini(contents, system)
    assert contents == before  # the input is never modified
    assert to_gemini(messages) == (system, contents)
    # Stored as canonical JSON and read back, nothing is lost either.
    stored = [Message.model_validate(json.loads(json.dumps(m.to_json()))) for m in messages]
    assert to_gemini(stored) == (system, contents)


@pytest.mark.parametrize("name", DOCUMENTED)
def test_documented_requests_compile_valid_for_every_provider(name: str) -> None:
    system, contents = DOCUMENTED[name]
    messages = from_gemini(contents, system)
    out_system, out, warnings = render(messages, "gemini")
    assert gemini_problems(out_system, out) == []
    if name != "thoughts_and_code":  # its user image needs no change; the code parts are kept
        assert (out_system, out, warnings) == (system, contents, [])
    assert openai_problems(render(messages, "openai")[1]) == []
    anthropic_system, turns, _ = render(messages, "anthropic")
    assert anthropic_problems(anthropic_system, turns) == []
    assert "Signature" not in json.dumps(turns)  # Gemini signatures never reach Anthropic


def test_the_canonical_mapping() -> None:
    messages = from_gemini(FLIGHT + THOUGHTS_AND_CODE[1:], {"parts": [{"text": "Be brief."}]})
    assert [m.role for m in messages] == [
        "system",
        "user",
        "assistant",
        "tool",
        "assistant",
        "tool",
        "assistant",
        "user",
    ]
    call, result = messages[2].content[0], messages[3].content[0]
    assert isinstance(call, ToolCallPart) and isinstance(result, ToolResultPart)
    # Ids made from the function name and its place among the turn's calls, so a response
    # appended in another batch still answers its call.
    assert call.id == result.call_id == "check_flight_0"
    assert call.arguments == {"flight": "AA100"}
    assert json.loads(str(result.content)) == {"status": "delayed", "departure_time": "12 PM"}
    thought, code, outcome, answer = messages[6].content
    assert isinstance(thought, ReasoningPart) and thought.signature is None
    assert isinstance(code, OpaquePart) and code.provider == "gemini"
    assert isinstance(outcome, OpaquePart)
    assert isinstance(answer, TextPart) and answer.metadata == {
        "gemini": {"extra": {"thoughtSignature": "c2ln"}}
    }
    image, document, _ = messages[7].content
    assert isinstance(image, ImagePart) and image.media_type == "image/jpeg"
    assert isinstance(document, OpaquePart)


def test_parallel_calls_get_one_id_each_and_responses_pair_in_order() -> None:
    messages = from_gemini(WEATHER)
    assert [c.id for c in messages[1].tool_calls] == [
        "get_current_temperature_0",
        "get_current_temperature_1",
    ]
    assert [r.call_id for r in messages[2].tool_results] == [
        "get_current_temperature_0",
        "get_current_temperature_1",
    ]
    # Appended one content per batch, the ids are the same.
    alone = [from_gemini([content])[0] for content in WEATHER]
    assert alone == messages


def test_plain_output_and_error_responses_read_as_text() -> None:
    contents = [
        {"role": "user", "parts": [{"text": "run it"}]},
        {
            "role": "model",
            "parts": [
                {"functionCall": {"name": "sh", "args": {"cmd": "ls"}}},
                {"functionCall": {"name": "sh"}},
            ],
        },
        {
            "role": "user",
            "parts": [
                {"functionResponse": {"name": "sh", "response": {"output": "a.py"}}},
                {"functionResponse": {"name": "sh", "response": {"error": "no such file"}}},
            ],
        },
    ]
    messages = from_gemini(contents)
    first, second = messages[2].tool_results
    assert (first.content, first.is_error) == ("a.py", None)
    assert (second.content, second.is_error) == ("no such file", True)
    assert to_gemini(messages) == (None, contents)
    # As OpenAI sees them: the texts, not Gemini's wrappers.
    tool_messages = render(messages, "openai")[1][2:]
    assert [m["content"] for m in tool_messages] == ["a.py", "no such file"]


def test_sdk_dumps_with_null_fields_read_as_the_request() -> None:
    dumped = [
        {
            "role": "user",
            "parts": [
                {"text": "hi", "thought": None, "inlineData": None, "functionCall": None},
            ],
        },
        {
            "role": "model",
            "parts": [
                {"functionCall": {"name": "f", "args": {"x": None}, "id": None}},
            ],
        },
    ]
    messages = from_gemini(dumped)
    assert to_gemini(messages)[1] == [
        {"role": "user", "parts": [{"text": "hi"}]},
        {"role": "model", "parts": [{"functionCall": {"name": "f", "args": {"x": None}}}]},
    ]


@pytest.mark.parametrize(
    ("contents", "system", "path", "words"),
    [
        ("nope", None, (), "contents must be a list"),
        ([{"role": "assistant", "content": "hi"}], None, (0, "role"), "looks like OpenAI"),
        ([{"role": "user", "content": "hi"}], None, (0, "parts"), "parts must be a list"),
        (
            [{"role": "user", "parts": [{"type": "text", "text": "hi"}]}],
            None,
            (0, "parts", 0, "type"),
            'send "format": "openai"',
        ),
        (
            [{"role": "user", "parts": [{"text": "a", "inlineData": {}}]}],
            None,
            (0, "parts", 0),
            "exactly one of",
        ),
        (
            [{"role": "user", "parts": [{"thoughtSignature": "x"}]}],
            None,
            (0, "parts", 0),
            "a part needs one of",
        ),
        (
            [{"role": "model", "parts": [{"function_call": {"name": "f"}}]}],
            None,
            (0, "parts", 0, "function_call"),
            "'functionCall'",
        ),
        (
            [{"role": "model", "parts": [{"functionCall": {"name": "f", "args": "{}"}}]}],
            None,
            (0, "parts", 0, "functionCall", "args"),
            "args must be an object",
        ),
        (
            [{"role": "user", "parts": [{"functionResponse": {"name": "f", "response": "ok"}}]}],
            None,
            (0, "parts", 0, "functionResponse", "response"),
            "response must be an object",
        ),
        (
            [{"role": "user", "parts": [{"functionResponse": {"response": {}}}]}],
            None,
            (0, "parts", 0, "functionResponse", "name"),
            "'name' is missing",
        ),
        (
            [],
            {"parts": [{"inlineData": {"mimeType": "image/png", "data": "AA"}}]},
            ("system", "parts", 0),
            "text only",
        ),
        ([], ["be kind"], ("system",), "a Content object"),
        # Kept opaque, it would be sent as it came, which the API (and gemini_problems) refuse.
        (
            [{"role": "user", "parts": [{"inlineData": {"data": 5}}]}],
            None,
            (0, "parts", 0, "inlineData", "mimeType"),
            "'mimeType' is missing",
        ),
        (
            [{"role": "user", "parts": [{"inlineData": {"mimeType": "application/pdf"}}]}],
            None,
            (0, "parts", 0, "inlineData", "data"),
            "'data' is missing",
        ),
        (
            [{"role": "user", "parts": [{"inlineData": {"mimeType": "text/csv", "data": ""}}]}],
            None,
            (0, "parts", 0, "inlineData", "data"),
            "empty",
        ),
    ],
)
def test_malformed_documents_are_refused_naming_the_field(
    contents: Any, system: Any, path: tuple[Any, ...], words: str
) -> None:
    with pytest.raises(FormatError) as caught:
        from_gemini(contents, system)
    assert caught.value.path == path
    assert words in caught.value.message


def test_parse_messages_reports_every_problem_against_the_posted_list() -> None:
    contents = [
        {"role": "user", "parts": [{"text": "fine"}]},
        {"role": "model", "parts": [{"functionResponse": {"name": "f", "response": {}}}]},
        {"role": "bot", "parts": []},
    ]
    with pytest.raises(InvalidInput) as caught:
        parse_messages("gemini", contents, {"parts": [{"text": "sys"}]})
    assert [path for path, _ in caught.value.problems] == [(2, "role")]
    with pytest.raises(InvalidInput) as caught:
        parse_messages("gemini", contents[:2], {"parts": [{"text": "sys"}]})
    # A model turn cannot hold a function response (paths count the posted contents).
    assert [path for path, _ in caught.value.problems] == [(1, "content", 0)]


# Cross-shape conversion, best effort


def test_openai_history_compiles_to_gemini() -> None:
    history = [
        {"role": "system", "content": "Be terse."},
        {"role": "user", "content": "weather in Paris and Rome?"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "weather", "arguments": '{"city": "Paris"}'},
                },
                {
                    "id": "call_2",
                    "type": "function",
                    "function": {"name": "weather", "arguments": "not json"},
                },
            ],
        },
        {"role": "tool", "tool_call_id": "call_2", "content": "rainy"},
        {"role": "tool", "tool_call_id": "call_1", "content": "sunny"},
        {"role": "user", "content": "thanks"},
    ]
    system, contents, warnings = render(from_openai(history), "gemini")
    assert gemini_problems(system, contents) == []
    assert system == {"parts": [{"text": "Be terse."}]}
    assert contents[1]["parts"] == [
        {"functionCall": {"name": "weather", "args": {"city": "Paris"}, "id": "call_1"}},
        {"functionCall": {"name": "weather", "args": {"_raw": "not json"}, "id": "call_2"}},
    ]
    assert contents[2]["parts"] == [
        {"functionResponse": {"name": "weather", "response": {"output": "sunny"}, "id": "call_1"}},
        {"functionResponse": {"name": "weather", "response": {"output": "rainy"}, "id": "call_2"}},
    ]
    assert contents[3] == {"role": "user", "parts": [{"text": "thanks"}]}
    assert any("call order" in w for w in warnings)


def test_anthropic_history_compiles_to_gemini() -> None:
    turns = [
        {"role": "user", "content": "list files"},
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": "use ls", "signature": "anthropic-sig"},
                {"type": "text", "text": "Listing."},
                {"type": "tool_use", "id": "toolu_1", "name": "sh", "input": {"cmd": "ls"}},
            ],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_1",
                    "content": "boom",
                    "is_error": True,
                },
                {"type": "text", "text": "and then?"},
            ],
        },
    ]
    system, contents, warnings = render(from_anthropic(turns, "You help."), "gemini")
    assert gemini_problems(system, contents) == []
    assert "anthropic-sig" not in json.dumps(contents)  # Anthropic thinking does not travel
    assert contents[2:] == [
        {
            "role": "user",
            "parts": [
                {
                    "functionResponse": {
                        "name": "sh",
                        "response": {"error": "boom"},
                        "id": "toolu_1",
                    }
                },
            ],
        },
        {"role": "user", "parts": [{"text": "and then?"}]},
    ]
    assert any("user turn after them" in w for w in warnings)


def test_gemini_history_reads_in_the_other_shapes() -> None:
    messages = from_gemini(FLIGHT)
    openai = render(messages, "openai")[1]
    assert openai[1]["tool_calls"][0]["id"] == "check_flight_0"
    assert openai[2] == {
        "role": "tool",
        "tool_call_id": "check_flight_0",
        "content": '{"status": "delayed", "departure_time": "12 PM"}',
    }


def test_shaping_merges_turns_and_opens_with_a_user_turn() -> None:
    messages = [
        Message(role="assistant", content=(TextPart(text="Hello again."),)),
        Message(role="assistant", content=(TextPart(text="Still there?"),)),
        Message(role="system", content=(TextPart(text="late rule"),)),
        Message(role="user", content=(TextPart(text="yes"),)),
    ]
    system, contents, warnings = render(messages, "gemini")
    assert gemini_problems(system, contents) == []
    assert system == {"parts": [{"text": "late rule"}]}
    assert [c["role"] for c in contents] == ["user", "model", "user"]
    assert len(contents[1]["parts"]) == 2
    assert len(warnings) == 3  # merged, moved the system message, inserted the user turn


def test_urls_and_foreign_parts_are_left_out_with_a_warning() -> None:
    messages = [
        Message(
            role="user",
            content=(
                ImagePart(url="https://example.com/cat.png"),
                OpaquePart(provider="openai", data={"type": "input_audio", "input_audio": {}}),
                TextPart(text="what is this?"),
            ),
        ),
    ]
    _, contents, warnings = render(messages, "gemini")
    assert contents == [{"role": "user", "parts": [{"text": "what is this?"}]}]
    assert any("image" in w for w in warnings)


# The validator


def _call(name: str, **fields: Any) -> dict[str, Any]:
    return {"functionCall": {"name": name, "args": {}, **fields}}


def _response(name: str, **fields: Any) -> dict[str, Any]:
    return {"functionResponse": {"name": name, "response": {}, **fields}}


U = {"role": "user", "parts": [{"text": "hi"}]}


@pytest.mark.parametrize(
    ("system", "contents", "expected"),
    [
        (None, [], "contents is not specified"),
        (None, [{"role": "user", "parts": []}], "contents.parts must not be empty"),
        (None, [{"role": "assistant", "parts": [{"text": "x"}]}], "role must be 'user' or 'model'"),
        (None, [{"role": "model", "parts": [{"text": "x"}]}], "first content must be a user turn"),
        (None, [{"role": "user", "parts": [{"text": "a", "inlineData": {}}]}], "exactly one data"),
        (None, [{"role": "user", "parts": [{"thought": True}]}], "needs a data field"),
        (None, [{"role": "user", "parts": [{"text": ""}]}], "empty text part"),
        (None, [U, {"role": "model", "parts": [_call("f")]}], "without a response turn"),
        (
            None,
            [
                U,
                {"role": "model", "parts": [_call("f"), _call("g")]},
                {"role": "user", "parts": [_response("f")]},
            ],
            "the number of function response parts (1) must equal",
        ),
        (
            None,
            [
                U,
                {"role": "model", "parts": [_call("f"), _call("g")]},
                {"role": "user", "parts": [_response("g"), _response("f")]},
            ],
            "function response 0 names 'g'",
        ),
        (
            None,
            [
                U,
                {"role": "model", "parts": [_call("f", id="1")]},
                {"role": "user", "parts": [_response("f")]},
            ],
            "has id None, its call '1'",
        ),
        (
            None,
            [
                U,
                {"role": "model", "parts": [{"text": "x"}]},
                {"role": "model", "parts": [_call("f")]},
                {"role": "user", "parts": [_response("f")]},
            ],
            "function call turn must come immediately after a user turn",
        ),
        (
            None,
            [U, {"role": "user", "parts": [_response("f")]}],
            "function response turn must come immediately after a function call turn",
        ),
        (
            None,
            [
                U,
                {"role": "model", "parts": [_call("f")]},
                {"role": "user", "parts": [_response("f"), {"text": "and"}]},
            ],
            "holds function responses only",
        ),
        (None, [U, {"role": "user", "parts": [_call("f")]}], "belongs in a model turn"),
        (
            None,
            [
                U,
                {"role": "model", "parts": [{"functionCall": {"name": "f", "args": "x"}}]},
                {"role": "user", "parts": [_response("f")]},
            ],
            "args is an object",
        ),
        (
            None,
            [
                U,
                {"role": "model", "parts": [_call("f")]},
                {"role": "user", "parts": [{"functionResponse": {"name": "f", "response": "ok"}}]},
            ],
            "response must be an object",
        ),
        ({"parts": []}, [U], "systemInstruction: parts must not be empty"),
        ("be kind", [U], "systemInstruction: must be a Content object"),
        ({"parts": [{"inlineData": {}}]}, [U], "holds text only"),
    ],
)
def test_the_validator_detects(system: Any, contents: list[Any], expected: str) -> None:
    found = gemini_problems(system, contents)
    assert any(expected in p for p in found), found


def test_the_validator_accepts_every_documented_request() -> None:
    for system, contents in DOCUMENTED.values():
        assert gemini_problems(system, contents) == []


def test_results_for_calls_the_provider_holds_may_open_the_contents() -> None:
    contents = [{"role": "user", "parts": [_response("f")]}]
    assert gemini_problems(None, contents, frozenset({"f_0"})) == []
    assert gemini_problems(None, contents) != []


# Properties: generated documents round trip, and compile valid


NAMES = st.sampled_from(["f", "g", "ns.tool"])
ARGS = st.dictionaries(st.sampled_from(["a", "b"]), st.none() | st.integers() | st.text(max_size=3))
EXTRA = st.sampled_from([{}, {"thoughtSignature": "sig"}, {"videoMetadata": {"fps": 1}}])
TEXT_PARTS = st.builds(lambda t, e: {"text": t, **e}, st.text(max_size=5), EXTRA)
THOUGHTS = st.builds(
    lambda t, s: {"text": t, "thought": True, **s},
    st.text(max_size=5),
    st.sampled_from([{}, {"thoughtSignature": "t"}]),
)
OPAQUE_PARTS = st.sampled_from(
    [
        {"fileData": {"mimeType": "video/mp4", "fileUri": "gs://b/v.mp4"}},
        {"inlineData": {"mimeType": "audio/wav", "data": "UklG"}},
        {"inlineData": {"mimeType": "image/png", "data": "iVBO", "displayName": "x"}},
        {"executableCode": {"language": "PYTHON", "code": "print(1)"}},
        {"toolCall": {"toolType": "GOOGLE_SEARCH"}},
    ]
)
RESPONSES = st.sampled_from(
    [{"output": "ok"}, {"error": "bad"}, {"output": 3}, {}, {"result": [1, {"x": None}]}]
)


@st.composite
def rounds(draw: st.DrawFn) -> list[dict[str, Any]]:
    names = draw(st.lists(NAMES, min_size=1, max_size=3))
    with_ids = draw(st.booleans())
    calls = [
        {
            "functionCall": {
                "name": n,
                "args": draw(ARGS),
                **({"id": f"c{k}"} if with_ids else {}),
            },
            **draw(EXTRA),
        }
        for k, n in enumerate(names)
    ]
    responses = [
        {
            "functionResponse": {
                "name": n,
                "response": draw(RESPONSES),
                **({"id": f"c{k}"} if with_ids else {}),
            }
        }
        for k, n in enumerate(names)
    ]
    head = draw(st.lists(THOUGHTS | TEXT_PARTS, max_size=2))
    return [{"role": "model", "parts": head + calls}, {"role": "user", "parts": responses}]


CONTENTS = st.lists(
    st.builds(
        lambda role, parts: [{"role": role, "parts": parts}],
        st.sampled_from(["user", "model"]),
        st.lists(TEXT_PARTS | OPAQUE_PARTS, max_size=3),
    )
    | rounds(),
    max_size=6,
).map(lambda items: [content for item in items for content in item])
SYSTEMS = st.none() | st.builds(lambda t: {"parts": [{"text": t}]}, st.text(min_size=1, max_size=5))


@given(CONTENTS, SYSTEMS)
@settings(max_examples=300, deadline=None)
def test_any_gemini_document_round_trips_and_compiles_valid(
    contents: list[dict[str, Any]], system: Any
) -> None:
    messages = from_gemini(contents, system)
    assert to_gemini(messages) == (system, contents)
    out_system, out, _ = render(messages, "gemini")
    if out:
        assert gemini_problems(out_system, out) == []
    for target in ("openai", "anthropic"):
        assert "thoughtSignature" not in json.dumps(render(messages, target)[:2])  # type: ignore[arg-type]


def test_gemini_contents_in_another_format_are_refused_with_advice() -> None:
    for fmt in ("openai", "anthropic"):
        with pytest.raises(InvalidInput) as caught:
            parse_messages(fmt, CHAT)  # type: ignore[arg-type]
        problems = dict(caught.value.problems)
        assert '"format": "gemini"' in problems[(1, "role")], fmt


@pytest.mark.parametrize(
    ("data", "words"),
    [
        ({"functionCall": {"name": "f", "args": {}}}, "ctxc models gemini 'functionCall'"),
        ({"type": "tool_use", "id": "x"}, 'a Gemini part has no "type"'),
    ],
)
def test_hand_made_gemini_opaque_parts_that_bypass_the_checks_are_refused(
    data: dict[str, Any], words: str
) -> None:
    part = {"type": "opaque", "provider": "gemini", "data": data}
    with pytest.raises(InvalidInput) as caught:
        parse_messages("canonical", [{"role": "user", "content": [part]}])
    (path, message), *_ = caught.value.problems
    assert path == (0, "content", 0, "data", "type") and words in message


TRANSCRIPTS = Path(__file__).resolve().parents[3] / "shared" / "transcripts"


@pytest.mark.skipif(not TRANSCRIPTS.is_dir(), reason=f"no transcripts folder at {TRANSCRIPTS}")
@pytest.mark.parametrize(
    "name", sorted(str(p.relative_to(TRANSCRIPTS)) for p in TRANSCRIPTS.glob("*/*.json"))
)
def test_real_transcripts_read_in_the_gemini_shape_and_compile_valid(name: str) -> None:
    document = json.loads((TRANSCRIPTS / name).read_text(encoding="utf-8"))
    if name.startswith("openai/"):
        messages = from_openai(document["messages"])
    else:
        messages = from_anthropic(document["messages"], document.get("system"))
    system, contents = to_gemini(messages)
    assert to_gemini(from_gemini(contents, system)) == (system, contents)
    out_system, out, _ = render(messages, "gemini")
    assert out and gemini_problems(out_system, out) == []


def test_responses_to_calls_a_resumed_session_holds_open_the_contents() -> None:
    messages = [
        Message(role="tool", content=(ToolResultPart(call_id="call_9", content="done"),)),
        Message(role="user", content=(TextPart(text="[System Context]: it is Monday"),)),
        Message(role="user", content=(TextPart(text="next?"),)),
    ]
    system, contents, _ = render(messages, "gemini", prior_call_ids=frozenset({"call_9"}))
    assert gemini_problems(system, contents, frozenset({"call_9"})) == []
    assert contents[0] == {
        "role": "user",
        "parts": [
            {"functionResponse": {"name": "call_9", "response": {"output": "done"}, "id": "call_9"}}
        ],
    }
    assert [len(c["parts"]) for c in contents] == [1, 2]


def test_merged_turns_keep_every_extra_field_the_first_one_winning() -> None:
    """Consecutive user contents merge into one turn; their unknown fields go with it, the
    earlier content's value kept where two name one field (merged in place: linear)."""
    contents = [
        {"role": "user", "parts": [{"text": "a"}], "x-tag": 1},
        {"role": "user", "parts": [{"text": "b"}], "x-tag": 2, "x-more": 3},
    ]
    _, out, _ = render(from_gemini(contents), "gemini")
    assert out == [
        {"role": "user", "parts": [{"text": "a"}, {"text": "b"}], "x-tag": 1, "x-more": 3}
    ]
