"""Clients that send too much or too slowly cannot hold `ctxc serve`: an over-limit body, chunked
too, gets its 413 as soon as the limit is passed and the connection closes; a request whose
headers or body take longer than CTXC_REQUEST_READ_TIMEOUT_SECONDS is cut off with a 408; an
answer the client stops reading is dropped after CTXC_RESPONSE_WRITE_TIMEOUT_SECONDS. Raw sockets
against a real `ctxc serve` process, on loopback."""

from __future__ import annotations

import asyncio
import select
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass

import httpx
import pytest

from app.storage.migrate import upgrade
from tests.conftest import free_port
from tests.processes import ctxc_command, ctxc_env, serving

LIMIT = 1024 * 1024
SEND_BUFFER = 64 * 1024
TIMEOUT_S = 2.0
MARGIN_S = 3.0  # the machine is shared: a timer may fire late under load


@dataclass(frozen=True)
class Server:
    url: str
    address: tuple[str, int]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """`ctxc serve` (local mode, SQLite) with a 1 MiB body limit and 2 s client timeouts."""
    database_url = f"sqlite+aiosqlite:///{tmp_path_factory.mktemp('slow') / 'ctxc.db'}"
    upgrade(database_url)
    port = free_port()
    env = ctxc_env(
        CTXC_DATABASE_URL=database_url,
        CTXC_LOG_LEVEL="warning",
        CTXC_MAX_BODY_BYTES=str(LIMIT),
        CTXC_REQUEST_READ_TIMEOUT_SECONDS=str(TIMEOUT_S),
        CTXC_RESPONSE_WRITE_TIMEOUT_SECONDS=str(TIMEOUT_S),
    )
    url = f"http://127.0.0.1:{port}"
    command = ctxc_command("serve", "--port", str(port))
    with serving(command, url, env=env, stdout=subprocess.DEVNULL):
        yield Server(url, ("127.0.0.1", port))


def _read_until_closed(sock: socket.socket, within_s: float) -> tuple[bytes, float]:
    """What the server sends until it closes the connection, and when it closed (monotonic);
    fails if it is still open after ``within_s``."""
    answer = b""
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        sock.settimeout(max(0.01, deadline - time.monotonic()))
        try:
            data = sock.recv(65536)
        except TimeoutError:
            break
        except ConnectionResetError:
            return answer, time.monotonic()
        if not data:
            return answer, time.monotonic()
        answer += data
    raise AssertionError(f"the connection is still open after {within_s} s; got {answer[:200]!r}")


def test_an_over_limit_chunked_body_is_refused_and_not_read_to_the_end(server: Server) -> None:
    total = 50 * 1024 * 1024
    piece = b"x" * 65536
    chunk = b"%x\r\n" % len(piece) + piece + b"\r\n"
    sent = 0
    answer = b""
    with socket.create_connection(server.address, timeout=10) as sock:
        # A small send buffer: what is counted as sent has left this process's kernel, so the
        # count measures what the server took in, not what the client's kernel queued (4 MiB).
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, SEND_BUFFER)
        sock.sendall(
            b"POST /v1/compile HTTP/1.1\r\nHost: ctxc\r\nContent-Type: application/json\r\n"
            b"Transfer-Encoding: chunked\r\n\r\n"
        )
        while sent < total:
            if select.select([sock], [], [], 0)[0]:
                break  # the 413 is here (and the close follows)
            try:
                sock.sendall(chunk)  # blocks (then times out) if the server stops reading
            except (BrokenPipeError, ConnectionResetError):
                break  # the server closed the connection
            sent += len(piece)
        answer, _ = _read_until_closed(sock, 5)
    assert answer.startswith(b"HTTP/1.1 413 "), answer[:200]
    assert b"application/problem+json" in answer
    print(f"413 and close after {sent} of {total} bytes sent")
    # The limit, and at most what the server's receive buffer (kernel and uvicorn's) held.
    assert sent <= LIMIT + 3 * 1024 * 1024, f"the server read {sent} bytes of an over-limit body"


def test_an_over_limit_content_length_is_still_refused_before_the_body(server: Server) -> None:
    with socket.create_connection(server.address, timeout=10) as sock:
        sock.sendall(
            b"POST /v1/compile HTTP/1.1\r\nHost: ctxc\r\nContent-Type: application/json\r\n"
            b"Content-Length: %d\r\n\r\n" % (50 * LIMIT)
        )
        answer, _ = _read_until_closed(sock, 5)
    assert answer.startswith(b"HTTP/1.1 413 "), answer[:200]


def _cut_off_after(sock: socket.socket, trickle: bytes) -> tuple[bytes, float]:
    """Send ``trickle`` one byte every 0.2 s until the server answers or closes; return what it
    sent and how long after the start it closed."""
    start = time.monotonic()
    answer = b""
    for byte in trickle:
        assert time.monotonic() - start < TIMEOUT_S + MARGIN_S, "the slow client was not cut off"
        try:
            sock.sendall(bytes([byte]))
        except (BrokenPipeError, ConnectionResetError):
            break
        if select.select([sock], [], [], 0.2)[0]:
            break
    rest, closed_at = _read_until_closed(sock, TIMEOUT_S + MARGIN_S)
    return answer + rest, closed_at - start


SLOW_HEADERS = b"GET /healthz HTTP/1.1\r\nHost: ctxc\r\n" + b"X-Slow: " + b"a" * 200


def test_headers_sent_too_slowly_are_cut_off_with_408(server: Server) -> None:
    with socket.create_connection(server.address, timeout=10) as sock:
        answer, after = _cut_off_after(sock, SLOW_HEADERS)
    assert answer.startswith(b"HTTP/1.1 408 "), answer[:200]
    assert TIMEOUT_S - 0.5 <= after <= TIMEOUT_S + MARGIN_S


def test_a_body_sent_too_slowly_is_cut_off_with_408(server: Server) -> None:
    with socket.create_connection(server.address, timeout=10) as sock:
        sock.sendall(
            b"POST /v1/tokens/count HTTP/1.1\r\nHost: ctxc\r\nContent-Type: application/json\r\n"
            b"Content-Length: 1000\r\n\r\n"
        )
        answer, after = _cut_off_after(sock, b"{" + b" " * 999)
    assert answer.startswith(b"HTTP/1.1 408 "), answer[:200]
    assert b'"status": 408' in answer
    assert TIMEOUT_S - 0.5 <= after <= TIMEOUT_S + MARGIN_S
    counted = 'ctxc_http_requests_total{method="POST",route="/v1/tokens/count",status="408"}'
    assert counted in httpx.get(f"{server.url}/metrics").text  # not a 400 in the metrics


def test_a_connection_that_sends_nothing_is_closed(server: Server) -> None:
    with socket.create_connection(server.address, timeout=10) as sock:
        start = time.monotonic()
        _, closed_at = _read_until_closed(sock, TIMEOUT_S + MARGIN_S)
    assert closed_at - start >= TIMEOUT_S - 0.5


def _answer(sock: socket.socket) -> bytes:
    """One whole response with a Content-Length, read from ``sock``."""
    data = b""
    while b"\r\n\r\n" not in data:
        more = sock.recv(65536)
        assert more, f"closed mid-answer: {data!r}"
        data += more
    head, _, body = data.partition(b"\r\n\r\n")
    length = next(
        int(line.split(b":")[1])
        for line in head.lower().split(b"\r\n")
        if line.startswith(b"content-length:")
    )
    while len(body) < length:
        more = sock.recv(65536)
        assert more, "closed mid-body"
        body += more
    return head


def test_requests_in_time_keep_their_connection_across_idle_gaps(server: Server) -> None:
    request = (
        b"POST /v1/tokens/count HTTP/1.1\r\nHost: ctxc\r\nContent-Type: application/json\r\n"
        b'Content-Length: 16\r\n\r\n{"messages": []}'
    )
    with socket.create_connection(server.address, timeout=10) as sock:
        answers = []
        for _ in range(2):
            sock.sendall(request)
            answers.append(_answer(sock))
            time.sleep(TIMEOUT_S + 0.5)  # idle between requests is the keep-alive timer's (5 s)
    assert [a.split(b"\r\n")[0] for a in answers] == [b"HTTP/1.1 200 OK"] * 2


def test_an_answer_the_client_stops_reading_is_dropped(server: Server) -> None:
    with httpx.Client(base_url=server.url, timeout=60) as client:
        sid = client.post("/v1/sessions", json={}).json()["id"]
        text = "word " * 180_000  # 900 kB a message, 8 MB in all: more than the send buffers
        for _ in range(9):
            message = {"role": "user", "content": text}
            appended = client.post(f"/v1/sessions/{sid}/messages", json={"messages": [message]})
            assert appended.status_code == 201, appended.text
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.connect(server.address)
        sock.sendall(f"GET /v1/sessions/{sid}/export HTTP/1.1\r\nHost: ctxc\r\n\r\n".encode())
        time.sleep(TIMEOUT_S + MARGIN_S)  # not reading
        answer, _ = _read_until_closed(sock, 10)
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200 ")
    length = int(head.lower().split(b"content-length: ")[1].split(b"\r\n")[0])
    assert length > 8_000_000
    assert len(body) < length, "the whole answer waited for the client"


async def _read_to_the_end(reader: asyncio.StreamReader) -> bytes:
    """What the server sends until it closes the connection (by FIN or reset)."""
    answer = b""
    while True:
        try:
            data = await reader.read(65536)
        except ConnectionResetError:
            return answer
        if not data:
            return answer
        answer += data


async def _trickle(address: tuple[str, int], opening: bytes) -> tuple[float, bytes]:
    """Send ``opening``, then one byte every 0.5 s until the server closes the connection;
    return how long that took and what the server answered."""
    reader, writer = await asyncio.open_connection(*address)
    start = time.monotonic()
    writer.write(opening)
    closed = asyncio.ensure_future(_read_to_the_end(reader))
    try:
        while time.monotonic() - start < TIMEOUT_S + MARGIN_S + 5:
            done, _ = await asyncio.wait({closed}, timeout=0.5)
            if done:
                break
            writer.write(b"a")
        else:
            closed.cancel()
            return float("inf"), b""
        return time.monotonic() - start, closed.result()
    finally:
        writer.close()


async def _probe(url: str, until: asyncio.Future[object]) -> tuple[list[float], list[int]]:
    """Ask /healthz and count a request, one after another, until ``until`` is done."""
    latencies: list[float] = []
    statuses: list[int] = []
    async with httpx.AsyncClient(base_url=url, timeout=30) as client:
        for _ in range(2000):  # bounded; ends much sooner
            if until.done():
                break
            start = time.monotonic()
            health = await client.get("/healthz")
            latencies.append(time.monotonic() - start)
            counted = await client.post("/v1/tokens/count", json={"messages": []})
            statuses += [health.status_code, counted.status_code]
            await asyncio.sleep(0.05)
    return latencies, statuses


@pytest.mark.slow
def test_two_hundred_slow_clients_are_all_cut_off_while_others_are_served(
    server: Server,
) -> None:
    headers = b"GET /healthz HTTP/1.1\r\nHost: ctxc\r\nX-Slow: "
    body = (
        b"POST /v1/tokens/count HTTP/1.1\r\nHost: ctxc\r\nContent-Type: application/json\r\n"
        b"Content-Length: 100000\r\n\r\n{"
    )

    async def attack() -> tuple[list[tuple[float, bytes]], list[float], list[int]]:
        slow = asyncio.gather(
            *(_trickle(server.address, headers if n % 2 else body) for n in range(200))
        )
        latencies, statuses = await _probe(server.url, slow)
        return await slow, latencies, statuses

    cut_offs, latencies, statuses = asyncio.run(attack())
    times = [after for after, _ in cut_offs]
    print(
        f"200 slow clients cut off after {min(times):.2f}-{max(times):.2f} s; "
        f"{sum(a.startswith(b'HTTP/1.1 408 ') for _, a in cut_offs)} got a 408; "
        f"{len(latencies)} /healthz probes meanwhile, the longest {max(latencies) * 1000:.0f} ms"
    )
    assert max(times) <= TIMEOUT_S + MARGIN_S, "a slow client was not cut off in time"
    assert min(times) >= TIMEOUT_S - 0.5, "a slow client was cut off before its time"
    assert all(answer.startswith(b"HTTP/1.1 408 ") for _, answer in cut_offs)
    assert set(statuses) == {200}
    assert len(latencies) >= 10 and max(latencies) < 2.0
    with httpx.Client(base_url=server.url) as client:
        assert client.post("/v1/tokens/count", json={"messages": []}).status_code == 200
