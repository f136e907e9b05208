"""Responses answers read into replies (whole, and streamed over any split of the bytes), its
errors in OpenAI's shape, and the item groups the sidecar's thread counts a history in."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.domain.formats.convert import parse_messages
from app.domain.formats.responses import from_responses
from app.domain.formats.responses_turns import item_turns
from app.domain.wire import ReplyStream, WireError, error_body, is_overflow, reply_of

REASONING: dict[str, Any] = {
    "id": "rs_68af",
    "type": "reasoning",
    "summary": [],
    "content": None,  # kept: a reasoning item goes back as it came
    "encrypted_content": "gAAAAABo+/ZK==\u00e9",
}
CALL = {
    "id": "fc_68af",
    "type": "function_call",
    "status": "completed",
    "arguments": '{"cmd":"ls"}',
    "call_id": "call_1",
    "name": "exec_command",
}
MESSAGE = {
    "id": "msg_68af",
    "type": "message",
    "status": "completed",
    "role": "assistant",
    "content": [{"type": "output_text", "annotations": [], "logprobs": [], "text": "Done."}],
}
USAGE = {
    "input_tokens": 1200,
    "input_tokens_details": {"cached_tokens": 1024},
    "output_tokens": 30,
    "output_tokens_details": {"reasoning_tokens": 12},
    "total_tokens": 1230,
}
RESPONSE = {
    "id": "resp_68af",
    "object": "response",
    "status": "completed",
    "error": None,
    "incomplete_details": None,
    "output": [REASONING, MESSAGE, CALL],
    "usage": USAGE,
}


def events(response: dict[str, Any]) -> bytes:
    """The response as the API streams it (the events a reader needs, and deltas it skips)."""
    out: list[dict[str, Any]] = [
        {"type": "response.created", "response": {**response, "output": [], "usage": None}}
    ]
    for index, item in enumerate(response["output"]):
        out.append({"type": "response.output_item.added", "output_index": index, "item": item})
        out.append({"type": "response.output_text.delta", "output_index": index, "delta": "x"})
        out.append({"type": "response.output_item.done", "output_index": index, "item": item})
    out.append({"type": "response.completed", "response": response})
    return b"".join(
        f"event: {e['type']}\ndata: {json.dumps({**e, 'sequence_number': n})}\n\n".encode()
        for n, e in enumerate(out)
    )


def test_a_response_is_its_output_items_and_usage() -> None:
    reply = reply_of("responses", RESPONSE)
    items = reply.message["output"]
    assert items[0] == REASONING  # null field and all: byte for byte once dumped again
    assert items[1] == MESSAGE and items[2] == CALL
    assert reply.usage == {
        "prompt_tokens": 1200,
        "completion_tokens": 30,
        "cache_read_tokens": 1024,
    }
    assert reply.stop_reason == "completed"
    # The format parser reads the items back into the assistant message a client resends.
    [message] = parse_messages("responses", items)
    assert message.role == "assistant"


@given(st.data())
def test_any_split_of_a_stream_gives_the_reply_of_the_whole_answer(data: st.DataObject) -> None:
    raw = events(RESPONSE)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(raw)), max_size=8)))
    stream = ReplyStream("responses")
    for start, end in zip([0, *cuts], [*cuts, len(raw)], strict=True):
        stream.feed(raw[start:end])
    assert stream.reply() == reply_of("responses", RESPONSE)


def test_a_stream_is_not_done_before_completed_nor_after_an_error() -> None:
    raw = events(RESPONSE)
    stream = ReplyStream("responses")
    stream.feed(raw[: raw.index(b"event: response.completed")])
    assert stream.reply() is None
    failed = ReplyStream("responses")
    error = {"type": "error", "code": "server_error", "message": "boom", "param": None}
    failed.feed(f"event: error\ndata: {json.dumps(error)}\n\n".encode() + raw)
    assert failed.reply() is None and failed.error is not None
    assert failed.error["code"] == "server_error"


def test_a_failed_response_never_completes() -> None:
    failed = {
        "type": "response.failed",
        "response": {
            **RESPONSE,
            "status": "failed",
            "error": {"code": "server_error", "message": "x"},
        },
    }
    stream = ReplyStream("responses")
    stream.feed(f"data: {json.dumps(failed)}\n\n".encode())
    assert stream.reply() is None and stream.error == {"code": "server_error", "message": "x"}


@pytest.mark.parametrize(
    "body",
    [
        [],
        {"object": "chat.completion"},
        {"output": "x"},
        {"output": [{"id": 1}]},
        {**RESPONSE, "status": "failed"},
    ],
)
def test_what_is_not_a_response_is_a_wire_error(body: Any) -> None:
    with pytest.raises(WireError):
        reply_of("responses", body)


def test_the_apis_overflow_is_recognised_and_errors_take_openais_shape() -> None:
    overflow = {
        "error": {
            "message": "Your input exceeds the context window of this model. "
            "Please adjust your input and try again.",
            "type": "invalid_request_error",
            "param": "input",
            "code": "context_length_exceeded",
        }
    }
    assert is_overflow("responses", 400, json.dumps(overflow).encode())
    assert not is_overflow("responses", 429, json.dumps(overflow).encode())
    assert error_body("responses", 400, "bad", "input") == error_body("openai", 400, "bad", "input")


ITEM_KINDS = st.sampled_from(
    [
        {"role": "user", "content": "hi"},
        {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "d"}]},
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "a"}]},
        {"type": "message", "role": "assistant", "content": []},
        {"role": "assistant", "content": "plain"},
        {"type": "reasoning", "id": "rs_1", "summary": []},
        {"type": "function_call", "call_id": "c", "name": "f", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c", "output": "r"},
        {"type": "web_search_call", "id": "ws_1", "status": "completed"},
        {"type": "custom_tool_call", "call_id": "k", "name": "apply_patch", "input": "x"},
        {"type": "custom_tool_call_output", "call_id": "k", "output": "ok"},
        {
            "type": "local_shell_call",
            "call_id": "l",
            "status": "completed",
            "action": {"type": "exec", "command": ["ls"]},
        },
        {"type": "item_reference", "id": "msg_1"},
    ]
)


@given(st.lists(ITEM_KINDS, max_size=30))
def test_item_groups_are_the_messages_the_parser_makes(items: list[Any]) -> None:
    groups = item_turns(items)
    assert [item for group in groups for item in group] == items
    messages = from_responses(items)
    assert len(groups) == len(messages)
    # Each group alone is the message it is part of.
    assert [from_responses(group) for group in groups] == [[m] for m in messages]
