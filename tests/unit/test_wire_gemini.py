"""Gemini answers read into replies (whole, as ``alt=sse`` events split anywhere, as the JSON
array of chunks), thought signatures byte-exact, usage, the "input token count exceeds" overflow
and ctxc's own errors in Google's shape."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from app.domain.formats.convert import parse_messages
from app.domain.wire import ReplyStream, error_body, fitting_share, is_overflow, reply_of

# Signatures are opaque base64 bytes: these carry '+', '/' and '=' to be kept as they are.
SIGNATURE = "CiQB0e2Kb+/yQ1mP3x+Zs/Ab==" * 3
USAGE = {
    "promptTokenCount": 1200,
    "candidatesTokenCount": 30,
    "thoughtsTokenCount": 90,
    "cachedContentTokenCount": 1024,
    "totalTokenCount": 1320,
}
# A Gemini 3 answer with a thought and a signed function call (the API reference's shape).
WHOLE = {
    "candidates": [
        {
            "content": {
                "role": "model",
                "parts": [
                    {"text": "I should read the file.", "thought": True},
                    {
                        "functionCall": {"name": "read_file", "args": {"path": "a.py"}},
                        "thoughtSignature": SIGNATURE,
                    },
                ],
            },
            "finishReason": "STOP",
            "index": 0,
        }
    ],
    "usageMetadata": USAGE,
    "modelVersion": "gemini-3-pro-preview",
    "responseId": "abc",
}


def chunk(parts: list[dict[str, Any]], reason: str | None = None) -> dict[str, Any]:
    candidate: dict[str, Any] = {"content": {"role": "model", "parts": parts}, "index": 0}
    if reason:
        candidate["finishReason"] = reason
    return {"candidates": [candidate], "usageMetadata": USAGE}


CHUNKS = [
    chunk([{"text": "Let me ", "thought": True}]),
    chunk([{"text": "think.", "thought": True}]),
    chunk([{"text": "The answer ", "thoughtSignature": SIGNATURE}]),
    chunk([{"text": "is 42"}]),
    chunk([{"text": "."}]),
    chunk([{"text": "", "thoughtSignature": SIGNATURE[::-1]}], "STOP"),
]
JOINED = [
    {"text": "Let me think.", "thought": True},
    {"text": "The answer is 42.", "thoughtSignature": SIGNATURE},
    {"text": "", "thoughtSignature": SIGNATURE[::-1]},
]


def sse(chunks: list[dict[str, Any]]) -> bytes:
    return b"".join(f"data: {json.dumps(c)}\r\n\r\n".encode() for c in chunks)


def test_a_whole_answer_is_its_first_candidates_content() -> None:
    reply = reply_of("gemini", WHOLE)
    assert reply.message == {"role": "model", "parts": WHOLE["candidates"][0]["content"]["parts"]}
    assert reply.usage == {
        "prompt_tokens": 1200,
        "cache_read_tokens": 1024,
        "completion_tokens": 120,
    }
    assert reply.stop_reason == "STOP"
    # The reply is what a client resends: the format reads it back, signature and all.
    [message] = parse_messages("gemini", [reply.message])
    assert message.role == "assistant"


def test_a_streamed_answer_joins_its_texts_and_keeps_each_signature_where_it_came() -> None:
    reader = ReplyStream("gemini")
    reader.feed(sse(CHUNKS[:-1]))
    assert reader.reply() is None  # no finish reason yet
    reader.feed(sse(CHUNKS[-1:]))
    reply = reader.reply()
    assert reply is not None and reply.message["parts"] == JOINED
    assert reply.usage is not None and reply.usage["prompt_tokens"] == 1200


@given(st.lists(st.integers(min_value=1, max_value=40), min_size=1, max_size=30))
def test_any_split_of_the_bytes_gives_the_same_reply(cuts: list[int]) -> None:
    data, reader, at = sse(CHUNKS), ReplyStream("gemini"), 0
    for size in cuts:
        reader.feed(data[at : at + size])
        at += size
    reader.feed(data[at:])
    reply = reader.reply()
    assert reply is not None and reply.message["parts"] == JOINED


def test_a_streamed_function_call_keeps_its_signature_byte_exact() -> None:
    parts = WHOLE["candidates"][0]["content"]["parts"]
    reader = ReplyStream("gemini")
    reader.feed(sse([chunk(parts[:1]), chunk(parts[1:], "STOP")]))
    reply = reader.reply()
    assert reply is not None and reply.message["parts"][1]["thoughtSignature"] == SIGNATURE


def test_the_json_array_of_a_stream_without_sse_is_one_reply() -> None:
    assert reply_of("gemini", CHUNKS).message["parts"] == JOINED


def test_a_stream_that_reports_an_error_has_no_reply() -> None:
    reader = ReplyStream("gemini")
    failure = {
        "error": {"code": 503, "message": "The model is overloaded.", "status": "UNAVAILABLE"}
    }
    reader.feed(sse([CHUNKS[0], failure, CHUNKS[-1]]))
    assert reader.reply() is None and reader.error == failure["error"]


def test_the_input_token_count_error_is_a_prompt_too_long() -> None:
    error = {
        "error": {
            "code": 400,
            "status": "INVALID_ARGUMENT",
            "message": (
                "The input token count (1200000) exceeds the maximum number of tokens allowed "
                "(1048576)."
            ),
        }
    }
    body = json.dumps(error).encode()
    assert is_overflow("gemini", 400, body)
    assert fitting_share("gemini", body) == 1048576 / 1200000
    other = {"error": {**error["error"], "message": "API key not valid. Please pass a valid key."}}
    assert not is_overflow("gemini", 400, json.dumps(other).encode())
    assert not is_overflow("gemini", 429, body)


def test_ctxcs_own_errors_take_googles_shape() -> None:
    error = json.loads(
        error_body("gemini", 400, "`contents` must be a non-empty array", "contents")
    )
    assert error["error"]["code"] == 400 and error["error"]["status"] == "INVALID_ARGUMENT"
    [violation] = error["error"]["details"][0]["fieldViolations"]
    assert violation["field"] == "contents"
    assert json.loads(error_body("gemini", 401, "no key"))["error"]["status"] == "UNAUTHENTICATED"
    assert json.loads(error_body("gemini", 504, "late"))["error"]["status"] == "DEADLINE_EXCEEDED"
    assert json.loads(error_body("gemini", 500, "oops"))["error"]["status"] == "INTERNAL"
