"""Anthropic Messages <-> canonical messages: mappings, exact round trips, errors."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.domain.errors import FormatError
from app.domain.formats._common import without_nulls
from app.domain.formats.anthropic import anthropic_message, from_anthropic, to_anthropic
from app.domain.formats.openai import from_openai, to_openai
from app.domain.messages import (
    ImagePart,
    Message,
    OpaquePart,
    ReasoningPart,
    TextPart,
    ToolCallPart,
    ToolResultPart,
)
from app.domain.validity import render
from tests.unit.strategies import caller_meta, json_objects, json_values, messy_text

EPHEMERAL = {"type": "ephemeral"}


def text(value: str, **extra: Any) -> dict[str, Any]:
    return {"type": "text", "text": value, **extra}


def tool_use(call_id: str, name: str = "f", **arguments: Any) -> dict[str, Any]:
    return {"type": "tool_use", "id": call_id, "name": name, "input": arguments}


def tool_result(call_id: str, content: Any = "ok", **extra: Any) -> dict[str, Any]:
    return {"type": "tool_result", "tool_use_id": call_id, "content": content, **extra}


def one(turn: dict[str, Any]) -> Message:
    [message] = from_anthropic([turn])
    return message


def read_back(turns: list[Any], system: Any = None) -> tuple[Any, list[Any]]:
    """``(system, turns)`` as the converters give them back: without the caller's metadata and
    the blocks' null fields (the API reads them as absent)."""
    return without_nulls(system), [
        {k: without_nulls(v) if k == "content" else v for k, v in turn.items() if k != "metadata"}
        for turn in turns
    ]


def assert_round_trip(turns: list[Any], system: Any = None) -> None:
    assert to_anthropic(from_anthropic(turns, system)) == read_back(turns, system)


# Mappings


def test_string_system_comes_first_and_goes_back_as_a_string() -> None:
    messages = from_anthropic([{"role": "user", "content": "hi"}], system="be kind")
    assert messages[0] == Message(
        role="system",
        content=(TextPart(text="be kind"),),
        metadata={"anthropic": {"content": "string"}},
    )
    assert to_anthropic(messages)[0] == "be kind"


def test_system_blocks_keep_their_cache_control() -> None:
    system = [text("a"), text("b", cache_control=EPHEMERAL)]
    [message] = from_anthropic([], system)
    assert message.content[1].metadata == {"anthropic": {"extra": {"cache_control": EPHEMERAL}}}
    assert to_anthropic([message]) == (system, [])


def test_no_system_stays_none() -> None:
    assert to_anthropic(from_anthropic([{"role": "user", "content": "x"}])) == (
        None,
        [{"role": "user", "content": "x"}],
    )


def test_a_user_turn_of_only_tool_results_is_a_tool_message() -> None:
    turn = {"role": "user", "content": [tool_result("a"), tool_result("b", is_error=True)]}
    message = one(turn)
    assert message.role == "tool"
    assert message.content == (
        ToolResultPart(call_id="a", content="ok"),
        ToolResultPart(call_id="b", content="ok", is_error=True),
    )
    assert anthropic_message(message) == turn


def test_a_mixed_user_turn_stays_a_user_message_in_order() -> None:
    turn = {"role": "user", "content": [tool_result("a"), text("now"), tool_result("b")]}
    message = one(turn)
    assert message.role == "user"
    assert [part.type for part in message.content] == ["tool_result", "text", "tool_result"]
    assert anthropic_message(message) == turn


def test_blocks_map_to_their_canonical_parts() -> None:
    turn = {
        "role": "assistant",
        "content": [
            {"type": "thinking", "thinking": "hmm", "signature": "sig"},
            {"type": "redacted_thinking", "data": "opaque=="},
            text("see", citations=[{"type": "char_location", "cited_text": "x"}]),
            tool_use("t1", q="x"),
            {"type": "server_tool_use", "id": "s1", "name": "web_search", "input": {}},
        ],
    }
    parts = one(turn).content
    assert parts[0] == ReasoningPart(text="hmm", signature="sig")
    assert parts[1] == ReasoningPart(redacted_data="opaque==")
    assert isinstance(parts[2], TextPart) and "citations" in parts[2].metadata["anthropic"]["extra"]
    assert parts[3] == ToolCallPart(id="t1", name="f", arguments={"q": "x"})
    assert parts[4] == OpaquePart(provider="anthropic", data=turn["content"][4])
    assert anthropic_message(one(turn)) == turn


def test_images_by_data_and_by_url() -> None:
    inline = {
        "type": "image",
        "source": {"type": "base64", "media_type": "image/png", "data": "AA"},
    }
    linked = {"type": "image", "source": {"type": "url", "url": "https://x.test/i.png"}}
    filed = {"type": "image", "source": {"type": "file", "file_id": "f1"}}
    parts = one({"role": "user", "content": [inline, linked, filed]}).content
    assert parts == (
        ImagePart(data="AA", media_type="image/png"),
        ImagePart(url="https://x.test/i.png"),
        OpaquePart(provider="anthropic", data=filed),
    )


def test_tool_result_content_list_keeps_text_and_images_and_flags() -> None:
    inner = [text("x"), {"type": "document", "source": {"type": "text", "data": "d"}}]
    block = tool_result("a", inner, is_error=False, cache_control=EPHEMERAL)
    result = one({"role": "user", "content": [block]}).tool_results[0]
    assert result.content[0] == TextPart(text="x")
    assert isinstance(result.content[1], OpaquePart)
    assert result.is_error is False
    assert result.metadata == {"anthropic": {"extra": {"cache_control": EPHEMERAL}}}


def test_tool_result_without_content_goes_back_without_content() -> None:
    assert_round_trip([{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "a"}]}])


def test_caller_metadata_is_kept_and_never_emitted() -> None:
    turn = {"role": "user", "content": "x", "metadata": {"pinned": True}}
    message = one(turn)
    assert message.metadata == {"pinned": True, "anthropic": {"content": "string"}}
    assert anthropic_message(message) == {"role": "user", "content": "x"}


@pytest.mark.parametrize(
    "turns",
    [
        [{"role": "user", "content": []}],
        [{"role": "assistant", "content": [text("  ")]}, {"role": "assistant", "content": " "}],
        [{"role": "user", "content": [tool_result("a", []), tool_result("a", "")]}],
        [{"role": "user", "content": "x", "id": "msg_1", "unknown": [None]}],
        [
            {
                "role": "assistant",
                "content": [{"type": "thinking", "thinking": "", "signature": None}],
            }
        ],
        [{"role": "user", "content": [tool_result("a", is_error=None)]}],
        [
            {
                "role": "user",
                "content": [{"type": "image", "source": {"type": "url", "url": "u", "x": 1}}],
            }
        ],
    ],
)
def test_messy_recorded_turns_round_trip_exactly(turns: list[Any]) -> None:
    assert_round_trip(turns)


@pytest.mark.parametrize("system", ["", [], [{"type": "text", "text": ""}], [{"type": "future"}]])
def test_odd_system_prompts_round_trip_exactly(system: Any) -> None:
    assert_round_trip([], system)


# Errors


@pytest.mark.parametrize(
    ("turns", "path"),
    [
        ({"role": "user", "content": "x"}, ()),
        ([None], (0,)),
        ([{"role": "system", "content": 3}], (0, "content")),
        ([{"role": "system", "content": "x", "tool_call_id": "c"}], (0, "role")),
        ([{"role": "tool", "content": "x"}], (0, "role")),
        ([{"role": "user"}], (0, "content")),
        ([{"role": "user", "content": None}], (0, "content")),
        ([{"role": "user", "content": ["x"]}], (0, "content", 0)),
        ([{"role": "user", "content": [{"text": "x"}]}], (0, "content", 0, "type")),
        ([{"role": "user", "content": [{"type": "text"}]}], (0, "content", 0, "text")),
        (
            [{"role": "assistant", "content": [{"type": "tool_use", "name": "f", "input": {}}]}],
            (0, "content", 0, "id"),
        ),
        (
            [{"role": "assistant", "content": [{"type": "tool_use", "id": "t", "input": {}}]}],
            (0, "content", 0, "name"),
        ),
        (
            [{"role": "assistant", "content": [{"type": "tool_use", "id": "t", "name": "f"}]}],
            (0, "content", 0, "input"),
        ),
        (
            [
                {
                    "role": "assistant",
                    "content": [{"type": "tool_use", "id": "t", "name": "f", "input": "{}"}],
                }
            ],
            (0, "content", 0, "input"),
        ),
        (
            [{"role": "user", "content": [{"type": "tool_result", "content": "x"}]}],
            (0, "content", 0, "tool_use_id"),
        ),
        ([{"role": "user", "content": [tool_result("a", 3)]}], (0, "content", 0, "content")),
        (
            [{"role": "user", "content": [tool_result("a", [{"type": "text"}])]}],
            (0, "content", 0, "content", 0, "text"),
        ),
        (
            [{"role": "user", "content": [{"type": "image", "source": "u"}]}],
            (0, "content", 0, "source"),
        ),
        ([{"role": "assistant", "content": [{"type": "thinking"}]}], (0, "content", 0, "thinking")),
        ([{"role": "user", "content": "x", "metadata": "m"}], (0, "metadata")),
        (
            [{"role": "user", "content": "x", "metadata": {"anthropic": 1}}],
            (0, "metadata", "anthropic"),
        ),
    ],
)
def test_impossible_input_is_a_format_error_at_its_path(turns: Any, path: tuple[Any, ...]) -> None:
    with pytest.raises(FormatError) as caught:
        from_anthropic(turns)
    assert caught.value.path == path


@pytest.mark.parametrize(
    ("system", "path"),
    [(3, ("system",)), (["x"], ("system", 0)), ([{"type": "text"}], ("system", 0, "text"))],
)
def test_bad_system_prompt_errors_are_located_under_system(
    system: Any, path: tuple[Any, ...]
) -> None:
    with pytest.raises(FormatError) as caught:
        from_anthropic([], system)
    assert caught.value.path == path


def test_anthropic_message_refuses_a_system_message() -> None:
    with pytest.raises(ValueError, match="system"):
        anthropic_message(Message(role="system", content=(TextPart(text="x"),)))


# Messages that came from OpenAI


def test_openai_conversation_becomes_anthropic_turns() -> None:
    messages = [
        {"role": "system", "content": "sys"},
        {"role": "developer", "content": "dev"},
        {"role": "user", "content": "hi"},
        {
            "role": "assistant",
            "content": None,
            "refusal": None,
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "f", "arguments": '{"a": 1}'},
                },
                {"id": "c2", "type": "function", "function": {"name": "g", "arguments": "oops"}},
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "name": "f", "content": "one"},
        {"role": "tool", "tool_call_id": "c2", "content": [{"type": "text", "text": "two"}]},
    ]
    assert to_anthropic(from_openai(messages)) == (
        [text("sys"), text("dev")],
        [
            {"role": "user", "content": [text("hi")]},
            {
                "role": "assistant",
                "content": [tool_use("c1", a=1), tool_use("c2", "g", _raw="oops")],
            },
            {"role": "user", "content": [tool_result("c1", "one")]},
            {"role": "user", "content": [tool_result("c2", [text("two")])]},
        ],
    )


def test_openai_images_and_opaque_parts_become_anthropic_blocks_or_vanish() -> None:
    message = {
        "role": "user",
        "content": [
            {
                "type": "image_url",
                "image_url": {"url": "data:image/jpeg;base64,/9j/", "detail": "high"},
            },
            {"type": "image_url", "image_url": {"url": "https://x.test/i.png"}},
            {"type": "input_audio", "input_audio": {"data": "AA", "format": "wav"}},
        ],
    }
    assert to_anthropic(from_openai([message]))[1] == [
        {
            "role": "user",
            "content": [
                {
                    "type": "image",
                    "source": {"type": "base64", "media_type": "image/jpeg", "data": "/9j/"},
                },
                {"type": "image", "source": {"type": "url", "url": "https://x.test/i.png"}},
            ],
        }
    ]


def test_legacy_function_result_becomes_a_tool_result_named_after_the_function() -> None:
    converted = from_openai([{"role": "function", "name": "f", "content": "r"}])
    assert to_anthropic(converted)[1] == [{"role": "user", "content": [tool_result("f", "r")]}]


# Properties

cache_control = st.dictionaries(
    st.just("cache_control"), st.just(EPHEMERAL) | json_values, max_size=1
)
block_extras = cache_control | st.dictionaries(
    st.sampled_from(["citations", "x-new"]), json_values, max_size=1
)


def with_extras(blocks: st.SearchStrategy[dict[str, Any]]) -> st.SearchStrategy[dict[str, Any]]:
    return st.builds(lambda block, extra: block | extra, blocks, block_extras)


text_blocks = with_extras(st.builds(text, messy_text))
image_sources = st.one_of(
    st.fixed_dictionaries(
        {
            "type": st.just("base64"),
            "media_type": st.sampled_from(["image/png", ""]),
            "data": messy_text,
        }
    ),
    st.fixed_dictionaries({"type": st.just("url"), "url": messy_text}),
    st.fixed_dictionaries({"type": st.just("file"), "file_id": messy_text}),
    st.fixed_dictionaries({"type": st.just("url")}, optional={"x": json_values}),
)
image_blocks = with_extras(st.builds(lambda s: {"type": "image", "source": s}, image_sources))
opaque_blocks = st.builds(
    lambda kind, body: {"type": kind} | {f"_{k}": v for k, v in body.items()},
    st.sampled_from(["document", "search_result", "web_search_tool_result", "future"]),
    json_objects,
)
result_content = messy_text | st.lists(text_blocks | image_blocks | opaque_blocks, max_size=2)
tool_result_blocks = with_extras(
    st.fixed_dictionaries(
        {"type": st.just("tool_result"), "tool_use_id": messy_text},
        optional={"content": result_content, "is_error": st.booleans() | json_values},
    )
)
tool_use_blocks = with_extras(
    st.builds(
        lambda i, n, a: {"type": "tool_use", "id": i, "name": n, "input": a},
        messy_text,
        messy_text,
        json_objects,
    )
)
assistant_blocks = st.one_of(
    text_blocks,
    tool_use_blocks,
    st.fixed_dictionaries(
        {"type": st.just("thinking"), "thinking": messy_text},
        optional={"signature": messy_text | json_values},
    ),
    st.fixed_dictionaries({"type": st.just("redacted_thinking"), "data": messy_text}),
    opaque_blocks,
)
user_blocks = st.one_of(text_blocks, image_blocks, tool_result_blocks, opaque_blocks)


@st.composite
def turns(draw: st.DrawFn) -> dict[str, Any]:
    role = draw(st.sampled_from(["user", "assistant"]))
    blocks = user_blocks if role == "user" else assistant_blocks
    # Bias towards the turns that become canonical tool messages.
    only_results = st.lists(tool_result_blocks, min_size=1, max_size=3)
    lists = st.lists(blocks, max_size=3) | (only_results if role == "user" else st.nothing())
    content = draw(messy_text | lists)
    out: dict[str, Any] = {"role": role, "content": content}
    if draw(st.booleans()):
        out["metadata"] = draw(caller_meta)
    return out | draw(
        st.dictionaries(st.sampled_from(["id", "x-unknown"]), json_values, max_size=1)
    )


systems = st.none() | messy_text | st.lists(text_blocks, max_size=3)
anthropic_documents = st.tuples(st.lists(turns(), max_size=4), systems)


@settings(max_examples=300)
@given(anthropic_documents)
def test_any_anthropic_document_round_trips_exactly(document: tuple[list[Any], Any]) -> None:
    messages, system = document
    assert_round_trip(messages, system)


@given(anthropic_documents)
def test_converted_messages_survive_the_canonical_json_round_trip(
    document: tuple[list[Any], Any],
) -> None:
    for message in from_anthropic(*document):
        assert Message.model_validate(message.to_json()) == message


@given(anthropic_documents)
def test_anthropic_messages_convert_to_openai_input_that_reads_back(
    document: tuple[list[Any], Any],
) -> None:
    converted = to_openai(from_anthropic(*document))
    assert all(isinstance(m.get("tool_call_id", ""), str) for m in converted)
    from_openai(converted)


def test_a_message_s_turn_kept_between_renders_is_each_render_s_own() -> None:
    # A message's turn is kept while it lives (the next compile of a session meets the same
    # message objects); each render gets it as a dict of its own, and the steps that follow
    # (merging, ordering, trimming a final prefill) change no other render's.
    turns = [
        {"role": "user", "content": "Read it."},
        {"role": "assistant", "content": [{"type": "text", "text": "Reading "}]},
        {"role": "assistant", "content": [{"type": "text", "text": "the file.  "}]},
    ]
    messages = from_anthropic(turns)
    first = render(messages, "anthropic")
    second = render(messages, "anthropic")
    assert first == second
    assert all(a is not b for a, b in zip(first[1], second[1], strict=True))
    first[1][0]["content"] = "changed"  # one render's turn changed: the next render's is not
    assert render(messages, "anthropic") == second
    assert second[1][-1]["content"][-1]["text"] == "the file."  # the prefill trimmed
