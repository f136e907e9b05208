"""OpenAI's Responses API (``POST /v1/responses``) served locally.

``ResponsesStub``: a minimal server for the tests that send a compiled ``input`` through the
official SDK: it refuses, as the API does (a 400 with an ``invalid_request_error``), any request
``responses_problems`` finds a rule broken in, and otherwise answers with one assistant message
saying how many input items it read.

``ResponsesWire``: the Responses protocol of ``tests.upstreams.Upstream`` (streaming, tool calls,
reasoning items with ``encrypted_content``, usage, the real overflow error, Bearer auth)."""

from __future__ import annotations

import base64
import hashlib
import json
import time
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from app.domain.validity import responses_problems
from tests.serving import Serving
from tests.upstream_openai import OpenAIWire
from tests.upstream_wires import (
    ARGUMENTS_PIECE,
    TEXT_PIECE,
    Error,
    Json,
    Reply,
    Text,
    ToolCall,
    Usage,
    chosen_tool,
    dumps,
    json_reply,
    pieces,
)


class ResponsesStub:
    """Serving while inside the ``with``; ``requests`` holds every body it was sent."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        app = Starlette(routes=[Route("/v1/responses", self._create, methods=["POST"])])
        self._serving = Serving(app, "the Responses stub")
        self.base_url = f"{self._serving.url}/v1"

    def __enter__(self) -> ResponsesStub:
        self._serving.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self._serving.__exit__(*exc)

    async def _create(self, request: Request) -> JSONResponse:
        body = await request.json()
        self.requests.append(body)
        items = body.get("input")
        if isinstance(items, str):
            items = [{"role": "user", "content": items}]
        problems = responses_problems(
            body.get("instructions"), items if isinstance(items, list) else []
        )
        if problems:
            error = {
                "message": problems[0],
                "type": "invalid_request_error",
                "param": "input",
                "code": None,
            }
            return JSONResponse({"error": error}, status_code=400)
        text = f"I read {len(items)} input items."
        return JSONResponse(
            {
                "id": f"resp_{len(self.requests):040x}",
                "object": "response",
                "created_at": int(time.time()),
                "status": "completed",
                "error": None,
                "incomplete_details": None,
                "instructions": body.get("instructions"),
                "model": body.get("model"),
                "parallel_tool_calls": True,
                "temperature": 1.0,
                "tool_choice": "auto",
                "tools": [],
                "top_p": 1.0,
                "metadata": {},
                "output": [
                    {
                        "type": "message",
                        "id": f"msg_{len(self.requests):040x}",
                        "status": "completed",
                        "role": "assistant",
                        "content": [{"type": "output_text", "text": text, "annotations": []}],
                    }
                ],
                "usage": {
                    "input_tokens": 10,
                    "output_tokens": 5,
                    "total_tokens": 15,
                    "input_tokens_details": {"cached_tokens": 0},
                    "output_tokens_details": {"reasoning_tokens": 0},
                },
            }
        )


class ResponsesWire(OpenAIWire):
    """OpenAI Responses (``POST /v1/responses``) for ``tests.upstreams.Upstream``: Bearer auth,
    the body checked by ``responses_problems`` and every reasoning item checked to be one this
    server gave out, byte for byte (the API decrypts ``encrypted_content`` and refuses what it
    cannot); answers whole or as the API's SSE events, each with a reasoning item first (its
    ``encrypted_content`` an opaque blob) and a usage; the API's real overflow error."""

    def __init__(self) -> None:
        self.issued: set[str] = set()  # every encrypted_content given out

    def refuse(
        self, headers: dict[str, str], body: Json, parsed: bool, api_key: str | None, n: int
    ) -> Reply | None:
        # Auth, JSON and model as Chat Completions checks them (its "messages" check aside).
        refused = super().refuse(headers, {**body, "messages": []}, parsed, api_key, n)
        if refused is not None:
            return refused
        items = body.get("input")
        if isinstance(items, str):
            items = [{"role": "user", "content": items}]
        if not isinstance(items, list):
            return self._error(
                400,
                "Missing required parameter: 'input'.",
                "invalid_request_error",
                n,
                param="input",
                code="missing_required_parameter",
            )
        problems = responses_problems(body.get("instructions"), items)
        if problems:
            return self._error(400, problems[0], "invalid_request_error", n, param="input")
        for item in items:
            reasoning = isinstance(item, dict) and item.get("type") == "reasoning"
            if reasoning and item.get("encrypted_content") not in self.issued:
                message = f"The encrypted content for item {item.get('id')} could not be verified."
                return self._error(
                    400, message, "invalid_request_error", n, code="invalid_encrypted_content"
                )
        return None

    def error(self, error: Error, body: Json, count: int, window: int, n: int) -> Reply:
        if error.kind == "overflow":  # the API's own words: no numbers in them
            message = (
                "Your input exceeds the context window of this model. Please adjust your input "
                "and try again."
            )
            return self._error(
                400,
                message,
                "invalid_request_error",
                n,
                param="input",
                code="context_length_exceeded",
            )
        return super().error(error, body, count, window, n)

    def stream_error(self, error: Reply) -> bytes:
        found = json.loads(error.parts[0])["error"]
        event = {
            "type": "error",
            "code": found.get("code"),
            "message": found["message"],
            "param": found.get("param"),
            "sequence_number": 1,
        }
        return f"event: error\ndata: {dumps(event)}\n\n".encode()

    def default_answer(self, body: Json) -> Text | ToolCall:
        items = body["input"]
        last = items[-1] if isinstance(items, list) and items else {}
        user = isinstance(items, str) or (isinstance(last, dict) and last.get("role") == "user")
        offered = self._functions(body) and body.get("tool_choice") != "none"
        return ToolCall() if offered and user else Text()

    def _functions(self, body: Json) -> list[Json]:
        tools = body.get("tools") or []
        return [t for t in tools if isinstance(t, dict) and t.get("type") == "function"]

    def tool(self, answer: ToolCall, body: Json) -> tuple[str, Json]:
        return chosen_tool(answer, self._functions(body), "parameters")

    def reply(self, answer: Text | ToolCall, body: Json, usage: Usage, n: int) -> Reply:
        headers = {"x-request-id": f"req_{n:032x}", "openai-processing-ms": "1"}
        items = [self._reasoning(n), self._item(answer, body, n)]
        response = {
            "id": f"resp_{n:048x}",
            "object": "response",
            "created_at": int(time.time()),
            "status": "completed",
            "error": None,
            "incomplete_details": None,
            "instructions": body.get("instructions"),
            "model": body["model"],
            "output": items,
            "parallel_tool_calls": True,
            "store": body.get("store", True),
            "tools": body.get("tools") or [],
            "usage": self._usage(usage),
            "prompt_cache_key": body.get("prompt_cache_key"),
        }
        if body.get("stream"):
            return self._events(response, headers)
        return json_reply(200, response, headers)

    def _reasoning(self, n: int) -> Json:
        # Opaque to the client, as the API's is: base64 of bytes no one else makes.
        blob = base64.b64encode(hashlib.sha256(f"reasoning {n}".encode()).digest() * 6).decode()
        self.issued.add(blob)
        return {"id": f"rs_{n:048x}", "type": "reasoning", "summary": [], "encrypted_content": blob}

    def _item(self, answer: Text | ToolCall, body: Json, n: int) -> Json:
        if isinstance(answer, Text):
            text = {
                "type": "output_text",
                "annotations": [],
                "logprobs": [],
                "text": answer.content(),
            }
            return {
                "id": f"msg_{n:048x}",
                "type": "message",
                "status": "completed",
                "content": [text],
                "role": "assistant",
            }
        name, arguments = self.tool(answer, body)
        return {
            "id": f"fc_{n:048x}",
            "type": "function_call",
            "status": "completed",
            "arguments": dumps(arguments),
            "call_id": f"call_{n:024x}",
            "name": name,
        }

    def _usage(self, usage: Usage) -> Json:
        return {
            "input_tokens": usage.prompt,
            "input_tokens_details": {"cached_tokens": usage.cached},
            "output_tokens": usage.output,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": usage.prompt + usage.output,
        }

    def _events(self, response: Json, headers: dict[str, str]) -> Reply:
        events: list[Json] = []
        started = {**response, "status": "in_progress", "output": [], "usage": None}
        events += [
            {"type": "response.created", "response": started},
            {"type": "response.in_progress", "response": started},
        ]
        for index, item in enumerate(response["output"]):
            events += _item_events(index, item)
        events.append({"type": "response.completed", "response": response})
        parts = [
            f"event: {e['type']}\ndata: {dumps({**e, 'sequence_number': i})}\n\n".encode()
            for i, e in enumerate(events)
        ]
        sse = {"content-type": "text/event-stream; charset=utf-8", **headers}
        return Reply(200, sse, parts, stream=True)


def _item_events(index: int, item: Json) -> list[Json]:
    """The events of one output item, as the API streams it: added (empty), its deltas, done."""
    kind, at = item["type"], {"output_index": index, "item_id": item["id"]}
    if kind == "message":
        text = item["content"][0]["text"]
        empty = {"type": "output_text", "annotations": [], "logprobs": [], "text": ""}
        out = [
            {
                "type": "response.output_item.added",
                "output_index": index,
                "item": {**item, "status": "in_progress", "content": []},
            },
            {"type": "response.content_part.added", **at, "content_index": 0, "part": empty},
        ]
        out += [
            {
                "type": "response.output_text.delta",
                **at,
                "content_index": 0,
                "delta": p,
                "logprobs": [],
            }
            for p in pieces(text, TEXT_PIECE)
        ]
        out += [
            {
                "type": "response.output_text.done",
                **at,
                "content_index": 0,
                "text": text,
                "logprobs": [],
            },
            {
                "type": "response.content_part.done",
                **at,
                "content_index": 0,
                "part": item["content"][0],
            },
        ]
    elif kind == "function_call":
        out = [
            {
                "type": "response.output_item.added",
                "output_index": index,
                "item": {**item, "status": "in_progress", "arguments": ""},
            }
        ]
        out += [
            {"type": "response.function_call_arguments.delta", **at, "delta": p}
            for p in pieces(item["arguments"], ARGUMENTS_PIECE)
        ]
        out.append(
            {"type": "response.function_call_arguments.done", **at, "arguments": item["arguments"]}
        )
    else:
        out = [{"type": "response.output_item.added", "output_index": index, "item": item}]
    return [*out, {"type": "response.output_item.done", "output_index": index, "item": item}]
