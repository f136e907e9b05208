"""OpenAI Chat Completions <-> canonical messages: mappings, exact round trips, errors."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.domain.errors import FormatError
from app.domain.formats.anthropic import from_anthropic, to_anthropic
from app.domain.formats.openai import from_openai, openai_messages, to_openai
from app.domain.messages import (
    ImagePart,
    Message,
    OpaquePart,
    ReasoningPart,
    TextPart,
    ToolCallPart,
    ToolResultPart,
)
from tests.unit.strategies import caller_meta, json_objects, json_values, messy_text


def call(call_id: str, name: str, arguments: str) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def one(message: dict[str, Any]) -> Message:
    [converted] = from_openai([message])
    return converted


def read_back(messages: list[Any]) -> list[Any]:
    """``messages`` as the converters give them back: without the caller's metadata and the
    fields the API reads as absent (nulls but ``content``, empty ``annotations`` or
    ``tool_calls``, nulls of a tool call and of its ``function``, a streamed call's ``index``)."""
    return [_read_back(message) for message in messages]


def _read_back(message: dict[str, Any]) -> dict[str, Any]:
    out = {
        k: v
        for k, v in message.items()
        if k != "metadata"
        and (v is not None or k == "content")
        and not (k in ("annotations", "tool_calls") and v == [])
    }
    if isinstance(out.get("tool_calls"), list):
        out["tool_calls"] = [_call_back(call) for call in out["tool_calls"]]
    return out


def _call_back(call: Any) -> Any:
    if not isinstance(call, dict):
        return call
    out = {k: v for k, v in call.items() if v is not None and k != "index"}
    if isinstance(out.get("function"), dict):
        out["function"] = {k: v for k, v in out["function"].items() if v is not None}
    return out


def assert_round_trip(messages: list[Any]) -> None:
    assert to_openai(from_openai(messages)) == read_back(messages)


# Mappings


def test_string_content_becomes_one_text_part() -> None:
    message = one({"role": "user", "content": "hello"})
    assert message == Message(role="user", content=(TextPart(text="hello"),))


def test_developer_is_a_system_message_that_goes_back_as_developer() -> None:
    raw = {"role": "developer", "content": "be brief"}
    message = one(raw)
    assert message.role == "system"
    assert message.metadata == {"openai": {"role": "developer"}}
    assert to_openai([message]) == [raw]


def test_assistant_tool_calls_become_tool_call_parts_with_parsed_arguments() -> None:
    raw = {"role": "assistant", "content": None, "tool_calls": [call("c1", "f", '{"a":1}')]}
    message = one(raw)
    assert message.content == (ToolCallPart(id="c1", name="f", arguments={"a": 1}),)
    assert message.metadata == {"openai": {"content": "null"}}
    assert to_openai([message]) == [raw]


def test_text_beside_tool_calls_comes_first() -> None:
    raw = {"role": "assistant", "content": "let me look", "tool_calls": [call("c", "f", "{}")]}
    message = one(raw)
    assert [p.type for p in message.content] == ["text", "tool_call"]
    assert to_openai([message]) == [raw]


@pytest.mark.parametrize(
    "arguments",
    ['{"a": 1}', '{\n  "a": 1\n}', '{"é":"\\u00e9"}', ' {"a":1}', '{"a":1,"a":2}'],
)
def test_non_compact_object_arguments_keep_their_exact_text(arguments: str) -> None:
    message = one({"role": "assistant", "tool_calls": [call("c", "f", arguments)]})
    part = message.tool_calls[0]
    assert part.arguments == json.loads(arguments)
    assert part.metadata == {"openai": {"arguments": arguments}}
    assert to_openai([message])[0]["tool_calls"][0]["function"]["arguments"] == arguments


@pytest.mark.parametrize("arguments", ["", "not json", "[1, 2]", "null", "3", '{"a": NaN}', "{"])
def test_arguments_that_are_not_a_json_object_stay_a_raw_string(arguments: str) -> None:
    part = one({"role": "assistant", "tool_calls": [call("c", "f", arguments)]}).tool_calls[0]
    assert part.arguments == arguments
    assert part.metadata == {}


def test_changed_arguments_are_dumped_afresh_not_replaced_by_the_recorded_text() -> None:
    part = one({"role": "assistant", "tool_calls": [call("c", "f", '{"a": 1}')]}).tool_calls[0]
    changed = part.model_copy(update={"arguments": {"a": "[omitted]"}})
    out = openai_messages(Message(role="assistant", content=(changed,)))
    assert out[0]["tool_calls"][0]["function"]["arguments"] == '{"a":"[omitted]"}'


def test_tool_message_becomes_one_tool_result() -> None:
    raw = {"role": "tool", "tool_call_id": "c1", "name": "f", "content": "42"}
    message = one(raw)
    assert message == Message(
        role="tool", content=(ToolResultPart(call_id="c1", content="42"),), name="f"
    )
    assert to_openai([message]) == [raw]


def test_tool_message_with_a_list_of_parts_keeps_the_list() -> None:
    raw = {"role": "tool", "tool_call_id": "c", "content": [{"type": "text", "text": "x"}]}
    result = one(raw).tool_results[0]
    assert result.content == (TextPart(text="x"),)
    assert to_openai(from_openai([raw])) == [raw]


def test_legacy_function_message_is_a_tool_result_named_after_the_function() -> None:
    raw = {"role": "function", "name": "get_weather", "content": "sunny"}
    message = one(raw)
    assert message.role == "tool"
    assert message.tool_results[0].call_id == "get_weather"
    assert message.metadata == {"openai": {"role": "function"}}
    assert to_openai([message]) == [raw]


def test_image_data_url_becomes_inline_image_data() -> None:
    url = "data:image/png;base64,iVBORw0KGgo="
    part = {"type": "image_url", "image_url": {"url": url, "detail": "low"}}
    message = one({"role": "user", "content": [part]})
    assert message.content == (
        ImagePart(data="iVBORw0KGgo=", media_type="image/png", detail="low"),
    )
    assert to_openai([message])[0]["content"] == [part]


def test_image_plain_url_is_kept_as_url() -> None:
    part = {"type": "image_url", "image_url": {"url": "https://x.test/a.png"}}
    assert one({"role": "user", "content": [part]}).content == (
        ImagePart(url="https://x.test/a.png"),
    )


@pytest.mark.parametrize(
    "part",
    [
        {"type": "input_audio", "input_audio": {"data": "AAA=", "format": "wav"}},
        {"type": "file", "file": {"file_id": "f1"}},
        {"type": "refusal", "refusal": "no"},
        {"type": "something_new", "x": [1]},
    ],
)
def test_unmodelled_parts_are_kept_opaque(part: dict[str, Any]) -> None:
    message = one({"role": "user", "content": [part]})
    assert message.content == (OpaquePart(provider="openai", data=part),)
    assert to_openai([message])[0]["content"] == [part]


def test_part_fields_we_do_not_model_go_to_part_metadata() -> None:
    part = {"type": "text", "text": "x", "cache_control": {"type": "ephemeral"}}
    text = one({"role": "user", "content": [part]}).content[0]
    assert text.metadata == {"openai": {"extra": {"cache_control": {"type": "ephemeral"}}}}


def test_message_fields_we_do_not_model_go_to_message_metadata() -> None:
    raw: dict[str, Any] = {
        "role": "assistant",
        "content": "hi",
        "refusal": "no",
        "audio": {"id": "audio_1"},
        "function_call": {"name": "f", "arguments": "{}"},
        "annotations": [{"type": "url_citation"}],
        "name": 7,
        "weird": {"k": [1, 2]},
    }
    message = one(raw)
    assert message.name is None
    extra = message.metadata["openai"]["extra"]
    assert set(extra) == {"refusal", "audio", "function_call", "annotations", "name", "weird"}
    assert to_openai([message]) == [raw]


def test_optional_fields_an_sdk_dumps_null_or_empty_are_not_kept() -> None:
    unset = {"refusal": None, "audio": None, "function_call": None, "annotations": []}
    raw: dict[str, Any] = {"role": "assistant", "content": "hi", "tool_calls": None} | unset
    assert one(raw) == one({"role": "assistant", "content": "hi"})
    assert to_openai([one(raw)]) == [{"role": "assistant", "content": "hi"}]
    dumped_call = call("c", "f", "{}") | {"x": None, "index": 0}
    dumped_call["function"]["parsed_arguments"] = None
    streamed = {"role": "assistant", "content": None, "parsed": None, "tool_calls": [dumped_call]}
    assert one(streamed) == one(
        {"role": "assistant", "content": None, "tool_calls": [call("c", "f", "{}")]}
    )


def test_caller_metadata_goes_to_message_metadata_and_is_never_emitted() -> None:
    raw = {"role": "user", "content": "x", "metadata": {"is_trace": True, "execution_id": "e"}}
    message = one(raw)
    assert message.metadata == {"is_trace": True, "execution_id": "e"}
    assert to_openai([message]) == [{"role": "user", "content": "x"}]


def test_custom_and_untyped_tool_calls_round_trip() -> None:
    custom = {"id": "c1", "type": "custom", "custom": {"name": "sh", "input": "ls -la"}}
    untyped = {"id": "c2", "function": {"name": "f", "arguments": "{}"}, "index": 0}
    assert_round_trip([{"role": "assistant", "content": None, "tool_calls": [custom, untyped]}])
    assert one({"role": "assistant", "tool_calls": [custom]}).tool_calls[0].arguments == "ls -la"


@pytest.mark.parametrize(
    "messages",
    [
        [{"role": "assistant", "tool_calls": [call("c", "f", "{}")]}],
        [{"role": "assistant", "content": "   ", "tool_calls": None}],
        [{"role": "user", "content": ""}, {"role": "user", "content": "\n"}],
        [{"role": "tool", "tool_call_id": "", "content": None}],
        [{"role": "tool", "tool_call_id": "x y/é"}],
        [{"role": "user", "content": []}],
        [
            {
                "role": "system",
                "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}],
            }
        ],
        [{"role": "user", "tool_calls": "kept as is", "tool_call_id": 3}],
    ],
)
def test_messy_recorded_messages_round_trip_exactly(messages: list[Any]) -> None:
    assert_round_trip(messages)


# Errors


@pytest.mark.parametrize(
    ("messages", "path"),
    [
        ({"role": "user"}, ()),
        (["hello"], (0,)),
        ([{"content": "x"}], (0, "role")),
        ([{"role": "robot", "content": "x"}], (0, "role")),
        ([{"role": "user", "content": 3}], (0, "content")),
        ([{"role": "user", "content": {"text": "x"}}], (0, "content")),
        ([{"role": "user", "content": ["x"]}], (0, "content", 0)),
        ([{"role": "user", "content": [{"text": "x"}]}], (0, "content", 0, "type")),
        ([{"role": "user", "content": [{"type": "text"}]}], (0, "content", 0, "text")),
        ([{"role": "user", "content": [{"type": "image_url"}]}], (0, "content", 0, "image_url")),
        ([{"role": "tool", "content": "x"}], (0, "tool_call_id")),
        ([{"role": "assistant", "tool_calls": {"id": "c"}}], (0, "tool_calls")),
        ([{"role": "assistant", "tool_calls": ["c"]}], (0, "tool_calls", 0)),
        ([{"role": "assistant", "tool_calls": [{"function": {}}]}], (0, "tool_calls", 0, "id")),
        (
            [{"role": "assistant", "tool_calls": [{"id": "c", "type": "x"}]}],
            (0, "tool_calls", 0, "type"),
        ),
        ([{"role": "assistant", "tool_calls": [{"id": "c"}]}], (0, "tool_calls", 0, "function")),
        ([{"role": "user", "metadata": []}], (0, "metadata")),
        ([{"role": "user", "metadata": {"openai": {}}}], (0, "metadata", "openai")),
    ],
)
def test_impossible_input_is_a_format_error_at_its_path(
    messages: Any, path: tuple[Any, ...]
) -> None:
    with pytest.raises(FormatError) as caught:
        from_openai(messages)
    assert caught.value.path == path


def test_tool_call_without_function_name_is_located_precisely() -> None:
    messages = [{"role": "user", "content": "x"}] * 3 + [
        {"role": "assistant", "tool_calls": [{"id": "c", "function": {"arguments": "{}"}}]}
    ]
    with pytest.raises(FormatError) as caught:
        from_openai(messages)
    assert caught.value.path == (3, "tool_calls", 0, "function", "name")


def test_non_string_arguments_are_a_format_error() -> None:
    bad = {"id": "c", "type": "function", "function": {"name": "f", "arguments": {"a": 1}}}
    with pytest.raises(FormatError) as caught:
        from_openai([{"role": "assistant", "tool_calls": [bad]}])
    assert caught.value.path == (0, "tool_calls", 0, "function", "arguments")


# Messages that came from Anthropic


def test_anthropic_user_turn_of_results_and_text_becomes_tool_messages_then_user() -> None:
    turn = {
        "role": "user",
        "content": [
            {"type": "tool_result", "tool_use_id": "a", "content": "one"},
            {"type": "tool_result", "tool_use_id": "b", "content": [{"type": "text", "text": "t"}]},
            {"type": "text", "text": "go on", "cache_control": {"type": "ephemeral"}},
        ],
    }
    assert to_openai(from_anthropic([turn])) == [
        {"role": "tool", "tool_call_id": "a", "content": "one"},
        {"role": "tool", "tool_call_id": "b", "content": "t"},
        {"role": "user", "content": "go on"},
    ]


def test_anthropic_assistant_turn_drops_reasoning_and_encodes_tool_input() -> None:
    turn = {
        "role": "assistant",
        "content": [
            {"type": "thinking", "thinking": "hmm", "signature": "sig"},
            {"type": "text", "text": "calling"},
            {"type": "tool_use", "id": "t1", "name": "f", "input": {"q": "é"}},
            {"type": "server_tool_use", "id": "s", "name": "web_search", "input": {}},
        ],
    }
    assert to_openai(from_anthropic([turn])) == [
        {"role": "assistant", "content": "calling", "tool_calls": [call("t1", "f", '{"q":"é"}')]}
    ]


def test_anthropic_system_and_images_become_openai_shapes() -> None:
    image = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AA"}}
    out = to_openai(from_anthropic([{"role": "user", "content": [image]}], system="sys"))
    assert out == [
        {"role": "system", "content": "sys"},
        {
            "role": "user",
            "content": [{"type": "image_url", "image_url": {"url": "data:image/png;base64,AA"}}],
        },
    ]


def test_tool_result_lists_from_anthropic_become_text() -> None:
    results = Message(
        role="tool",
        content=(ToolResultPart(call_id="a", content=(TextPart(text="x"), TextPart(text="y"))),),
    )
    assert openai_messages(results) == [{"role": "tool", "tool_call_id": "a", "content": "x\ny"}]


def test_reasoning_only_assistant_turn_has_null_content() -> None:
    message = Message(role="assistant", content=(ReasoningPart(redacted_data="zz"),))
    assert openai_messages(message) == [{"role": "assistant", "content": None}]


# Properties

extra_keys = st.sampled_from(["refusal", "audio", "function_call", "x-unknown", "ü", "index"])
extras = st.dictionaries(extra_keys, json_values, max_size=2)

arguments = st.one_of(
    json_objects.map(lambda o: json.dumps(o, ensure_ascii=False, separators=(",", ":"))),
    json_objects.map(lambda o: json.dumps(o, indent=2)),
    json_objects.map(json.dumps),
    json_values.map(json.dumps),
    st.text(max_size=12),
    st.sampled_from(["", "{", "{}", " {} ", "null", '{"a": NaN}', '{"a":1,"a":2}']),
)


@st.composite
def tool_calls(draw: st.DrawFn) -> dict[str, Any]:
    function = {"name": draw(messy_text), "arguments": draw(arguments)}
    if draw(st.booleans()):
        function |= draw(st.dictionaries(st.just("strict"), json_values))
    out: dict[str, Any] = {"id": draw(messy_text), "function": function}
    if draw(st.integers(0, 4)):
        out["type"] = "function"
    return out | draw(st.dictionaries(st.sampled_from(["index", "x"]), json_values, max_size=1))


@st.composite
def content_parts(draw: st.DrawFn) -> dict[str, Any]:
    kind = draw(st.sampled_from(["text", "image", "image", "opaque"]))
    part: dict[str, Any]
    if kind == "text":
        part = {"type": "text", "text": draw(messy_text)}
    elif kind == "image":
        data_url = st.builds(
            lambda m, d: f"data:{m};base64,{d}", st.sampled_from(["image/png", "x"]), messy_text
        )
        url = draw(data_url | st.sampled_from(["https://x.test/i.png", "data:broken", ""]))
        image_url: dict[str, Any] = {"url": url}
        image_url |= draw(
            st.dictionaries(st.sampled_from(["detail", "y"]), json_values, max_size=1)
        )
        part = {"type": "image_url", "image_url": image_url}
    else:
        kind = draw(st.sampled_from(["input_audio", "file", "refusal", "new"]))
        part = {"type": kind} | draw(json_objects.map(lambda o: {f"_{k}": v for k, v in o.items()}))
    return part | draw(
        st.dictionaries(st.sampled_from(["cache_control", "z"]), json_values, max_size=1)
    )


contents = st.one_of(messy_text, st.none(), st.lists(content_parts(), max_size=2))


@st.composite
def openai_messages_(draw: st.DrawFn) -> dict[str, Any]:
    role = draw(st.sampled_from(["system", "developer", "user", "assistant", "tool", "function"]))
    out: dict[str, Any] = {"role": role}
    if draw(st.integers(0, 5)):
        out["content"] = draw(contents)
    if role == "tool":
        out["tool_call_id"] = draw(messy_text)
    if role == "assistant" and draw(st.booleans()):
        out["tool_calls"] = draw(st.lists(tool_calls(), max_size=2) | st.none())
    if draw(st.booleans()):
        out["name"] = draw(messy_text | json_values)
    if draw(st.booleans()):
        out["metadata"] = draw(caller_meta)
    return out | draw(extras)


openai_documents = st.lists(openai_messages_(), max_size=4)


@settings(max_examples=300)
@given(openai_documents)
def test_any_openai_document_round_trips_exactly(messages: list[Any]) -> None:
    assert_round_trip(messages)


@given(openai_documents)
def test_converted_messages_survive_the_canonical_json_round_trip(messages: list[Any]) -> None:
    for message in from_openai(messages):
        assert Message.model_validate(message.to_json()) == message


@given(openai_documents)
def test_openai_messages_convert_to_anthropic_input_that_reads_back(messages: list[Any]) -> None:
    system, turns = to_anthropic(from_openai(messages))
    assert all(turn["role"] in ("user", "assistant") for turn in turns)
    from_anthropic(turns, system)


@given(st.lists(tool_calls(), min_size=1, max_size=3), contents | st.just("absent"), extras)
def test_any_assistant_tool_call_turn_round_trips_exactly(
    calls: list[Any], content: Any, extra: dict[str, Any]
) -> None:
    message: dict[str, Any] = {"role": "assistant", "tool_calls": calls} | extra
    if content != "absent":
        message["content"] = content
    assert_round_trip([message])
