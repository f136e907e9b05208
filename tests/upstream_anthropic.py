"""The upstream stub's Anthropic Messages: bodies, SSE events, headers and error texts as Anthropic
sends them.
"""

from __future__ import annotations

import re

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

# A dated API version, as the SDKs send them (the API itself knows which dates exist).
VERSION = re.compile(r"\d{4}-\d{2}-\d{2}")


class AnthropicWire:
    """Anthropic Messages."""

    def _error(self, status: int, kind: str, message: str, n: int) -> Reply:
        body = {
            "type": "error",
            "error": {"type": kind, "message": message},
            "request_id": f"req_upstream{n:012d}",
        }
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

    def stream_error(self, error: Reply) -> bytes:
        """An error in a stream already begun: an ``error`` event with the error's body."""
        return b"event: error\ndata: " + error.parts[0] + b"\n\n"

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
            block = {
                "type": "tool_use",
                "id": f"toolu_upstream{n:06d}",
                "name": name,
                "input": arguments,
            }
            stop = "tool_use"
        prompt = {
            "input_tokens": usage.prompt - usage.cached - usage.created,
            "cache_creation_input_tokens": usage.created,
            "cache_read_input_tokens": usage.cached,
        }
        message = {
            "id": f"msg_upstream{n:06d}",
            "type": "message",
            "role": "assistant",
            "model": body["model"],
            "content": [block],
            "stop_reason": stop,
            "stop_sequence": None,
            "usage": {**prompt, "output_tokens": usage.output, "service_tier": "standard"},
        }
        if not body.get("stream"):
            return json_reply(200, message, headers)
        return self._stream(message, block, prompt, usage, headers)

    def _stream(
        self, message: Json, block: Json, prompt: Json, usage: Usage, headers: dict[str, str]
    ) -> Reply:
        def event(name: str, data: Json) -> bytes:
            return f"event: {name}\ndata: {dumps({'type': name, **data})}\n\n".encode()

        start = {
            **message,
            "content": [],
            "stop_reason": None,
            "usage": {**prompt, "output_tokens": 1, "service_tier": "standard"},
        }
        if block["type"] == "text":
            opened: Json = {"type": "text", "text": ""}
            deltas = [{"type": "text_delta", "text": p} for p in pieces(block["text"], TEXT_PIECE)]
        else:
            opened = {**block, "input": {}}
            json_text = dumps(block["input"])
            deltas = [
                {"type": "input_json_delta", "partial_json": p}
                for p in pieces(json_text, ARGUMENTS_PIECE)
            ]
        parts = [
            event("message_start", {"message": start}),
            event("content_block_start", {"index": 0, "content_block": opened}),
            event("ping", {}),
            *(event("content_block_delta", {"index": 0, "delta": d}) for d in deltas),
            event("content_block_stop", {"index": 0}),
            event(
                "message_delta",
                {
                    "delta": {"stop_reason": message["stop_reason"], "stop_sequence": None},
                    "usage": {"output_tokens": usage.output},
                },
            ),
            event("message_stop", {}),
        ]
        sse = {"content-type": "text/event-stream; charset=utf-8", **headers}
        return Reply(200, sse, parts, stream=True)
