"""A local LLM summariser speaking the Anthropic Messages protocol, served by uvicorn on a
loopback port in a thread of the benchmark: it records each request with the simulated time it
arrived at, waits ``delay_s`` and answers a short summary in the ledger's sections (the
structure ctxc asks for and checks, `app/domain/summaries/sections.py`)."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

SUMMARY = """\
Goals:
- Make the test suite pass without changing the public API (#1)
Decisions:
- Keep the public API; fix the import cycle in src/app/service.py (#3)
Current values:
- The retry backoff starts at 0.5 s and doubles up to 8 s (#5)
Open tasks:
- The flaky test_retry_backoff (#7)
Files and identifiers:
- src/app/service.py, src/app/models.py, tests/test_service.py (#2)
Errors:
- ImportError in src/app/cli.py, fixed (#4)
"""


@dataclass
class Recorded:
    """One summariser request: its body, and the simulated time it arrived at."""

    body: dict[str, Any]
    at: float


@dataclass
class Stub:
    """The stub's state: the simulated clock requests are stamped with (settable between
    runs), the requests it received, and how long it takes to answer."""

    delay_s: float = 0.0
    clock: Callable[[], float] = lambda: 0.0
    requests: list[Recorded] = field(default_factory=list)
    url: str = ""

    def take(self) -> list[Recorded]:
        """The requests received since the last call."""
        taken, self.requests = self.requests, []
        return taken

    async def messages(self, request: Request) -> JSONResponse:
        body = await request.json()
        self.requests.append(Recorded(body, self.clock()))
        if self.delay_s:
            await asyncio.sleep(self.delay_s)
        return JSONResponse(
            {
                "id": f"msg_stub_{len(self.requests)}",
                "type": "message",
                "role": "assistant",
                "model": body.get("model", "stub"),
                "stop_reason": "end_turn",
                "content": [{"type": "text", "text": SUMMARY}],
                "usage": {"input_tokens": 0, "output_tokens": 60},
            }
        )


@contextmanager
def serving_stub(delay_s: float = 0.0) -> Iterator[Stub]:
    """A stub answering ``POST {url}/v1/messages`` while inside the ``with``."""
    stub = Stub(delay_s=delay_s)
    app = Starlette(routes=[Route("/v1/messages", stub.messages, methods=["POST"])])
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    stub.url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    config = uvicorn.Config(
        app,
        log_config=None,
        log_level=None,
        access_log=False,
        lifespan="off",
        timeout_graceful_shutdown=1,
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, args=([sock],), daemon=True)
    thread.start()
    while not server.started:
        if not thread.is_alive():
            raise RuntimeError("the summariser stub did not start")
        time.sleep(0.01)
    try:
        yield stub
    finally:
        server.should_exit = True
        thread.join(timeout=30)
        sock.close()


def stub_profiles(url: str, window_tokens: int = 200_000) -> str:
    """``CTXC_SUMMARIZER_PROFILES`` declaring the stub as profile ``stub``."""
    profile = {
        "kind": "anthropic",
        "url": url,
        "model": "claude-stub",
        "api_key": "bench",
        "window_tokens": window_tokens,
        "timeout_seconds": 60,
        "deadline_seconds": 300,
    }
    return json.dumps({"stub": profile})
