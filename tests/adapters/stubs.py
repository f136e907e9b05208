"""Real HTTP servers for adapter tests: a stdlib server on a free loopback port, in a thread."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass(frozen=True)
class Received:
    """One request as the server saw it (header names in lower case)."""

    path: str
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


@dataclass(frozen=True)
class Answer:
    status: int
    body: Any
    headers: dict[str, str] = field(default_factory=dict)


# None: never answer (until the server stops), to make the client time out.
Handler = Callable[[Received], Answer | None]


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that gave up (a timeout) is expected here, not an error."""


class StubServer:
    """Answers every POST with ``handler``; keeps every request it received, in order."""

    def __init__(self, handler: Handler) -> None:
        self.requests: list[Received] = []
        self.stopping = threading.Event()
        self.server = _Server(("127.0.0.1", 0), self._handler_class(handler))
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self._serve, daemon=True)

    def _handler_class(self, handler: Handler) -> type[BaseHTTPRequestHandler]:
        stub = self

        class Handle(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length", "0")))
                headers = {k.lower(): v for k, v in self.headers.items()}
                received = Received(self.path, headers, body)
                stub.requests.append(received)
                answer = handler(received)
                if answer is None:
                    stub.stopping.wait(30)
                    self.close_connection = True
                    return
                data = answer.body if isinstance(answer.body, bytes) else json.dumps(answer.body)
                raw = data if isinstance(data, bytes) else data.encode()
                self.send_response(answer.status)
                for name, value in {"content-type": "application/json", **answer.headers}.items():
                    self.send_header(name, value)
                self.send_header("content-length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

            def log_message(self, format: str, *args: Any) -> None:
                """Quiet."""

        return Handle

    def _serve(self) -> None:
        self.server.serve_forever(poll_interval=0.02)  # stops quickly at the end of a test

    def __enter__(self) -> StubServer:
        self.thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.stopping.set()
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=10)
