"""A real local OpenAI + Anthropic upstream, for the proxy's tests and its benchmark.

The providers cannot be reached from here, so ``Upstream`` serves their two chat endpoints over
real HTTP on a loopback port (Starlette under uvicorn, in a thread of the test process), with the
providers' own wire formats, headers and error bodies, so the official SDKs parse it as they would
the real thing:

- ``POST /v1/chat/completions`` (OpenAI; needs ``Authorization: Bearer``), ``POST /v1/responses``
  (OpenAI Responses, tests/upstream_responses.py: reasoning items whose ``encrypted_content``
  must come back byte for byte) and ``POST /v1/messages`` (Anthropic; needs ``anthropic-version``
  and a key: ``x-api-key``, or a bearer token as the SDK sends it since 2.x), each non-streaming
  or as SSE. ``api_key`` makes one key the only good one.
- What each request gets is scripted: ``script`` is a queue of steps, one consumed per request
  (the first one whose ``provider`` is unset or names the request's provider). With no step left,
  a deterministic agent answers: it calls the request's first tool (arguments made from the
  tool's schema) when the last message is a user prompt, and answers text otherwise (after a tool
  result, or when no tool is offered or ``tool_choice`` is none).
- The prompt is counted as the o200k_base tokens of the compact JSON of the request's ``tools``,
  ``system`` and ``messages``, or ``instructions`` and ``input`` (in that order;
  ``json.dumps(..., separators=(",", ":"), ensure_ascii=False)`` of a dict holding those
  present). Over ``window`` it is refused with the
  provider's real context-overflow error, before any step is consumed.
- Prompt caching as the providers report it: a prompt whose first 128-token blocks (at least 1024
  tokens) repeat an earlier prompt's to the same model and provider reports them cached. OpenAI
  (both APIs) always caches (``prompt_tokens`` counts the whole prompt, ``cached_tokens`` the
  reused part); Anthropic only for a request with a ``cache_control`` marker, and then, as
  Anthropic does, ``input_tokens`` is what is left after ``cache_read_input_tokens`` and
  ``cache_creation_input_tokens`` (the new whole blocks): the three add up to the count.
- ``prompt_count``, when given, is the provider's own tokenizer: it counts each request's prompt
  in place of the o200k count of its JSON, and the cached parts scale with it.
- ``requests`` records every request in order; ``cancelled`` those whose client went away before
  the answer (or the stream) ended: seen by the server, as the proof that a proxy cancels.
"""

from __future__ import annotations

import collections
import itertools
import json
import threading
from array import array
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import anyio
import xxhash
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from app.adapters.tokenizers import load_encoding
from tests.serving import Serving
from tests.upstream_anthropic import AnthropicWire
from tests.upstream_openai import OpenAIWire
from tests.upstream_responses import ResponsesWire
from tests.upstream_wires import (
    DEFAULT_TEXT,
    Answer,
    Delay,
    Drop,
    Error,
    Json,
    Provider,
    Reply,
    Stall,
    Step,
    Text,
    ToolCall,
    Usage,
    Wire,
    dumps,
    output_text,
)

__all__ = [
    "DEFAULT_TEXT",
    "Delay",
    "Drop",
    "Error",
    "Seen",
    "Stall",
    "Step",
    "Text",
    "ToolCall",
    "Upstream",
]

CACHE_BLOCK = 128
CACHE_MIN = 1024
INLINE_COUNT_BYTES = 32 * 1024
WIRES: dict[Provider, Wire] = {"openai": OpenAIWire(), "anthropic": AnthropicWire()}


@dataclass(frozen=True)
class Seen:
    """One request as the upstream received it (header names in lower case)."""

    path: str
    headers: dict[str, str]
    body: Json
    query: str = ""


@dataclass(frozen=True)
class Plan:
    """How a step is served: the answer (None: the default agent's) and its timing."""

    answer: Answer | None = None
    delay: float = 0.0
    stall: Stall | None = None
    drop: Drop | None = None


def plan(step: Step | None) -> Plan:
    match step:
        case None:
            return Plan()
        case Delay(seconds=seconds, then=then):
            inner = plan(then)
            return replace(inner, delay=inner.delay + seconds)
        case Stall(then=then):
            return replace(plan(then), stall=step)
        case Drop(then=then):
            return replace(plan(then), drop=step)
        case _:
            return Plan(step)


class Upstream:
    """The local upstream server: a context manager, serving while inside the ``with``."""

    def __init__(
        self,
        window: int = 1_000_000,
        api_key: str | None = None,
        prompt_count: Callable[[Json], int] | None = None,
    ) -> None:
        """``window``: the context window in tokens; ``api_key``: the only key accepted (any
        non-empty key when None); ``prompt_count``: the provider's count of a request's prompt
        (see the module docstring)."""
        self.window = window
        self.api_key = api_key
        self.prompt_count = prompt_count
        self.requests: list[Seen] = []
        self.cancelled: list[Seen] = []
        self.script: collections.deque[Step] = collections.deque()
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._ids = itertools.count(1)
        self._cache: set[bytes] = set()
        self._encoding = load_encoding("o200k_base")
        # Its own Responses wire: it remembers the reasoning it gave out.
        self.wires: dict[Provider, Wire] = {**WIRES, "responses": ResponsesWire()}
        routes = [
            Route("/v1/chat/completions", self._endpoint("openai"), methods=["POST"]),
            Route("/v1/responses", self._endpoint("responses"), methods=["POST"]),
            Route("/v1/messages", self._endpoint("anthropic"), methods=["POST"]),
            Route("/v1/models", self._models, methods=["GET"]),
        ]
        self._serving = Serving(Starlette(routes=routes), "upstream")
        self.url = self._serving.url
        self.openai_base = f"{self.url}/v1"
        self.anthropic_base = self.url

    def __enter__(self) -> Upstream:
        self._serving.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self._serving.__exit__(*exc)

    def cancel(self, seen: Seen) -> None:
        with self._changed:
            self.cancelled.append(seen)
            self._changed.notify_all()

    def wait_cancelled(self, count: int = 1, timeout: float = 30) -> list[Seen]:
        """``cancelled`` once it holds ``count`` requests (the server notices a client leave
        soon after it does, not at once)."""
        with self._changed:
            if not self._changed.wait_for(lambda: len(self.cancelled) >= count, timeout):
                raise AssertionError(f"{len(self.cancelled)} cancelled requests, not {count}")
            return list(self.cancelled)

    async def _models(self, request: Request) -> Response:
        """The model list (both providers answer ``GET /v1/models`` with a ``data`` list)."""
        headers = {name.lower(): value for name, value in request.headers.items()}
        with self._lock:
            self.requests.append(Seen(request.url.path, headers, {}, request.url.query))
        models = [
            {
                "id": "gpt-4o",
                "object": "model",
                "created": 0,
                "owned_by": "stub",
                "type": "model",
                "display_name": "stub",
                "created_at": "2026-01-01T00:00:00Z",
            }
        ]
        return Response(
            json.dumps(
                {
                    "object": "list",
                    "data": models,
                    "has_more": False,
                    "first_id": "gpt-4o",
                    "last_id": "gpt-4o",
                }
            ),
            media_type="application/json",
        )

    def _endpoint(self, provider: Provider) -> Callable[[Request], Any]:
        async def endpoint(request: Request) -> Response:
            return await self._answer(request, provider)

        return endpoint

    async def _answer(self, request: Request, provider: Provider) -> Response:
        wire = self.wires[provider]
        raw = await request.body()
        try:
            parsed = json.loads(raw)
        except ValueError:
            parsed = None
        body: Json = parsed if isinstance(parsed, dict) else {}
        headers = {name.lower(): value for name, value in request.headers.items()}
        seen = Seen(request.url.path, headers, body, request.url.query)
        with self._lock:
            self.requests.append(seen)
        n = next(self._ids)
        refusal = wire.refuse(headers, body, parsed is not None, self.api_key, n)
        if refusal is not None:
            return Scripted(self, seen, refusal, Plan())
        # A thread hop costs more than counting a small prompt; a large one must not hold the loop.
        if len(raw) < INLINE_COUNT_BYTES:
            counts = self._count(provider, body)
        else:
            counts = await anyio.to_thread.run_sync(self._count, provider, body)
        if counts[0] > self.window:
            overflow = wire.error(Error("overflow"), body, counts[0], self.window, n)
            return Scripted(self, seen, overflow, Plan())
        steps = plan(self._take(provider))
        answer = steps.answer or wire.default_answer(body)
        if not isinstance(answer, Error):
            return Scripted(self, seen, self._reply(wire, answer, body, counts, n), steps)
        error = wire.error(answer, body, counts[0], self.window, n)
        if answer.after_chunks is None or not body.get("stream"):
            return Scripted(self, seen, error, steps)
        # Broken off mid-stream: the default answer's first chunks, then the error event.
        broken = self._reply(wire, wire.default_answer(body), body, counts, n)
        broken.parts[answer.after_chunks :] = [wire.stream_error(error)]
        return Scripted(self, seen, broken, steps)

    def _reply(
        self, wire: Wire, answer: Text | ToolCall, body: Json, counts: tuple[int, int, int], n: int
    ) -> Reply:
        output = self._tokens(output_text(wire, answer, body))
        return wire.reply(answer, body, Usage(*counts, max(1, output)), n)

    def _take(self, provider: Provider) -> Step | None:
        """The first scripted step for ``provider``, removed from the script."""
        with self._lock:
            for index, step in enumerate(self.script):
                if step.provider in (None, provider):
                    del self.script[index]
                    return step
        return None

    def _tokens(self, text: str) -> int:
        return len(self._encoding.encode_ordinary(text))

    def _count(self, provider: Provider, body: Json) -> tuple[int, int, int]:
        """The prompt's token count, its cached prefix and the part newly cached (see the module
        docstring for the rules)."""
        total, cached, created = self._json_count(provider, body)
        if self.prompt_count is None:
            return total, cached, created
        own = self.prompt_count(body)
        return own, cached * own // max(1, total), created * own // max(1, total)

    def _json_count(self, provider: Provider, body: Json) -> tuple[int, int, int]:
        fields = ("tools", "system", "messages", "instructions", "input")
        prompt = {key: body[key] for key in fields if key in body}
        text = dumps(prompt)
        tokens = self._encoding.encode_ordinary(text)
        caching = provider != "anthropic" or '"cache_control"' in text
        if not caching or len(tokens) < CACHE_MIN:
            return len(tokens), 0, 0
        digest = xxhash.xxh3_128(f"{provider}\0{body.get('model')}".encode())
        cached, blocks = 0, len(tokens) // CACHE_BLOCK * CACHE_BLOCK
        with self._lock:
            for end in range(CACHE_BLOCK, blocks + 1, CACHE_BLOCK):
                digest.update(array("I", tokens[end - CACHE_BLOCK : end]).tobytes())
                key = digest.digest()
                if key in self._cache and cached == end - CACHE_BLOCK:
                    cached = end
                self._cache.add(key)
        cached = cached if cached >= CACHE_MIN else 0
        return len(tokens), cached, blocks - cached


class Scripted(Response):
    """Sends a ``Reply`` as its plan says (delay, stall, drop), and records a client that leaves
    before the end in ``upstream.cancelled``."""

    def __init__(self, upstream: Upstream, seen: Seen, reply: Reply, steps: Plan) -> None:
        self.upstream, self.seen, self.reply, self.steps = upstream, seen, reply, steps

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        finished = False
        async with anyio.create_task_group() as group:

            async def watch() -> None:
                while (await receive())["type"] != "http.disconnect":
                    pass
                if not finished:
                    self.upstream.cancel(self.seen)
                    group.cancel_scope.cancel()

            group.start_soon(watch)
            finished = await self._send(send)
            group.cancel_scope.cancel()

    async def _send(self, send: Send) -> bool:
        """Send the reply; False when it was dropped on purpose."""
        reply, steps = self.reply, self.steps
        if steps.delay:
            await anyio.sleep(steps.delay)
        parts = reply.parts if reply.stream else halves(reply.parts[0], steps)
        headers = dict(reply.headers)
        if not reply.stream:
            headers["content-length"] = str(sum(map(len, parts)))
        raw_headers = [(k.encode(), v.encode()) for k, v in headers.items()]
        await send({"type": "http.response.start", "status": reply.status, "headers": raw_headers})
        # A JSON body is cut in two halves: a stall or a drop falls between them.
        drop_at = None if steps.drop is None else steps.drop.after_chunks if reply.stream else 1
        stall_at = None if steps.stall is None else steps.stall.after_chunks if reply.stream else 1
        for sent, part in enumerate(parts):
            if sent == drop_at:
                return False
            if sent == stall_at and steps.stall is not None:
                await anyio.sleep(steps.stall.seconds)
            await send({"type": "http.response.body", "body": part, "more_body": True})
            # uvicorn's send neither yields nor fails once the client has gone: the watcher must
            # get its turn, or a fast stream would run to its end unnoticed.
            await anyio.lowlevel.checkpoint()
        await send({"type": "http.response.body", "body": b"", "more_body": False})
        return True


def halves(body: bytes, steps: Plan) -> list[bytes]:
    """A JSON body in two parts when a stall or a drop is to fall inside it."""
    if steps.stall is None and steps.drop is None:
        return [body]
    middle = len(body) // 2
    return [body[:middle], body[middle:]]
