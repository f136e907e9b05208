"""A real summariser webhook on a loopback port that counts its calls, and `ctxc serve`
processes configured to call it."""

from __future__ import annotations

import json
import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from tests.conftest import free_port
from tests.processes import ctxc_command, ctxc_env, serving

SECRET = "webhook-secret"


@dataclass
class Webhook:
    """Answers each summary after ``delay`` seconds (a call stays open while ``hold`` is set);
    a call whose body holds ``fail_on`` (when set) is answered 500 and counted in ``failed``."""

    delay: float
    url: str = ""
    calls: int = 0
    failed: int = 0
    fail_on: str = ""
    called: threading.Event = field(default_factory=threading.Event)
    hold: threading.Event = field(default_factory=threading.Event)
    closing: threading.Event = field(default_factory=threading.Event)
    lock: threading.Lock = field(default_factory=threading.Lock)


@contextmanager
def webhook(delay: float) -> Iterator[Webhook]:
    """The webhook, served for the block."""
    hook = Webhook(delay)

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            raw = self.rfile.read(int(self.headers["Content-Length"]))
            body = json.loads(raw)
            failing = bool(hook.fail_on) and hook.fail_on.encode() in raw
            with hook.lock:
                hook.calls += 1
                hook.failed += failing
            hook.called.set()
            hook.closing.wait(hook.delay)
            while hook.hold.is_set() and not hook.closing.wait(0.05):
                pass
            count = len(body["messages"])
            answer = json.dumps(
                {"summary": f"Decisions:\n- {count} messages about src/app.py"}
            ).encode()
            try:
                self.send_response(500 if failing else 200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)
            except OSError:  # the caller went away (killed)
                pass

        def log_message(self, *_: object) -> None:
            return None

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    hook.url = f"http://127.0.0.1:{server.server_address[1]}/summarize"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield hook
    finally:
        hook.closing.set()
        server.shutdown()
        server.server_close()


def serve_env(database_url: str, hook: Webhook, lease_seconds: float) -> dict[str, str]:
    return ctxc_env(
        **{
            "CTXC_DATABASE_URL": database_url,
            "CTXC_AUTH": "keys",
            "CTXC_LOG_LEVEL": "warning",
            "CTXC_SUMMARIZER": "webhook",
            "CTXC_SUMMARIZER_URL": hook.url,
            "CTXC_SUMMARIZER_WEBHOOK_SECRET": SECRET,
            "CTXC_SUMMARIZER_RETRIES": "0",
            "CTXC_COMPACTION_LEASE_SECONDS": str(lease_seconds),
        }
    )


@contextmanager
def serve(env: dict[str, str]) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """`ctxc serve` in a process of its own with ``env``: its URL and the process."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    command = ctxc_command("serve", "--port", str(port))
    with serving(command, url, env=env, stdout=subprocess.DEVNULL) as process:
        yield url, process
