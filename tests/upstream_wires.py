"""The upstream stub's steps and the two providers' wire formats (tests/upstreams.py serves them).

Bodies, events, headers and error texts are the providers' own, as their APIs send them, so an
official SDK or a proxy reads them as it would the real answers.
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass
from typing import Any, Literal, Protocol

Provider = Literal["openai", "anthropic"]
ErrorKind = Literal["overflow", "rate_limit", "server", "overloaded"]
Json = dict[str, Any]

DEFAULT_TEXT = "Done: the task is complete."
FILLER = "The quick brown fox jumps over the lazy dog. "
TEXT_PIECE = 16  # characters of text per streamed delta
ARGUMENTS_PIECE = 8  # characters of tool-call arguments per streamed delta
# A dated API version, as the SDKs send them (the API itself knows which dates exist).
VERSION = re.compile(r"\d{4}-\d{2}-\d{2}")
EXAMPLES: Json = {"string": "example", "integer": 1, "number": 1, "boolean": True, "array": []}


@dataclass(frozen=True)
class Text:
    """Answer ``text``, or ``chars`` characters of filler when given."""

    text: str = DEFAULT_TEXT
    chars: int | None = None
    provider: Provider | None = None

    def content(self) -> str:
        if self.chars is None:
            return self.text
        return (FILLER * (self.chars // len(FILLER) + 1))[: self.chars]


@dataclass(frozen=True)
class ToolCall:
    """Call tool ``name`` (default: the request's first) with ``arguments`` (default: from its
    schema)."""

    name: str | None = None
    arguments: dict[str, Any] | None = None
    provider: Provider | None = None


@dataclass(frozen=True)
class Error:
    """Answer the provider's own error of this kind (429s carry ``retry-after``)."""

    kind: ErrorKind
    retry_after: float = 1.0
    provider: Provider | None = None


@dataclass(frozen=True)
class Delay:
    """Wait ``seconds`` before answering (``then``, or the default agent's answer)."""

    seconds: float
    then: Step | None = None
    provider: Provider | None = None


@dataclass(frozen=True)
class Stall:
    """Send ``after_chunks`` chunks, sleep ``seconds``, then finish the answer."""

    after_chunks: int
    seconds: float
    then: Step | None = None
    provider: Provider | None = None


@dataclass(frozen=True)
class Drop:
    """Send ``after_chunks`` chunks, then close the connection without ending the answer."""

    after_chunks: int
    then: Step | None = None
    provider: Provider | None = None


Step = Text | ToolCall | Error | Delay | Stall | Drop
Answer = Text | ToolCall | Error


@dataclass(frozen=True)
class Usage:
    """Prompt tokens (the whole count), the cached and newly cached parts, and output tokens."""

    prompt: int
    cached: int
    created: int
    output: int


@dataclass
class Reply:
    """An HTTP answer: one part for JSON, one per event for a stream."""

    status: int
    headers: dict[str, str]
    parts: list[bytes]
    stream: bool = False


def json_reply(status: int, body: Json, headers: dict[str, str]) -> Reply:
    return Reply(status, {"content-type": "application/json", **headers}, [dumps(body).encode()])


def dumps(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def pieces(text: str, size: int) -> list[str]:
    """``text`` in pieces of ``size`` characters (at least two when it has two characters)."""
    size = min(size, max(1, len(text) // 2))
    return [text[i : i + size] for i in range(0, len(text), size)] or [""]


def example_arguments(schema: Any) -> Json:
    """A small object a tool's JSON schema accepts: its required properties (or all of them)."""
    properties = schema.get("properties") if isinstance(schema, dict) else None
    if not isinstance(properties, dict):
        return {}
    required = [name for name in schema.get("required", []) if name in properties]
    return {
        name: EXAMPLES.get(properties[name].get("type"), {}) if isinstance(properties[name], dict)
        else "example"
        for name in required or properties
    }  # fmt: skip


class Wire(Protocol):
    """One provider's formats: refusals, errors, answers and the default agent's choice."""

    def refuse(
        self, headers: dict[str, str], body: Json, parsed: bool, api_key: str | None, n: int
    ) -> Reply | None: ...
    def error(self, error: Error, body: Json, count: int, window: int, n: int) -> Reply: ...
    def reply(self, answer: Text | ToolCall, body: Json, usage: Usage, n: int) -> Reply: ...
    def default_answer(self, body: Json) -> Text | ToolCall: ...
    def tool(self, answer: ToolCall, body: Json) -> tuple[str, Json]: ...


def output_text(wire: Wire, answer: Text | ToolCall, body: Json) -> str:
    """What the answer's output tokens are counted over."""
    if isinstance(answer, Text):
        return answer.content()
    name, arguments = wire.tool(answer, body)
    return name + dumps(arguments)


def chosen_tool(answer: ToolCall, tools: list[Json], schema: str) -> tuple[str, Json]:
    """The tool a call names (the first offered when it names none) and its arguments (the
    step's, or an example its schema accepts)."""
    named = [tool for tool in tools if tool.get("name") == answer.name]
    chosen = named[0] if named else tools[0] if tools and answer.name is None else {}
    name = answer.name or chosen.get("name", "tool")
    if answer.arguments is not None:
        return name, answer.arguments
    return name, example_arguments(chosen.get(schema))


def bearer(headers: dict[str, str]) -> str:
    """The token of an ``Authorization: Bearer`` header ("" when there is none)."""
    scheme, _, token = headers.get("authorization", "").partition(" ")
    return token.strip() if scheme.lower() == "bearer" else ""


def retry_after(seconds: float) -> str:
    return str(int(seconds)) if seconds == int(seconds) else str(seconds)


def masked(key: str) -> str:
    """A key as OpenAI shows it in an error: its ends, the middle starred."""
    return key[:3] + "*" * max(0, len(key) - 7) + key[-4:] if len(key) > 7 else "*" * len(key)


class OpenAIWire:
    """OpenAI Chat Completions."""

    KEYS_URL = "https://platform.openai.com/account/api-keys"
    FINGERPRINT = "fp_upstream"

    def _error(self, status: int, message: str, kind: str, n: int, **more: Any) -> Reply:
        error = {"message": message, "type": kind, "param": None, "code": None, **more}
        return json_reply(status, {"error": error}, {"x-request-id": f"req_{n:032x}"})

    def refuse(
        self, headers: dict[str, str], body: Json, parsed: bool, api_key: str | None, n: int
    ) -> Reply | None:
        key = bearer(headers)
        if not key:
            message = (
                "You didn't provide an API key. You need to provide your API key in an "
                "Authorization header using Bearer auth (i.e. Authorization: Bearer YOUR_KEY), or "
                "as the password field (with blank username) if you're accessing the API from "
                "your browser and are prompted for a username and password. You can obtain an API "
                f"key from {self.KEYS_URL}."
            )
            return self._error(401, message, "invalid_request_error", n)
        if api_key is not None and key != api_key:
            message = f"Incorrect API key provided: {masked(key)}. You can find your API key at "
            return self._error(
                401, message + f"{self.KEYS_URL}.", "invalid_request_error", n,
                code="invalid_api_key",
            )  # fmt: skip
        if not parsed:
            message = (
                "We could not parse the JSON body of your request. (HINT: This likely means you "
                "aren't using your HTTP library correctly. The OpenAI API expects a JSON payload, "
                "but what was sent was not valid JSON. If you have trouble figuring out how to "
                "fix this, please contact us through our help center at help.openai.com.)"
            )
            return self._error(400, message, "invalid_request_error", n)
        if "model" not in body:
            return self._error(
                400, "you must provide a model parameter", "invalid_request_error", n
            )
        if not isinstance(body.get("messages"), list):
            return self._error(
                400, "Missing required parameter: 'messages'.", "invalid_request_error", n,
                param="messages", code="missing_required_parameter",
            )  # fmt: skip
        return None

    def error(self, error: Error, body: Json, count: int, window: int, n: int) -> Reply:
        model = body.get("model", "gpt-4o")
        if error.kind == "overflow":
            limit = min(window, count - 1)
            message = (
                f"This model's maximum context length is {limit} tokens. However, your messages "
                f"resulted in {count} tokens. Please reduce the length of the messages."
            )
            return self._error(
                400, message, "invalid_request_error", n,
                param="messages", code="context_length_exceeded",
            )  # fmt: skip
        if error.kind == "rate_limit":
            message = (
                f"Rate limit reached for {model} in organization org-upstream on tokens per min "
                f"(TPM): Limit 30000, Used 30000, Requested {count}. Please try again in "
                f"{retry_after(error.retry_after)}s. Visit "
                "https://platform.openai.com/account/rate-limits to learn more."
            )
            reply = self._error(429, message, "tokens", n, code="rate_limit_exceeded")
            reply.headers["retry-after"] = retry_after(error.retry_after)
            return reply
        if error.kind == "server":
            message = "The server had an error while processing your request. Sorry about that!"
            return self._error(500, message, "server_error", n)
        message = (
            "That model is currently overloaded with other requests. You can retry your request, "
            "or contact us through our help center at help.openai.com if the error persists. "
            f"(Please include the request ID req_{n:032x} in your message.)"
        )
        return self._error(503, message, "server_error", n)

    def default_answer(self, body: Json) -> Text | ToolCall:
        messages = body["messages"]
        last = messages[-1] if messages and isinstance(messages[-1], dict) else {}
        offered = body.get("tools") and body.get("tool_choice") != "none"
        return ToolCall() if offered and last.get("role") == "user" else Text()

    def tool(self, answer: ToolCall, body: Json) -> tuple[str, Json]:
        tools = [t.get("function", {}) for t in body.get("tools") or [] if isinstance(t, dict)]
        return chosen_tool(answer, tools, "parameters")

    def reply(self, answer: Text | ToolCall, body: Json, usage: Usage, n: int) -> Reply:
        headers = {"x-request-id": f"req_{n:032x}", "openai-processing-ms": "1"}
        base = {"id": f"chatcmpl-upstream{n:06d}", "created": int(time.time()),
                "model": body["model"], "service_tier": "default",
                "system_fingerprint": self.FINGERPRINT}  # fmt: skip
        if isinstance(answer, Text):
            message: Json = {"role": "assistant", "content": answer.content()}
            finish = "stop"
        else:
            name, arguments = self.tool(answer, body)
            call = {"id": f"call_upstream{n:06d}", "type": "function",
                    "function": {"name": name, "arguments": dumps(arguments)}}  # fmt: skip
            message, finish = (
                {"role": "assistant", "content": None, "tool_calls": [call]},
                "tool_calls",
            )
        if body.get("stream"):
            return self._stream(base, message, finish, body, usage, headers)
        message |= {"refusal": None, "annotations": []}
        completion = {**base, "object": "chat.completion", "usage": self._usage(usage),
                      "choices": [{"index": 0, "message": message, "logprobs": None,
                                   "finish_reason": finish}]}  # fmt: skip
        return json_reply(200, completion, headers)

    def _usage(self, usage: Usage) -> Json:
        return {
            "prompt_tokens": usage.prompt,
            "completion_tokens": usage.output,
            "total_tokens": usage.prompt + usage.output,
            "prompt_tokens_details": {"cached_tokens": usage.cached, "audio_tokens": 0},
            "completion_tokens_details": {"reasoning_tokens": 0, "audio_tokens": 0,
                                          "accepted_prediction_tokens": 0,
                                          "rejected_prediction_tokens": 0},
        }  # fmt: skip

    def _stream(
        self, base: Json, message: Json, finish: str, body: Json, usage: Usage,
        headers: dict[str, str],
    ) -> Reply:  # fmt: skip
        options = body.get("stream_options")
        with_usage = isinstance(options, dict) and options.get("include_usage") is True
        extra: Json = {"usage": None} if with_usage else {}

        def chunk(delta: Json, reason: str | None = None) -> bytes:
            choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": reason}
            event = {**base, "object": "chat.completion.chunk", "choices": [choice], **extra}
            return f"data: {dumps(event)}\n\n".encode()

        if message["content"] is not None:
            first: Json = {"role": "assistant", "content": "", "refusal": None}
            deltas: list[Json] = [{"content": p} for p in pieces(message["content"], TEXT_PIECE)]
        else:
            call = message["tool_calls"][0]
            first = {"role": "assistant", "content": None, "refusal": None,
                     "tool_calls": [{"index": 0, "id": call["id"], "type": "function",
                                     "function": {"name": call["function"]["name"],
                                                  "arguments": ""}}]}  # fmt: skip
            arguments = pieces(call["function"]["arguments"], ARGUMENTS_PIECE)
            deltas = [{"tool_calls": [{"index": 0, "function": {"arguments": piece}}]}
                      for piece in arguments]  # fmt: skip
        parts = [chunk(first), *map(chunk, deltas), chunk({}, finish)]
        if with_usage:
            final = {**base, "object": "chat.completion.chunk", "choices": [],
                     "usage": self._usage(usage)}  # fmt: skip
            parts.append(f"data: {dumps(final)}\n\n".encode())
        parts.append(b"data: [DONE]\n\n")
        sse = {"content-type": "text/event-stream; charset=utf-8", **headers}
        return Reply(200, sse, parts, stream=True)


class AnthropicWire:
    """Anthropic Messages."""

    def _error(self, status: int, kind: str, message: str, n: int) -> Reply:
        body = {"type": "error", "error": {"type": kind, "message": message},
                "request_id": f"req_upstream{n:012d}"}  # fmt: skip
        return json_reply(status, body, {"request-id": f"req_upstream{n:012d}"})

    def refuse(
        self, headers: dict[str, str], body: Json, parsed: bool, api_key: str | None, n: int
    ) -> Reply | None:
        # The API takes the key as x-api-key or, as the SDK sends it since 2.x, a bearer token.
        key = headers.get("x-api-key") or bearer(headers)
        if not key:
            return self._error(401, "authentication_error", "x-api-key header is required", n)
        if api_key is not None and key != api_key:
            return self._error(401, "authentication_error", "invalid x-api-key", n)
        version = headers.get("anthropic-version")
        if version is None:
            message = "anthropic-version: header is required"
            return self._error(400, "invalid_request_error", message, n)
        if not VERSION.fullmatch(version):
            message = f'anthropic-version: "{version}" is not a valid version'
            return self._error(400, "invalid_request_error", message, n)
        for name in ("model", "messages", "max_tokens"):
            if name not in body:
                return self._error(400, "invalid_request_error", f"{name}: Field required", n)
        if not isinstance(body["messages"], list):
            message = "messages: Input should be a valid list"
            return self._error(400, "invalid_request_error", message, n)
        return None

    def error(self, error: Error, body: Json, count: int, window: int, n: int) -> Reply:
        if error.kind == "overflow":
            message = f"prompt is too long: {count} tokens > {min(window, count - 1)} maximum"
            return self._error(400, "invalid_request_error", message, n)
        if error.kind == "rate_limit":
            message = (
                "This request would exceed the rate limit for your organization "
                "(org-upstream) of 30,000 input tokens per minute. For details, refer to: "
                "https://docs.claude.com/en/api/rate-limits. You can see the response headers "
                "for current usage. Please reduce the prompt length or the maximum tokens "
                "requested, or try again later. You may also contact sales at "
                "https://claude.com/contact-sales to discuss your options for a rate limit "
                "increase."
            )
            reply = self._error(429, "rate_limit_error", message, n)
            reply.headers["retry-after"] = retry_after(error.retry_after)
            return reply
        if error.kind == "server":
            return self._error(500, "api_error", "Internal server error", n)
        return self._error(529, "overloaded_error", "Overloaded", n)

    def default_answer(self, body: Json) -> Text | ToolCall:
        messages = body["messages"]
        last = messages[-1] if messages and isinstance(messages[-1], dict) else {}
        content = last.get("content")
        results = isinstance(content, list) and any(
            isinstance(block, dict) and block.get("type") == "tool_result" for block in content
        )
        choice = body.get("tool_choice")
        offered = body.get("tools") and not (
            isinstance(choice, dict) and choice.get("type") == "none"
        )
        return ToolCall() if offered and last.get("role") == "user" and not results else Text()

    def tool(self, answer: ToolCall, body: Json) -> tuple[str, Json]:
        tools = [t for t in body.get("tools") or [] if isinstance(t, dict)]
        return chosen_tool(answer, tools, "input_schema")

    def reply(self, answer: Text | ToolCall, body: Json, usage: Usage, n: int) -> Reply:
        headers = {"request-id": f"req_upstream{n:012d}"}
        if isinstance(answer, Text):
            block: Json = {"type": "text", "text": answer.content()}
            stop = "end_turn"
        else:
            name, arguments = self.tool(answer, body)
            block = {"type": "tool_use", "id": f"toolu_upstream{n:06d}", "name": name,
                     "input": arguments}  # fmt: skip
            stop = "tool_use"
        prompt = {"input_tokens": usage.prompt - usage.cached - usage.created,
                  "cache_creation_input_tokens": usage.created,
                  "cache_read_input_tokens": usage.cached}  # fmt: skip
        message = {"id": f"msg_upstream{n:06d}", "type": "message", "role": "assistant",
                   "model": body["model"], "content": [block], "stop_reason": stop,
                   "stop_sequence": None,
                   "usage": {**prompt, "output_tokens": usage.output,
                             "service_tier": "standard"}}  # fmt: skip
        if not body.get("stream"):
            return json_reply(200, message, headers)
        return self._stream(message, block, prompt, usage, headers)

    def _stream(
        self, message: Json, block: Json, prompt: Json, usage: Usage, headers: dict[str, str]
    ) -> Reply:
        def event(name: str, data: Json) -> bytes:
            return f"event: {name}\ndata: {dumps({'type': name, **data})}\n\n".encode()

        start = {**message, "content": [], "stop_reason": None,
                 "usage": {**prompt, "output_tokens": 1, "service_tier": "standard"}}  # fmt: skip
        if block["type"] == "text":
            opened: Json = {"type": "text", "text": ""}
            deltas = [{"type": "text_delta", "text": p} for p in pieces(block["text"], TEXT_PIECE)]
        else:
            opened = {**block, "input": {}}
            json_text = dumps(block["input"])
            deltas = [{"type": "input_json_delta", "partial_json": p}
                      for p in pieces(json_text, ARGUMENTS_PIECE)]  # fmt: skip
        parts = [
            event("message_start", {"message": start}),
            event("content_block_start", {"index": 0, "content_block": opened}),
            event("ping", {}),
            *(event("content_block_delta", {"index": 0, "delta": d}) for d in deltas),
            event("content_block_stop", {"index": 0}),
            event("message_delta", {"delta": {"stop_reason": message["stop_reason"],
                                              "stop_sequence": None},
                                    "usage": {"output_tokens": usage.output}}),
            event("message_stop", {}),
        ]  # fmt: skip
        sse = {"content-type": "text/event-stream; charset=utf-8", **headers}
        return Reply(200, sse, parts, stream=True)


WIRES: dict[str, Wire] = {"openai": OpenAIWire(), "anthropic": AnthropicWire()}
