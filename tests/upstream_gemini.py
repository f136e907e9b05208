"""A real local stand-in of the Gemini API (``generativelanguage.googleapis.com``), for the Gemini
sidecar's tests and Gemini CLI's scenario.

``GeminiWire`` holds the protocol: the API key (``x-goog-api-key`` or ``key=``) refused with
Google's real 403 and 400 bodies, a request without ``contents`` refused as the API refuses it,
the real "input token count exceeds the maximum" 400 over the window, answers as
``GenerateContentResponse`` (whole, or as ``alt=sse`` events, or as the JSON array of chunks
without it) with ``usageMetadata``, and Gemini 3's thought signatures: every function call
answered carries a ``thoughtSignature`` (bytes with ``+``, ``/`` and ``=``) remembered with the
call; a model turn sent back whose function call lacks its signature gets Gemini 3's 400, and one
whose signature is not the one issued for that call is noted as a problem.

``GeminiUpstream`` serves it on a loopback port: ``POST /v1beta/models/{model}:generateContent``
and ``:streamGenerateContent``, ``:countTokens``, ``GET /v1beta/models``; a deterministic agent
calls the first declared function when the last content is a user's text, and answers text
otherwise. ``requests`` records every request; ``problems`` what the tests must fail on.
"""

from __future__ import annotations

import base64
import hashlib
import itertools
import json
import threading
from dataclasses import dataclass, field
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from app.adapters.tokenizers import load_encoding
from tests.serving import Serving
from tests.upstream_wires import TEXT_PIECE, Json, dumps, example_arguments, pieces

NO_KEY = (
    "Method doesn't allow unregistered callers (callers without established identity). Please "
    "use API Key or other form of API consumer identity to call this API."
)
BAD_KEY = "API key not valid. Please pass a valid API key."
MISSING_SIGNATURE = (
    "Function call is missing a thought_signature in functionCall parts. This is required for "
    "tools to work correctly, and missing thought_signature may lead to degraded model "
    "performance. Additional data, function call `default_api:{name}` , position {position}. "
    "Please refer to https://ai.google.dev/gemini-api/docs/thought-signatures for more details."
)
FINAL_TEXT = "Done: the task is complete."


@dataclass(frozen=True)
class Answer:
    """An HTTP answer of the stand-in."""

    status: int
    body: Any
    stream: list[Json] | None = None  # the chunks of a 200 stream


def error(status: int, name: str, message: str, details: list[Json] | None = None) -> Answer:
    """Google's error body (``google.rpc.Status`` under ``error``)."""
    found: Json = {"code": status, "message": message, "status": name}
    if details:
        found["details"] = details
    return Answer(status, {"error": found})


def overflow(count: int, window: int) -> Answer:
    message = (
        f"The input token count ({count}) exceeds the maximum number of tokens allowed ({window})."
    )
    return error(400, "INVALID_ARGUMENT", message)


@dataclass
class GeminiWire:
    """The Gemini API's rules and answers; ``api_key``: the only key accepted (any when None)."""

    api_key: str | None = None
    issued: dict[str, str] = field(default_factory=dict)  # signature -> the call, as JSON
    problems: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def refuse(self, headers: dict[str, str], query: dict[str, str], body: Any) -> Answer | None:
        """Google's refusal of the request, or None."""
        key = headers.get("x-goog-api-key") or query.get("key")
        if not key:
            return error(403, "PERMISSION_DENIED", NO_KEY)
        if self.api_key is not None and key != self.api_key:
            info = {
                "@type": "type.googleapis.com/google.rpc.ErrorInfo",
                "reason": "API_KEY_INVALID",
                "domain": "googleapis.com",
                "metadata": {"service": "generativelanguage.googleapis.com"},
            }
            return error(400, "INVALID_ARGUMENT", BAD_KEY, [info])
        if not isinstance(body, dict):
            return error(400, "INVALID_ARGUMENT", "Invalid JSON payload received.")
        contents = body.get("contents")
        if not isinstance(contents, list) or not contents:
            text = "* GenerateContentRequest.contents: contents is not specified\n"
            return error(400, "INVALID_ARGUMENT", text)
        return self.unsigned(contents)

    def unsigned(self, contents: list[Any]) -> Answer | None:
        """Gemini 3's 400 for a function call sent back without its signature; a signature
        that is not the one issued for its call is a problem."""
        for i, content in enumerate(contents):
            if not isinstance(content, dict) or content.get("role") != "model":
                continue
            for position, part in enumerate(content.get("parts") or []):
                call = part.get("functionCall") if isinstance(part, dict) else None
                if call is None:
                    continue
                signature = part.get("thoughtSignature")
                if signature is None:
                    name = call.get("name")
                    return error(
                        400,
                        "INVALID_ARGUMENT",
                        MISSING_SIGNATURE.format(name=name, position=position + 1),
                    )
                with self.lock:
                    issued = self.issued.get(signature)
                # A client's own label (``id``) is no part of what was signed.
                if issued != dumps({k: v for k, v in call.items() if k != "id"}):
                    with self.lock:
                        self.problems.append(f"contents[{i}]: a signature not as issued: {part}")
        return None

    def sign(self, call: Json, n: int) -> str:
        """A signature for ``call``, remembered."""
        digest = hashlib.sha256(f"{n}{dumps(call)}".encode()).digest() * 3
        signature = base64.b64encode(b"\xfb\xff" + digest).decode()
        with self.lock:
            self.issued[signature] = dumps(call)
        return signature

    def answer(self, parts: list[Json], prompt: int, stream: bool, model: str) -> Answer:
        """A 200 with ``parts`` as the model's content (in chunks when streamed)."""
        output = max(1, len(dumps(parts)) // 4)
        usage = {
            "promptTokenCount": prompt,
            "candidatesTokenCount": output,
            "totalTokenCount": prompt + output,
            "thoughtsTokenCount": 7,
        }
        reason = "STOP"
        whole = response(
            [{"content": {"role": "model", "parts": parts}, "finishReason": reason, "index": 0}],
            usage,
            model,
        )
        if not stream:
            return Answer(200, whole)
        chunks = [
            response([{"content": {"role": "model", "parts": [piece]}, "index": 0}], usage, model)
            for piece in split(parts)
        ]
        chunks[-1]["candidates"][0]["finishReason"] = reason
        return Answer(200, None, chunks)


def response(candidates: list[Json], usage: Json, model: str) -> Json:
    return {
        "candidates": candidates,
        "usageMetadata": usage,
        "modelVersion": model,
        "responseId": "resp-standin",
    }


def split(parts: list[Json]) -> list[Json]:
    """Parts as streamed: a text in pieces (the signature on its first), a call whole."""
    out: list[Json] = []
    for part in parts:
        text = part.get("text")
        if not isinstance(text, str) or len(text) < 2:
            out.append(part)
            continue
        unsigned = {k: v for k, v in part.items() if k != "thoughtSignature"}
        for j, piece in enumerate(pieces(text, TEXT_PIECE)):
            out.append({**(part if j == 0 else unsigned), "text": piece})
    return out


def sse(chunks: list[Json]) -> bytes:
    """Chunks as Gemini's ``alt=sse`` events."""
    return b"".join(f"data: {dumps(c)}\r\n\r\n".encode() for c in chunks)


def to_response(answer: Answer, events: bool) -> Response:
    if answer.stream is None:
        return Response(dumps(answer.body), answer.status, media_type="application/json")
    if events:
        return Response(sse(answer.stream), 200, media_type="text/event-stream")
    return Response(dumps(answer.stream), 200, media_type="application/json")


@dataclass(frozen=True)
class Seen:
    """A request as received (header names in lower case)."""

    method: str
    path: str
    query: str
    headers: dict[str, str]
    body: Any


class GeminiUpstream:
    """The stand-in on a loopback port (see the module docstring); ``window`` in tokens."""

    def __init__(self, window: int = 1_000_000, api_key: str | None = None) -> None:
        self.window = window
        self.wire = GeminiWire(api_key)
        self.requests: list[Seen] = []
        self._ids = itertools.count(1)
        self._encoding = load_encoding("o200k_base")
        routes = [Route("/{path:path}", self._endpoint, methods=["GET", "POST", "HEAD"])]
        self._serving = Serving(Starlette(routes=routes), "gemini")
        self.url = self._serving.url

    def __enter__(self) -> GeminiUpstream:
        self._serving.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self._serving.__exit__(*exc)

    @property
    def problems(self) -> list[str]:
        return self.wire.problems

    def tokens(self, body: Json) -> int:
        """o200k_base over the compact JSON of the prompt's fields."""
        prompt = {k: body[k] for k in ("tools", "systemInstruction", "contents") if k in body}
        return len(self._encoding.encode_ordinary(dumps(prompt)))

    async def _endpoint(self, request: Request) -> Response:
        raw = await request.body()
        try:
            body: Any = json.loads(raw) if raw else None
        except ValueError:
            body = None
        headers = {k.lower(): v for k, v in request.headers.items()}
        path = request.url.path
        self.requests.append(Seen(request.method, path, request.url.query, headers, body))
        query = dict(request.query_params)
        model, _, method = path.removeprefix("/v1beta/models/").partition(":")
        if path == "/v1beta/models":
            return self._models(headers, query, None)
        if path.startswith("/v1beta/models/") and not method:
            return self._models(headers, query, model)
        if method not in ("generateContent", "streamGenerateContent", "countTokens"):
            return to_response(error(404, "NOT_FOUND", f"Not found: {path}"), False)
        refused = self.wire.refuse(headers, query, body)
        if refused is not None:
            return to_response(refused, False)
        count = self.tokens(body)
        if method == "countTokens":
            return to_response(Answer(200, {"totalTokens": count}), False)
        if count > self.window:
            return to_response(overflow(count, self.window), False)
        streamed = method == "streamGenerateContent"
        answer = self.wire.answer(self.parts(body, next(self._ids)), count, streamed, model)
        return to_response(answer, query.get("alt") == "sse")

    def _models(self, headers: dict[str, str], query: dict[str, str], one: str | None) -> Response:
        refused = self.wire.refuse(headers, query, {"contents": [{}]})
        if refused is not None:
            return to_response(refused, False)
        model = {
            "name": "models/gemini-3-pro-preview",
            "inputTokenLimit": self.window,
            "supportedGenerationMethods": ["generateContent", "countTokens"],
        }
        body = model if one else {"models": [model]}
        return to_response(Answer(200, body), False)

    def parts(self, body: Json, n: int) -> list[Json]:
        """The default agent: a call of the first declared function after a user's text, else
        a text; the first part signed."""
        last = body["contents"][-1]
        said = [p for p in last.get("parts") or [] if isinstance(p, dict) and "text" in p]
        declared = [d for t in body.get("tools") or [] for d in t.get("functionDeclarations", [])]
        thought = {"text": f"Thinking about step {n}.", "thought": True}
        if said and declared and last.get("role") == "user":
            first = declared[0]
            call = {"name": first["name"], "args": example_arguments(first.get("parameters"))}
            return [thought, {"functionCall": call, "thoughtSignature": self.wire.sign(call, n)}]
        text = {"text": FINAL_TEXT, "thoughtSignature": self.wire.sign({"text": FINAL_TEXT}, n)}
        return [thought, text]
