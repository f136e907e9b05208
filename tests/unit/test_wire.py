"""Upstream answers read into replies: recorded examples from the providers' documentation,
properties over any split of the bytes, bounds, "prompt too long" and ctxc's own error bodies."""

from __future__ import annotations

import itertools
import json
from typing import Any

import anthropic
import openai
import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.domain.formats._common import without_nulls
from app.domain.formats.anthropic import from_anthropic
from app.domain.formats.openai import from_openai
from app.domain.wire import Reply, ReplyStream, WireError, error_body, is_overflow, reply_of
from app.domain.wire.reply import Provider
from app.domain.wire.sse import Event, EventParser
from tests.adapters.stubs import Answer, StubServer
from tests.unit.strategies import json_objects, messy_text

# Recorded answers (the providers' documentation, API reference and streaming guides)

OPENAI_TEXT = {
    "id": "chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT",
    "object": "chat.completion",
    "created": 1741569952,
    "model": "gpt-4.1-2025-04-14",
    "choices": [
        {
            "index": 0,
            "message": {
                "role": "assistant",
                "content": "Hello! How can I assist you today?",
                "refusal": None,
                "annotations": [],
            },
            "logprobs": None,
            "finish_reason": "stop",
        }
    ],
    "usage": {
        "prompt_tokens": 19,
        "completion_tokens": 10,
        "total_tokens": 29,
        "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 0},
        "completion_tokens_details": {
            "reasoning_tokens": 0,
            "audio_tokens": 0,
            "accepted_prediction_tokens": 0,
            "rejected_prediction_tokens": 0,
        },
    },
    "service_tier": "default",
}
OPENAI_TOOL_CALL = {
    "id": "chatcmpl-abc123",
    "object": "chat.completion",
    "created": 1699896916,
    "model": "gpt-4o-mini",
    "choices": [
        {
            "index": 0,
            "message": {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "call_DdmO9pD3xa9XTPNJ32zg2hcA",
                        "type": "function",
                        "function": {
                            "name": "get_weather",
                            "arguments": '{"location":"Paris, France"}',
                        },
                    }
                ],
                "refusal": None,
                "annotations": [],
            },
            "logprobs": None,
            "finish_reason": "tool_calls",
        }
    ],
    "usage": {
        "prompt_tokens": 82,
        "completion_tokens": 17,
        "total_tokens": 99,
        "prompt_tokens_details": {"cached_tokens": 64, "audio_tokens": 0},
    },
}
OPENAI_REFUSAL = {
    "id": "chatcmpl-9nYAG9LPNonX8DAyrkwYfemr3C8HC",
    "object": "chat.completion",
    "created": 1721596428,
    "model": "gpt-4o-2024-08-06",
    "choices": [
        {
            "index": 0,
            "message": {
                "role": "assistant",
                "content": None,
                "refusal": "I'm sorry, I cannot assist with that request.",
            },
            "logprobs": None,
            "finish_reason": "stop",
        }
    ],
    "usage": {"prompt_tokens": 81, "completion_tokens": 11, "total_tokens": 92},
}

_CHUNK = '{"id":"chatcmpl-123","object":"chat.completion.chunk","created":1694268190,'
_FP = '"model":"gpt-4o-mini","system_fingerprint":"fp_44709d6fcb",'


def _openai_chunk(delta: str, finish: str = "null") -> str:
    choice = f'{{"index":0,"delta":{delta},"logprobs":null,"finish_reason":{finish}}}'
    return f'data: {_CHUNK}{_FP}"choices":[{choice}]}}\n\n'


OPENAI_TEXT_STREAM = (
    _openai_chunk('{"role":"assistant","content":"","refusal":null}')
    + _openai_chunk('{"content":"Hello"}')
    + _openai_chunk('{"content":"! How can I assist you today?"}')
    + _openai_chunk("{}", '"stop"')
    + f'data: {_CHUNK}{_FP}"choices":[],"usage":{{"prompt_tokens":19,"completion_tokens":10,'
    '"total_tokens":29,"prompt_tokens_details":{"cached_tokens":0}}}\n\n'
    "data: [DONE]\n\n"
).encode()
_ARGUMENT_PIECES = ['{"', "location", '":"', "Paris", ",", " France", '"}']
OPENAI_TOOL_STREAM = (
    _openai_chunk(
        '{"role":"assistant","content":null,"tool_calls":[{"index":0,'
        '"id":"call_DdmO9pD3xa9XTPNJ32zg2hcA","type":"function",'
        '"function":{"name":"get_weather","arguments":""}}],"refusal":null}'
    )
    + "".join(
        _openai_chunk(
            f'{{"tool_calls":[{{"index":0,"function":{{"arguments":{json.dumps(piece)}}}}}]}}'
        )
        for piece in _ARGUMENT_PIECES
    )
    + _openai_chunk("{}", '"tool_calls"')
    + f'data: {_CHUNK}{_FP}"choices":[],"usage":{{"prompt_tokens":82,"completion_tokens":17,'
    '"total_tokens":99,"prompt_tokens_details":{"cached_tokens":64,"audio_tokens":0}}}\n\n'
    "data: [DONE]\n\n"
).encode()
OPENAI_ERROR_STREAM = (
    _openai_chunk('{"role":"assistant","content":""}')
    + _openai_chunk('{"content":"Hel"}')
    + 'data: {"error":{"message":"The server had an error while processing your request. '
    'Sorry about that!","type":"server_error","param":null,"code":null}}\n\n'
).encode()

ANTHROPIC_TEXT = {
    "id": "msg_013Zva2CMHLNnXjNJJKqJ2EF",
    "type": "message",
    "role": "assistant",
    "model": "claude-sonnet-4-5-20250929",
    "content": [{"type": "text", "text": "Hi! My name is Claude.", "citations": None}],
    "stop_reason": "end_turn",
    "stop_sequence": None,
    "usage": {
        "input_tokens": 2095,
        "output_tokens": 503,
        "cache_creation_input_tokens": 2051,
        "cache_read_input_tokens": 0,
        "service_tier": "standard",
    },
}
ANTHROPIC_TEXT_STREAM = b"""event: message_start
data: {"type": "message_start", "message": {"id": "msg_1nZdL29xx5MUA1yADyHTEsnR8uuvGzszyY", \
"type": "message", "role": "assistant", "content": [], "model": "claude-opus-4-6", \
"stop_reason": null, "stop_sequence": null, "usage": {"input_tokens": 25, "output_tokens": 1}}}

event: content_block_start
data: {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}

event: ping
data: {"type": "ping"}

event: content_block_delta
data: {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Hello"}}

event: content_block_delta
data: {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "!"}}

event: content_block_stop
data: {"type": "content_block_stop", "index": 0}

event: message_delta
data: {"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence":null}, \
"usage": {"output_tokens": 15}}

event: message_stop
data: {"type": "message_stop"}

"""
_TOOL_TEXT = ["Okay", ",", " let", "'s", " check", " the", " weather", " for", " San Francisco"]
_TOOL_JSON = ["", '{"location":', ' "San Fra', "ncisc", 'o, CA"', ", ", '"unit": "fah', 'renheit"}']


def _anthropic_event(data: dict[str, Any]) -> str:
    return f"event: {data['type']}\ndata: {json.dumps(data)}\n\n"


def _delta(index: int, kind: str, **fields: Any) -> str:
    delta = {"type": kind, **fields}
    return _anthropic_event({"type": "content_block_delta", "index": index, "delta": delta})


ANTHROPIC_TOOL_STREAM = (
    'event: message_start\ndata: {"type":"message_start","message":{"id":"msg_014p7gG3wDgGV9Eu'
    'tLvnow3U","type":"message","role":"assistant","model":"claude-opus-4-6","stop_sequence":null,'
    '"usage":{"input_tokens":472,"output_tokens":2},"content":[],"stop_reason":null}}\n\n'
    'event: content_block_start\ndata: {"type":"content_block_start","index":0,'
    '"content_block":{"type":"text","text":""}}\n\n'
    'event: ping\ndata: {"type": "ping"}\n\n'
    + "".join(_delta(0, "text_delta", text=piece) for piece in _TOOL_TEXT)
    + 'event: content_block_stop\ndata: {"type":"content_block_stop","index":0}\n\n'
    'event: content_block_start\ndata: {"type":"content_block_start","index":1,"content_block":'
    '{"type":"tool_use","id":"toolu_01T1x1fJ34qAmk2tNTrN7Up6","name":"get_weather","input":{}}}'
    "\n\n"
    + "".join(_delta(1, "input_json_delta", partial_json=piece) for piece in _TOOL_JSON)
    + 'event: content_block_stop\ndata: {"type":"content_block_stop","index":1}\n\n'
    'event: message_delta\ndata: {"type":"message_delta","delta":{"stop_reason":"tool_use",'
    '"stop_sequence":null},"usage":{"output_tokens":89}}\n\n'
    'event: message_stop\ndata: {"type":"message_stop"}\n\n'
).encode()
_THINKING = [
    "I need to find the GCD of 1071 and 462 using the Euclidean algorithm.\n\n",
    "1071 = 2 \u00d7 462 + 147",
    "\n462 = 3 \u00d7 147 + 21\n147 = 7 \u00d7 21 + 0\n\nSo GCD(1071, 462) = 21",
]
SIGNATURE = "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds"
ANTHROPIC_THINKING_STREAM = (
    _anthropic_event(
        {
            "type": "message_start",
            "message": {
                "id": "msg_01GT5pLBwYxAFGkfQWPKPvkL",
                "type": "message",
                "role": "assistant",
                "content": [],
                "model": "claude-opus-4-6",
                "stop_reason": None,
                "stop_sequence": None,
                "usage": {
                    "input_tokens": 47,
                    "cache_creation_input_tokens": 0,
                    "cache_read_input_tokens": 1800,
                    "output_tokens": 3,
                },
            },
        }
    )
    + _anthropic_event(
        {
            "type": "content_block_start",
            "index": 0,
            "content_block": {"type": "thinking", "thinking": "", "signature": ""},
        }
    )
    + "".join(_delta(0, "thinking_delta", thinking=piece) for piece in _THINKING)
    + _delta(0, "signature_delta", signature=SIGNATURE)
    + _anthropic_event({"type": "content_block_stop", "index": 0})
    + _anthropic_event(
        {"type": "content_block_start", "index": 1, "content_block": {"type": "text", "text": ""}}
    )
    + _delta(1, "text_delta", text="The greatest common divisor of 1071 and 462 is **21**.")
    + _anthropic_event({"type": "content_block_stop", "index": 1})
    + _anthropic_event(
        {
            "type": "message_delta",
            "delta": {"stop_reason": "end_turn", "stop_sequence": None},
            "usage": {"output_tokens": 164},
        }
    )
    + _anthropic_event({"type": "message_stop"})
).encode()
_SEARCH_RESULT = {
    "type": "web_search_result",
    "url": "https://en.wikipedia.org/wiki/Claude_Shannon",
    "title": "Claude Shannon - Wikipedia",
    "encrypted_content": "EqgfCioIARgBIiQ3YTAwMjY1Mi1mZjM5LTQ1NGUtODgxNC1kNjNjNTk1ZWI3Y",
    "page_age": "April 30, 2025",
}
_CITATION = {
    "type": "web_search_result_location",
    "url": "https://en.wikipedia.org/wiki/Claude_Shannon",
    "title": "Claude Shannon - Wikipedia",
    "encrypted_index": "Eo8BCioIAhgBIiQyYjQ0OWJmZi1lNm",
    "cited_text": "Claude Elwood Shannon (April 30, 1916 \u2013 February 24, 2001) was an ",
}
ANTHROPIC_SEARCH_STREAM = (
    _anthropic_event(
        {
            "type": "message_start",
            "message": {
                "id": "msg_01G5g3sJ1hQwg8rYx9EwXjfC",
                "type": "message",
                "role": "assistant",
                "model": "claude-opus-4-6",
                "content": [],
                "stop_reason": None,
                "stop_sequence": None,
                "usage": {"input_tokens": 2679, "output_tokens": 3},
            },
        }
    )
    + _anthropic_event(
        {
            "type": "content_block_start",
            "index": 0,
            "content_block": {
                "type": "server_tool_use",
                "id": "srvtoolu_014hJH82Qum7Td6UV8gDXThB",
                "name": "web_search",
                "input": {},
            },
        }
    )
    + _delta(0, "input_json_delta", partial_json='{"query": "claude shannon birth date"}')
    + _anthropic_event({"type": "content_block_stop", "index": 0})
    + _anthropic_event(
        {
            "type": "content_block_start",
            "index": 1,
            "content_block": {
                "type": "web_search_tool_result",
                "tool_use_id": "srvtoolu_014hJH82Qum7Td6UV8gDXThB",
                "content": [_SEARCH_RESULT],
            },
        }
    )
    + _anthropic_event({"type": "content_block_stop", "index": 1})
    + _anthropic_event(
        {
            "type": "content_block_start",
            "index": 2,
            "content_block": {"type": "text", "text": "", "citations": None},
        }
    )
    + _delta(2, "citations_delta", citation=_CITATION)
    + _delta(2, "text_delta", text="Claude Shannon was born on April 30, 1916")
    + _anthropic_event({"type": "content_block_stop", "index": 2})
    + _anthropic_event(
        {
            "type": "message_delta",
            "delta": {"stop_reason": "end_turn", "stop_sequence": None},
            "usage": {"input_tokens": 10682, "output_tokens": 510, "server_tool_use": None},
        }
    )
    + _anthropic_event({"type": "message_stop"})
).encode()
ANTHROPIC_OVERLOADED_STREAM = (
    ANTHROPIC_TEXT_STREAM.split(b"event: content_block_stop")[0]
    + b'event: error\ndata: {"type": "error", "error": {"type": "overloaded_error", '
    b'"message": "Overloaded"}}\n\n'
)
STREAMS: dict[str, tuple[Provider, bytes]] = {
    "openai text": ("openai", OPENAI_TEXT_STREAM),
    "openai tool call": ("openai", OPENAI_TOOL_STREAM),
    "openai error": ("openai", OPENAI_ERROR_STREAM),
    "anthropic text": ("anthropic", ANTHROPIC_TEXT_STREAM),
    "anthropic tool use": ("anthropic", ANTHROPIC_TOOL_STREAM),
    "anthropic thinking": ("anthropic", ANTHROPIC_THINKING_STREAM),
    "anthropic web search": ("anthropic", ANTHROPIC_SEARCH_STREAM),
    "anthropic error": ("anthropic", ANTHROPIC_OVERLOADED_STREAM),
}


def streamed(provider: Provider, data: bytes, *chunks: int, max_bytes: int = 2**20) -> ReplyStream:
    """A ReplyStream fed ``data`` cut at ``chunks`` (positions)."""
    stream = ReplyStream(provider, max_bytes)
    cuts = [0, *sorted(chunks), len(data)]
    for start, end in itertools.pairwise(cuts):
        stream.feed(data[start:end])
    return stream


def parsed(provider: Provider, message: dict[str, Any]) -> list[Any]:
    """The canonical message the format parser reads from a reply's message."""
    read = from_openai([message]) if provider == "openai" else from_anthropic([message])
    return [m.to_json() for m in read]


# Whole answers


def test_an_openai_text_answer_is_the_message_a_client_resends() -> None:
    reply = reply_of("openai", OPENAI_TEXT)
    assert reply == Reply(
        {"role": "assistant", "content": "Hello! How can I assist you today?"},
        {"prompt_tokens": 19, "completion_tokens": 10, "cache_read_tokens": 0},
        "stop",
    )


def test_an_openai_tool_call_answer_keeps_its_calls_and_cached_tokens() -> None:
    reply = reply_of("openai", OPENAI_TOOL_CALL)
    [call] = OPENAI_TOOL_CALL["choices"][0]["message"]["tool_calls"]  # type: ignore[index]
    assert reply.message == {"role": "assistant", "content": None, "tool_calls": [call]}
    assert reply.usage == {"prompt_tokens": 82, "completion_tokens": 17, "cache_read_tokens": 64}
    assert reply.stop_reason == "tool_calls"


def test_an_openai_refusal_is_kept_in_the_reply() -> None:
    reply = reply_of("openai", OPENAI_REFUSAL)
    refusal = "I'm sorry, I cannot assist with that request."
    assert reply.message == {"role": "assistant", "content": None, "refusal": refusal}
    [message] = from_openai([reply.message])
    assert message.metadata == {"openai": {"content": "null", "extra": {"refusal": refusal}}}


def test_an_anthropic_answer_drops_null_fields_and_keeps_cache_counts_apart() -> None:
    reply = reply_of("anthropic", ANTHROPIC_TEXT)
    assert reply == Reply(
        {"role": "assistant", "content": [{"type": "text", "text": "Hi! My name is Claude."}]},
        {
            "prompt_tokens": 2095,
            "completion_tokens": 503,
            "cache_read_tokens": 0,
            "cache_write_tokens": 2051,
        },
        "end_turn",
    )


@pytest.mark.parametrize(
    ("provider", "body"),
    [
        ("openai", []),
        ("openai", {"choices": []}),
        ("openai", {"choices": [{"index": 0, "message": {"content": 3}}]}),
        ("openai", {"choices": [{"index": 0}]}),
        ("anthropic", {"type": "error", "error": {"type": "api_error", "message": "x"}}),
        ("anthropic", {"type": "message", "content": "text"}),
        ("anthropic", {"type": "message", "content": [1]}),
    ],
)
def test_what_is_not_an_answer_is_a_wire_error(provider: Provider, body: Any) -> None:
    with pytest.raises(WireError):
        reply_of(provider, body)


# Streamed answers


def test_an_openai_text_stream_gives_the_text_and_the_usage_chunk() -> None:
    stream = streamed("openai", OPENAI_TEXT_STREAM)
    assert stream.reply() == reply_of("openai", OPENAI_TEXT)


def test_openai_tool_arguments_split_across_deltas_are_joined() -> None:
    stream = streamed("openai", OPENAI_TOOL_STREAM)
    assert stream.reply() == reply_of("openai", OPENAI_TOOL_CALL)


def test_a_tool_call_id_and_type_repeated_in_every_delta_are_kept_once() -> None:
    head = b'"id":"call_DdmO9pD3xa9XTPNJ32zg2hcA","type":"function",'
    repeated = OPENAI_TOOL_STREAM.replace(
        b'{"index":0,"function"', b'{"index":0,' + head + b'"function"'
    )
    assert repeated.count(head) == len(_ARGUMENT_PIECES) + 1
    assert streamed("openai", repeated).reply() == reply_of("openai", OPENAI_TOOL_CALL)


def test_an_openai_stream_is_not_done_before_done_nor_after_an_error() -> None:
    before_done = OPENAI_TEXT_STREAM.removesuffix(b"data: [DONE]\n\n")
    assert streamed("openai", before_done).reply() is None
    failed = streamed("openai", OPENAI_ERROR_STREAM + b"data: [DONE]\n\n")
    assert failed.reply() is None
    assert failed.error is not None and failed.error["type"] == "server_error"


def test_an_anthropic_text_stream_skips_pings_and_sums_nothing() -> None:
    reply = streamed("anthropic", ANTHROPIC_TEXT_STREAM).reply()
    assert reply == Reply(
        {"role": "assistant", "content": [{"type": "text", "text": "Hello!"}]},
        {"prompt_tokens": 25, "completion_tokens": 15},
        "end_turn",
    )


def test_anthropic_tool_input_streamed_as_partial_json_is_parsed() -> None:
    reply = streamed("anthropic", ANTHROPIC_TOOL_STREAM).reply()
    assert reply is not None and reply.stop_reason == "tool_use"
    text, tool = reply.message["content"]
    assert text == {"type": "text", "text": "".join(_TOOL_TEXT)}
    assert tool == {
        "type": "tool_use",
        "id": "toolu_01T1x1fJ34qAmk2tNTrN7Up6",
        "name": "get_weather",
        "input": {"location": "San Francisco, CA", "unit": "fahrenheit"},
    }
    assert reply.usage == {"prompt_tokens": 472, "completion_tokens": 89}


def test_anthropic_thinking_keeps_its_signature_and_cache_reads() -> None:
    reply = streamed("anthropic", ANTHROPIC_THINKING_STREAM).reply()
    assert reply is not None
    thinking, _ = reply.message["content"]
    assert thinking == {"type": "thinking", "thinking": "".join(_THINKING), "signature": SIGNATURE}
    assert reply.usage == {
        "prompt_tokens": 47,
        "completion_tokens": 164,
        "cache_read_tokens": 1800,
        "cache_write_tokens": 0,
    }


def test_anthropic_server_tool_blocks_are_kept_verbatim_with_their_citations() -> None:
    reply = streamed("anthropic", ANTHROPIC_SEARCH_STREAM).reply()
    assert reply is not None
    use, result, text = reply.message["content"]
    assert use["input"] == {"query": "claude shannon birth date"}
    assert result["content"] == [_SEARCH_RESULT]
    assert text == {
        "type": "text",
        "text": "Claude Shannon was born on April 30, 1916",
        "citations": [_CITATION],
    }
    # message_delta's usage is cumulative: its counts replace message_start's.
    assert reply.usage == {"prompt_tokens": 10682, "completion_tokens": 510}


def test_an_anthropic_error_event_means_the_reply_never_completes() -> None:
    rest = ANTHROPIC_TEXT_STREAM[ANTHROPIC_TEXT_STREAM.index(b"event: content_block_stop") :]
    stream = streamed("anthropic", ANTHROPIC_OVERLOADED_STREAM + rest)
    assert stream.reply() is None
    assert stream.error == {"type": "overloaded_error", "message": "Overloaded"}


@pytest.mark.parametrize("name", [name for name in STREAMS if "error" not in name])
def test_every_recorded_reply_message_is_read_by_the_format_parser(name: str) -> None:
    provider, data = STREAMS[name]
    reply = streamed(provider, data).reply()
    assert reply is not None
    assert parsed(provider, reply.message)


@pytest.mark.parametrize(
    ("provider", "data"),
    [
        ("openai", b"data: {not json}\n\n"),
        ("openai", b'data: {"choices": [{"index": 0, "delta": {"tool_calls": [{}]}}]}\n\n'),
        ("anthropic", b'data: {"type": "content_block_delta", "index": 0, "delta": {}}\n\n'),
        (
            "anthropic",
            ANTHROPIC_TOOL_STREAM.replace(b'renheit\\"}', b"renheit"),
        ),
    ],
)
def test_a_stream_that_breaks_its_protocol_is_a_wire_error(provider: Provider, data: bytes) -> None:
    with pytest.raises(WireError):
        streamed(provider, data)


# Properties


@given(st.sampled_from(sorted(STREAMS)), st.data())
def test_any_split_of_the_bytes_gives_the_same_reply(name: str, data: st.DataObject) -> None:
    provider, stream = STREAMS[name]
    cuts = data.draw(st.lists(st.integers(0, len(stream)), max_size=40))
    whole, split = streamed(provider, stream), streamed(provider, stream, *cuts)
    assert (split.reply(), split.error) == (whole.reply(), whole.error)


@given(st.sampled_from(sorted(STREAMS)), st.sampled_from(["\r\n", "\r", "\n"]), st.booleans())
def test_any_line_ending_and_a_bom_give_the_same_reply(name: str, end: str, bom: bool) -> None:
    provider, stream = STREAMS[name]
    text = ("\ufeff" if bom else "") + stream.decode().replace("\n", end)
    cut = [i for i in range(len(text.encode())) if i % 7 == 3]
    again = streamed(provider, text.encode(), *cut)
    whole = streamed(provider, stream)
    assert (again.reply(), again.error) == (whole.reply(), whole.error)


pieces = st.lists(messy_text, min_size=1, max_size=4)


@st.composite
def anthropic_answers(draw: st.DrawFn) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """A whole Messages answer, and the stream of events that delivers it."""
    blocks: list[dict[str, Any]] = []
    events: list[dict[str, Any]] = []
    for index in range(draw(st.integers(0, 4))):
        kind = draw(st.sampled_from(["text", "tool_use", "thinking", "redacted_thinking"]))
        deltas: list[dict[str, Any]] = []
        if kind == "text":
            texts = draw(pieces)
            block = {"type": "text", "text": "".join(texts)}
            start: dict[str, Any] = {"type": "text", "text": ""}
            deltas = [{"type": "text_delta", "text": t} for t in texts]
        elif kind == "tool_use":
            arguments = draw(json_objects)
            block = {"type": "tool_use", "id": f"toolu_{index}", "name": "f", "input": arguments}
            start = block | {"input": {}}
            dumped = json.dumps(arguments)
            cuts = sorted(draw(st.lists(st.integers(0, len(dumped)), max_size=3)))
            parts = [dumped[a:b] for a, b in zip([0, *cuts], [*cuts, len(dumped)], strict=True)]
            deltas = [{"type": "input_json_delta", "partial_json": p} for p in parts]
        elif kind == "thinking":
            texts = draw(pieces)
            block = {"type": "thinking", "thinking": "".join(texts), "signature": "sig"}
            start = {"type": "thinking", "thinking": "", "signature": ""}
            deltas = [{"type": "thinking_delta", "thinking": t} for t in texts]
            deltas.append({"type": "signature_delta", "signature": "sig"})
        else:
            block = start = {"type": "redacted_thinking", "data": draw(messy_text)}
        blocks.append(block)
        events.append({"type": "content_block_start", "index": index, "content_block": start})
        events += [{"type": "content_block_delta", "index": index, "delta": d} for d in deltas]
        events.append({"type": "content_block_stop", "index": index})
    usage = {"input_tokens": draw(st.integers(0, 9)), "output_tokens": draw(st.integers(0, 9))}
    message = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude",
        "content": blocks,
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": usage,
    }
    opening = message | {"content": [], "stop_reason": None, "usage": usage | {"output_tokens": 1}}
    events = [
        {"type": "message_start", "message": opening},
        *events,
        {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": usage},
        {"type": "message_stop"},
    ]
    return message, events


@given(anthropic_answers(), st.data())
def test_an_anthropic_stream_gives_the_reply_of_its_whole_answer(
    answer: tuple[dict[str, Any], list[dict[str, Any]]], data: st.DataObject
) -> None:
    message, events = answer
    raw = "".join(_anthropic_event(event) for event in events).encode()
    cuts = data.draw(st.lists(st.integers(0, len(raw)), max_size=10))
    reply = streamed("anthropic", raw, *cuts).reply()
    assert reply == reply_of("anthropic", message)
    assert parsed("anthropic", reply.message)


@st.composite
def openai_answers(draw: st.DrawFn) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """A whole chat completion, and the chunks that deliver it."""
    texts = draw(st.none() | pieces)
    deltas: list[dict[str, Any]] = [{"role": "assistant", "content": None if texts is None else ""}]
    deltas += [{"content": t} for t in texts or ()]
    message: dict[str, Any] = {"role": "assistant", "content": None}
    if texts is not None:
        message["content"] = "".join(texts)
    calls = draw(st.lists(st.tuples(messy_text, pieces), max_size=3))
    tool_calls = []
    for i, (name, arguments) in enumerate(calls):
        head = {"index": i, "id": f"call_{i}", "type": "function"}
        deltas.append({"tool_calls": [head | {"function": {"name": name, "arguments": ""}}]})
        deltas += [{"tool_calls": [{"index": i, "function": {"arguments": a}}]} for a in arguments]
        function = {"name": name, "arguments": "".join(arguments)}
        tool_calls.append({"id": f"call_{i}", "type": "function", "function": function})
    if tool_calls:
        message["tool_calls"] = tool_calls
    reason = "tool_calls" if tool_calls else "stop"
    usage = {"prompt_tokens": draw(st.integers(0, 9)), "completion_tokens": 1, "total_tokens": 9}
    chunks = [{"choices": [{"index": 0, "delta": d, "finish_reason": None}]} for d in deltas]
    chunks += [
        {"choices": [{"index": 0, "delta": {}, "finish_reason": reason}], "usage": None},
        {"choices": [], "usage": usage},
    ]
    completion = {
        "choices": [{"index": 0, "message": message, "finish_reason": reason}],
        "usage": usage,
    }
    return completion, chunks


@given(openai_answers(), st.data())
def test_an_openai_stream_gives_the_reply_of_its_whole_answer(
    answer: tuple[dict[str, Any], list[dict[str, Any]]], data: st.DataObject
) -> None:
    completion, chunks = answer
    raw = ("".join(f"data: {json.dumps(c)}\n\n" for c in chunks) + "data: [DONE]\n\n").encode()
    cuts = data.draw(st.lists(st.integers(0, len(raw)), max_size=10))
    reply = streamed("openai", raw, *cuts).reply()
    assert reply == reply_of("openai", completion)
    assert parsed("openai", reply.message)


# Bounds


def test_a_line_over_the_limit_is_refused_before_it_is_kept() -> None:
    stream = ReplyStream("openai", max_bytes=1000)
    stream.feed(b"data: " + b"x" * 900)
    with pytest.raises(WireError, match="line"):
        stream.feed(b"x" * 200)


def test_an_event_over_the_limit_is_refused() -> None:
    lines = b"data: " + b"x" * 100 + b"\n"
    with pytest.raises(WireError, match="data"):
        ReplyStream("anthropic", max_bytes=1000).feed(lines * 11)


def test_a_reply_over_the_limit_is_refused_though_each_event_is_small() -> None:
    head = ANTHROPIC_TEXT_STREAM.split(b"event: content_block_delta")[0]
    delta = _delta(0, "text_delta", text="y" * 50).encode()
    stream = ReplyStream("anthropic", max_bytes=4096)
    stream.feed(head)
    with pytest.raises(WireError, match="reply"):
        for _ in range(100):
            stream.feed(delta)


def test_a_long_stream_fed_byte_by_byte_and_many_tiny_deltas_stay_linear() -> None:
    """Quadratic joins or rescans would not finish in the suite's timeout at this size."""
    head = ANTHROPIC_TEXT_STREAM.split(b"event: content_block_delta")[0]
    tail = ANTHROPIC_TEXT_STREAM[ANTHROPIC_TEXT_STREAM.index(b"event: content_block_stop") :]
    deltas = _delta(0, "text_delta", text="z").encode() * 100_000
    reply = streamed("anthropic", head + deltas + tail, max_bytes=64 * 2**20).reply()
    assert reply is not None and reply.message["content"][0]["text"] == "z" * 100_000
    line = b"data: " + b'{"type": "ping", "pad": "' + b"p" * 2_000_000 + b'"}\n\n'
    stream = ReplyStream("anthropic", max_bytes=4 * 2**20)
    for i in range(0, len(line), 7):
        stream.feed(line[i : i + 7])
    assert stream.reply() is None


# Server-sent events


def events_of(data: bytes, *cuts: int) -> list[Event]:
    parser = EventParser(2**20)
    bounds = [0, *sorted(cuts), len(data)]
    return [e for a, b in itertools.pairwise(bounds) for e in parser.feed(data[a:b])]


def test_sse_data_lines_join_with_lf_and_comments_and_unknown_fields_are_skipped() -> None:
    data = b": comment\ndata: a\ndata:b\ndata\nid: 7\nretry: 10\nfoo: bar\n\n"
    assert events_of(data) == [Event("message", "a\nb\n")]


def test_sse_event_names_last_one_event_and_an_event_without_data_is_dropped() -> None:
    data = b"event: x\n\nevent: y\ndata: 1\n\ndata: 2\n\n"
    assert events_of(data) == [Event("y", "1"), Event("message", "2")]


def test_sse_crlf_split_between_chunks_is_one_line_end() -> None:
    data = b"data: 1\r\ndata: 2\r\n\r\ndata: 3\r\r"
    for cut in range(len(data) + 1):
        assert events_of(data, cut) == [Event("message", "1\n2"), Event("message", "3")]


def test_sse_a_bom_is_skipped_once_and_a_character_split_across_chunks_is_whole() -> None:
    data = "\ufeffdata: \ufeffé🚀\n\n".encode()
    for cut in range(len(data) + 1):
        assert events_of(data, cut) == [Event("message", "\ufeffé🚀")]


def test_null_fields_are_dropped_at_any_depth_but_inside_tool_input() -> None:
    block = {"type": "tool_use", "caller": None, "input": {"a": None}, "x": [{"b": None}]}
    assert without_nulls(block) == {"type": "tool_use", "input": {"a": None}, "x": [{}]}


# Upstream errors


OPENAI_OVERFLOWS = [
    {
        "message": "This model's maximum context length is 8192 tokens. However, your messages "
        "resulted in 8227 tokens. Please reduce the length of the messages.",
        "type": "invalid_request_error",
        "param": "messages",
        "code": "context_length_exceeded",
    },
    {
        "message": "Input tokens exceed the configured limit of 272000 tokens. Your messages "
        "resulted in 289650 tokens. Please reduce the length of the messages.",
        "type": "invalid_request_error",
        "param": "messages",
        "code": "context_length_exceeded",
    },
    # DeepSeek, an OpenAI-compatible server: no overflow code, the text says it.
    {
        "message": "This model's maximum context length is 131072 tokens. However, you requested "
        "131134 tokens (122942 in the messages, 8192 in the completion). Please reduce the "
        "length of the messages or completion.",
        "type": "invalid_request_error",
        "param": None,
        "code": "invalid_request_error",
    },
]
ANTHROPIC_OVERFLOWS = [
    "prompt is too long: 200251 tokens > 200000 maximum",
    "input length and `max_tokens` exceed context limit: 199759 + 8192 > 200000, decrease input "
    "length or `max_tokens` and try again",
]


def _anthropic_error(kind: str, message: str) -> bytes:
    body = {"type": "error", "error": {"type": kind, "message": message}, "request_id": "req_0"}
    return json.dumps(body).encode()


@pytest.mark.parametrize("error", OPENAI_OVERFLOWS)
def test_openai_overflows_are_recognised(error: dict[str, Any]) -> None:
    assert is_overflow("openai", 400, json.dumps({"error": error}).encode())


def test_an_openai_compatible_server_with_a_flat_error_body_is_recognised() -> None:
    vllm = {
        "object": "error",
        "message": "This model's maximum context length is 8192 tokens. However, you requested "
        "8203 tokens (7691 in the messages, 512 in the completion).",
        "type": "BadRequestError",
        "param": None,
        "code": 400,
    }
    assert is_overflow("openai", 400, json.dumps(vllm).encode())


@pytest.mark.parametrize("message", ANTHROPIC_OVERFLOWS)
def test_anthropic_overflows_are_recognised(message: str) -> None:
    assert is_overflow("anthropic", 400, _anthropic_error("invalid_request_error", message))


@pytest.mark.parametrize(
    ("provider", "status", "body"),
    [
        (
            "openai",
            429,
            b'{"error": {"message": "Rate limit reached for gpt-4o on tokens per min (TPM)", '
            b'"type": "tokens", "param": null, "code": "rate_limit_exceeded"}}',
        ),
        (
            "openai",
            400,
            b'{"error": {"message": "max_tokens is too large: 50000. This model supports at '
            b'most 16384 completion tokens.", "type": "invalid_request_error", '
            b'"param": "max_tokens", "code": "invalid_value"}}',
        ),
        ("openai", 500, json.dumps({"error": OPENAI_OVERFLOWS[0]}).encode()),
        ("openai", 400, b"<html>400 Bad Request</html>"),
        ("openai", 400, b'["maximum context length"]'),
        ("anthropic", 413, _anthropic_error("request_too_large", "Request exceeds the maximum")),
        ("anthropic", 529, _anthropic_error("overloaded_error", "Overloaded")),
        (
            "anthropic",
            400,
            _anthropic_error(
                "invalid_request_error", "max_tokens: 300000 > 64000, which is the maximum"
            ),
        ),
        ("anthropic", 400, _anthropic_error("api_error", ANTHROPIC_OVERFLOWS[0])),
        ("anthropic", 400, b'{"error": "prompt is too long"}'),
        ("anthropic", 400, _anthropic_error("invalid_request_error", "x" * 70_000)),
    ],
)
def test_other_errors_are_not_overflows(provider: Provider, status: int, body: bytes) -> None:
    assert not is_overflow(provider, status, body)


@pytest.mark.parametrize(
    ("status", "kind", "code"),
    [
        (400, "invalid_request_error", None),
        (401, "invalid_request_error", "invalid_api_key"),
        (403, "request_forbidden", None),
        (404, "invalid_request_error", None),
        (429, "requests", "rate_limit_exceeded"),
        (500, "server_error", None),
        (503, "server_error", None),
    ],
)
def test_openai_error_bodies_take_the_apis_types(status: int, kind: str, code: str | None) -> None:
    body = json.loads(error_body("openai", status, "why", "messages"))
    assert body == {"error": {"message": "why", "type": kind, "param": "messages", "code": code}}


@pytest.mark.parametrize(
    ("status", "kind"),
    [
        (400, "invalid_request_error"),
        (401, "authentication_error"),
        (403, "permission_error"),
        (404, "not_found_error"),
        (409, "invalid_request_error"),
        (413, "request_too_large"),
        (429, "rate_limit_error"),
        (500, "api_error"),
        (502, "api_error"),
        (529, "overloaded_error"),
    ],
)
def test_anthropic_error_bodies_take_the_apis_types(status: int, kind: str) -> None:
    body = json.loads(error_body("anthropic", status, "why"))
    assert body == {"type": "error", "error": {"type": kind, "message": "why"}}


def erring(status: int, body: bytes) -> StubServer:
    """A local server that answers every request with ``status`` and ``body``."""
    return StubServer(lambda _: Answer(status, body))


@pytest.mark.parametrize(
    ("status", "expected"),
    [
        (400, openai.BadRequestError),
        (401, openai.AuthenticationError),
        (403, openai.PermissionDeniedError),
        (404, openai.NotFoundError),
        (413, openai.APIStatusError),
        (429, openai.RateLimitError),
        (500, openai.InternalServerError),
    ],
)
def test_the_openai_sdk_raises_its_own_exception_for_a_ctxc_error(
    status: int, expected: type[openai.APIStatusError]
) -> None:
    body = error_body("openai", status, "session 's1' not found", "messages")
    with erring(status, body) as server:
        client = openai.OpenAI(base_url=server.url, api_key="k", max_retries=0)
        with pytest.raises(expected) as raised:
            client.chat.completions.create(model="m", messages=[])
        client.close()
    assert raised.value.status_code == status
    assert raised.value.body == json.loads(body)["error"]
    assert (raised.value.type, raised.value.param) == (
        json.loads(body)["error"]["type"],
        "messages",
    )


@pytest.mark.parametrize(
    ("status", "expected"),
    [
        (400, anthropic.BadRequestError),
        (401, anthropic.AuthenticationError),
        (403, anthropic.PermissionDeniedError),
        (404, anthropic.NotFoundError),
        (413, anthropic.RequestTooLargeError),
        (429, anthropic.RateLimitError),
        (500, anthropic.InternalServerError),
        (529, anthropic.OverloadedError),
    ],
)
def test_the_anthropic_sdk_raises_its_own_exception_for_a_ctxc_error(
    status: int, expected: type[anthropic.APIStatusError]
) -> None:
    body = error_body("anthropic", status, "session 's1' not found")
    with erring(status, body) as server:
        client = anthropic.Anthropic(base_url=server.url, api_key="k", max_retries=0)
        with pytest.raises(expected) as raised:
            client.messages.create(model="m", max_tokens=1, messages=[])
        client.close()
    assert raised.value.status_code == status
    assert raised.value.body == json.loads(body)
    assert "session 's1' not found" in raised.value.message
