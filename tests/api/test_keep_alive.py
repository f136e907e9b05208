"""Kept-alive connections of a real `ctxc serve`: the server never closes one a client may still
reuse, and the read deadline does not run while a connection waits for its next request.

The failure these guard against: a client pool (httpx's, and so the OpenAI and Anthropic SDKs',
keeps an idle connection 5 s) sends its next request on a connection the server is closing at
that very moment, because the server's own keep-alive (uvicorn's default: 5 s) ran out first.
The client sees the connection closed under its request; the server saw no request and logs
nothing. The raw sockets below are such a client at its worst: no liveness check before reuse.
"""

from __future__ import annotations

import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

from app.settings import Settings
from tests.conftest import Api, free_port
from tests.processes import ctxc_command, ctxc_env, serving

HTTPX_POOL_EXPIRY = httpx.Limits().keepalive_expiry  # 5 s, the SDKs' default too
REQUEST = b"GET /healthz HTTP/1.1\r\nhost: ctxc\r\n\r\n"


@contextmanager
def server(database_url: str, tmp_path: Path, **settings: str) -> Iterator[tuple[str, int]]:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    env = ctxc_env(CTXC_DATABASE_URL=database_url, CTXC_AUTH="keys", **settings)
    log = tmp_path / "serve.log"
    with (
        log.open("wb") as out,
        serving(
            ctxc_command("serve", "--port", str(port)),
            url,
            log=log.read_text,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        ),
    ):
        yield "127.0.0.1", port


def exchange(connection: socket.socket) -> bytes:
    """Send a request on ``connection`` and read its whole answer (b"" if the server closed
    the connection instead of answering)."""
    try:
        connection.sendall(REQUEST)
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = connection.recv(65536)
            if not chunk:
                return head
            head += chunk
        header, _, body = head.partition(b"\r\n\r\n")
        length = next(
            int(line.split(b":")[1])
            for line in header.split(b"\r\n")
            if line.lower().startswith(b"content-length:")
        )
        while len(body) < length:
            chunk = connection.recv(65536)
            assert chunk, "the connection closed in the middle of an answer"
            body += chunk
        return header + b"\r\n\r\n" + body
    except (BrokenPipeError, ConnectionResetError):
        return b""


def test_a_connection_idle_as_long_as_a_client_pool_keeps_it_is_still_served(
    api: Api, tmp_path: Path
) -> None:
    """Reproduces the closed connection: with uvicorn's default keep-alive (5 s) the second
    request finds the connection closed under it."""
    assert Settings().keep_alive_seconds > HTTPX_POOL_EXPIRY + 1
    with (
        server(api.database_url, tmp_path) as address,
        socket.create_connection(address, timeout=10) as connection,
    ):
        assert exchange(connection).startswith(b"HTTP/1.1 200")
        time.sleep(HTTPX_POOL_EXPIRY + 1)  # the pool would reuse it until now, and later
        second = exchange(connection)
    assert second.startswith(b"HTTP/1.1 200"), "the connection was closed under the request"


def test_the_keep_alive_is_advertised_and_is_what_the_server_keeps(
    api: Api, tmp_path: Path
) -> None:
    with (
        server(api.database_url, tmp_path, CTXC_KEEP_ALIVE_SECONDS="1") as address,
        socket.create_connection(address, timeout=10) as connection,
    ):
        first = exchange(connection)
        assert b"\r\nkeep-alive: timeout=1\r\n" in first.lower()
        # Idle beyond the advertised time, the server closes the connection cleanly, between
        # requests: the client reads an end of stream, not an answer cut short.
        assert connection.recv(1) == b""


def test_the_read_deadline_does_not_run_while_a_connection_waits_between_requests(
    api: Api, tmp_path: Path
) -> None:
    with (
        server(api.database_url, tmp_path, CTXC_REQUEST_READ_TIMEOUT_SECONDS="1") as address,
        socket.create_connection(address, timeout=10) as connection,
    ):
        assert exchange(connection).startswith(b"HTTP/1.1 200")
        time.sleep(2)  # twice the read deadline, idle between requests
        assert exchange(connection).startswith(b"HTTP/1.1 200")
