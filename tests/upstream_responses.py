"""A local server speaking OpenAI's Responses API (``POST /v1/responses``), for the tests that
send a compiled ``input`` through the official SDK: it refuses, as the API does (a 400 with an
``invalid_request_error``), any request ``responses_problems`` finds a rule broken in, and
otherwise answers with one assistant message saying how many input items it read."""

from __future__ import annotations

import time
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from app.domain.validity import responses_problems
from tests.serving import Serving


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
