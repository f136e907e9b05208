"""The upstream stub's OpenAI Chat Completions: bodies, SSE chunks, headers and error texts as
OpenAI sends them.
"""

from __future__ import annotations

import time
from typing import Any

from tests.upstream_wires import (
    ARGUMENTS_PIECE,
    TEXT_PIECE,
    Error,
    Json,
    Reply,
    Text,
    ToolCall,
    Usage,
    bearer,
    chosen_tool,
    dumps,
    json_reply,
    pieces,
    retry_after,
)


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
                401,
                message + f"{self.KEYS_URL}.",
                "invalid_request_error",
                n,
                code="invalid_api_key",
            )
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
                400,
                "Missing required parameter: 'messages'.",
                "invalid_request_error",
                n,
                param="messages",
                code="missing_required_parameter",
            )
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
                400,
                message,
                "invalid_request_error",
                n,
                param="messages",
                code="context_length_exceeded",
            )
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

    def stream_error(self, error: Reply) -> bytes:
        """An error in a stream already begun: its body as one more data event."""
        return b"data: " + error.parts[0] + b"\n\n"

    def default_answer(self, body: Json) -> Text | ToolCall:
        messages = body["messages"]
        last = messages[-1] if messages and isinstance(messages[-1], dict) else {}
        offered = body.get("tools") and body.get("tool_choice") != "none"
        return ToolCall() if offered and last.get("role") == "user" else Text()

    def tool(self, answer: ToolCall, body: Json) -> tuple[str, Json]:
        tools = [t.get("function", {}) for t in body.get("tools") or [] if isinstance(t, dict)]
        return chosen_tool(answer, tools, "parameters")

    def reply(self, answer: Text | ToolCall, body: Json, usage: Usage, n: int) -> Reply:
        headers = {
            "x-request-id": f"req_{n:032x}",
            "openai-processing-ms": "1",
            # What the CDN in front of the API says of the connection (a sidecar keeps it).
            "server-timing": 'cfL4;desc="?proto=TCP&rtt=1"',
        }
        base = {
            "id": f"chatcmpl-upstream{n:06d}",
            "created": int(time.time()),
            "model": body["model"],
            "service_tier": "default",
            "system_fingerprint": self.FINGERPRINT,
        }
        if isinstance(answer, Text):
            message: Json = {"role": "assistant", "content": answer.content()}
            finish = "stop"
        else:
            name, arguments = self.tool(answer, body)
            call = {
                "id": f"call_upstream{n:06d}",
                "type": "function",
                "function": {"name": name, "arguments": dumps(arguments)},
            }
            message, finish = (
                {"role": "assistant", "content": None, "tool_calls": [call]},
                "tool_calls",
            )
        if body.get("stream"):
            return self._stream(base, message, finish, body, usage, headers)
        message |= {"refusal": None, "annotations": []}
        completion = {
            **base,
            "object": "chat.completion",
            "usage": self._usage(usage),
            "choices": [
                {"index": 0, "message": message, "logprobs": None, "finish_reason": finish}
            ],
        }
        return json_reply(200, completion, headers)

    def _usage(self, usage: Usage) -> Json:
        return {
            "prompt_tokens": usage.prompt,
            "completion_tokens": usage.output,
            "total_tokens": usage.prompt + usage.output,
            "prompt_tokens_details": {"cached_tokens": usage.cached, "audio_tokens": 0},
            "completion_tokens_details": {
                "reasoning_tokens": 0,
                "audio_tokens": 0,
                "accepted_prediction_tokens": 0,
                "rejected_prediction_tokens": 0,
            },
        }

    def _stream(
        self,
        base: Json,
        message: Json,
        finish: str,
        body: Json,
        usage: Usage,
        headers: dict[str, str],
    ) -> Reply:
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
            first = {
                "role": "assistant",
                "content": None,
                "refusal": None,
                "tool_calls": [
                    {
                        "index": 0,
                        "id": call["id"],
                        "type": "function",
                        "function": {"name": call["function"]["name"], "arguments": ""},
                    }
                ],
            }
            arguments = pieces(call["function"]["arguments"], ARGUMENTS_PIECE)
            deltas = [
                {"tool_calls": [{"index": 0, "function": {"arguments": piece}}]}
                for piece in arguments
            ]
        parts = [chunk(first), *map(chunk, deltas), chunk({}, finish)]
        if with_usage:
            final = {
                **base,
                "object": "chat.completion.chunk",
                "choices": [],
                "usage": self._usage(usage),
            }
            parts.append(f"data: {dumps(final)}\n\n".encode())
        parts.append(b"data: [DONE]\n\n")
        sse = {"content-type": "text/event-stream; charset=utf-8", **headers}
        return Reply(200, sse, parts, stream=True)
