"""The base of a scripted provider stand-in for an agent scenario (see tests/agents/__init__.py).

A ``StandIn`` serves every path and method on a loopback port, records each request as
``Received`` (path, query, headers, JSON body, the provider's token count of its prompt, and
what the subclass said of it: its ``kind`` and ``answer``), and lets the subclass answer it.
"""

from __future__ import annotations

import json
import threading
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from app.adapters.tokenizers import load_encoding
from tests.serving import Serving
from tests.upstream_wires import dumps

Json = dict[str, Any]
METHODS = ["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"]
# The parts of a request's body each provider counts as its prompt.
PROMPT_FIELDS = {
    "anthropic": ("tools", "system", "messages"),
    "openai": ("tools", "messages"),
    "responses": ("tools", "instructions", "input"),
    "gemini": ("tools", "systemInstruction", "contents"),
}


@dataclass
class Received:
    """One request as the stand-in received it (header names in lower case).

    ``kind``: what the stand-in took it for ("main", "sub" for a sub-agent, "side" for a side
    request, "other" for anything not a model call); ``answer``: what it answered ("tool:<name>",
    "text", "error:<kind>", "status:<code>"); ``tokens``: the provider's count of its prompt.
    """

    method: str
    path: str
    query: str
    headers: dict[str, str]
    body: Json
    tokens: int = 0
    kind: str = "other"
    answer: str = ""


@dataclass
class Record:
    """What the stand-in reports: its requests and the problems it saw in them."""

    requests: list[Received] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


class StandIn:
    """A provider's API on a loopback port, answering as ``answer`` decides (override it)."""

    provider = "anthropic"

    def __init__(self, options: Json, workdir: Path) -> None:
        """``options``: the scenario's ``standin_options``; ``workdir``: the agent's directory."""
        self.options = options
        self.workdir = workdir
        self.record = Record()
        self.lock = threading.Lock()
        self._encoding = load_encoding("o200k_base")
        routes = [Route("/{path:path}", self._endpoint, methods=METHODS)]
        self._serving = Serving(Starlette(routes=routes), "stand-in")
        self.url = self._serving.url

    def __enter__(self) -> StandIn:
        self._serving.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self._serving.__exit__(*exc)

    def report(self) -> Json:
        """The record as JSON."""
        with self.lock:
            return asdict(self.record)

    def problem(self, text: str) -> None:
        """Note a problem the test must fail on (e.g. a signature that came back changed)."""
        with self.lock:
            self.record.problems.append(text)

    def tokens(self, body: Json) -> int:
        """The prompt's tokens: o200k_base over the compact JSON of the provider's prompt
        fields (as tests/upstreams.py counts)."""
        prompt = {k: body[k] for k in PROMPT_FIELDS[self.provider] if k in body}
        return len(self._encoding.encode_ordinary(dumps(prompt)))

    async def _endpoint(self, request: Request) -> Response:
        raw = await request.body()
        try:
            parsed = json.loads(raw) if raw else {}
        except ValueError:
            parsed = {}
        body = parsed if isinstance(parsed, dict) else {}
        headers = {k.lower(): v for k, v in request.headers.items()}
        seen = Received(request.method, request.url.path, request.url.query, headers, body)
        seen.tokens = self.tokens(body) if body else 0
        with self.lock:
            self.record.requests.append(seen)
        return await self.answer(seen)

    async def answer(self, seen: Received) -> Response:
        """The answer to ``seen``; set ``seen.kind`` and ``seen.answer`` on the way."""
        seen.answer = "status:404"
        return Response(status_code=404)
