"""A recording reverse proxy between the agent and ctxc: what the agent really sent (method, path,
query, headers, JSON body) and what ctxc answered (status, headers), with the answer streamed
through unchanged, piece by piece."""

from __future__ import annotations

import json
import threading
from dataclasses import asdict, dataclass
from typing import Any

import httpx
from starlette.applications import Starlette
from starlette.background import BackgroundTask
from starlette.requests import Request
from starlette.responses import StreamingResponse
from starlette.routing import Route

from tests.agents.standin import METHODS
from tests.serving import Serving

# Hop-by-hop headers (RFC 9110 section 7.6.1), and what the proxy sets itself.
HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-connection",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
        "host",
        "content-length",
    }
)


@dataclass
class Exchange:
    """One request of the agent and ctxc's answer (header names in lower case)."""

    method: str
    path: str
    query: str
    headers: dict[str, str]
    body: Any
    status: int = 0
    answer_headers: dict[str, str] | None = None


class Tap:
    """Serves on a loopback port, forwarding everything to ``target``; ``exchanges`` records."""

    def __init__(self, target: str, timeout: float) -> None:
        self.target = target
        self.timeout = timeout
        self.exchanges: list[Exchange] = []
        self._lock = threading.Lock()
        routes = [Route("/{path:path}", self._forward, methods=METHODS)]
        self._serving = Serving(Starlette(routes=routes), "tap")
        self.url = self._serving.url

    def __enter__(self) -> Tap:
        self._serving.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self._serving.__exit__(*exc)

    def report(self) -> list[dict[str, Any]]:
        with self._lock:
            return [asdict(e) for e in self.exchanges]

    async def _forward(self, request: Request) -> StreamingResponse:
        raw = await request.body()
        headers = {k.lower(): v for k, v in request.headers.items()}
        exchange = Exchange(
            request.method, request.url.path, request.url.query, headers, _json(raw)
        )
        with self._lock:
            self.exchanges.append(exchange)
        client = httpx.AsyncClient(timeout=self.timeout)
        sent = {k: v for k, v in request.headers.items() if k.lower() not in HOP}
        url = httpx.URL(f"{self.target}{request.url.path}", query=request.url.query.encode())
        upstream = await client.send(
            client.build_request(request.method, url, headers=sent, content=raw), stream=True
        )
        exchange.status = upstream.status_code
        exchange.answer_headers = {k.lower(): v for k, v in upstream.headers.items()}

        async def close() -> None:
            await upstream.aclose()
            await client.aclose()

        # aiter_bytes decodes the body: the encoding header goes with the encoded length.
        dropped = HOP | {"content-encoding"}
        kept = {k: v for k, v in exchange.answer_headers.items() if k not in dropped}
        return StreamingResponse(
            upstream.aiter_bytes(), upstream.status_code, kept, background=BackgroundTask(close)
        )


def _json(raw: bytes) -> Any:
    if not raw:
        return None
    try:
        return json.loads(raw)
    except ValueError:
        return {"unparsed": raw[:2000].decode("utf-8", "replace")}
