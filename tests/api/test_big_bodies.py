"""A big body does not stop the server: `ctxc serve` (a process of its own, on each database)
appending a 16 MB batch, then counting its tokens, keeps answering `/healthz` meanwhile."""

from __future__ import annotations

import subprocess
import threading
import time
from collections.abc import Iterator

import httpx
import pytest

from bench.bodies import MESSAGES, big_batch
from tests.conftest import free_port
from tests.processes import ctxc_command, ctxc_env, serving

# Generous: the machine is shared. Before the fix the event loop stopped for the whole parse
# and store of the batch (seconds); now for a garbage collection or one slice of rows at most.
LIVENESS_S = 2.0
JSON = {"content-type": "application/json"}


@pytest.fixture(scope="module")
def server(database_url: str) -> Iterator[str]:
    """`ctxc serve` (local mode) on the test database, taking bodies up to 32 MiB."""
    port = free_port()
    env = ctxc_env(
        CTXC_DATABASE_URL=database_url,
        CTXC_LOG_LEVEL="warning",
        CTXC_MAX_BODY_BYTES=str(32 * 1024 * 1024),
    )
    url = f"http://127.0.0.1:{port}"
    command = ctxc_command("serve", "--port", str(port))
    with serving(command, url, env=env, stdout=subprocess.DEVNULL):
        yield url


def _probe(url: str, stop: threading.Event, latencies: list[float], statuses: list[int]) -> None:
    with httpx.Client(base_url=url, timeout=60) as client:
        while not stop.is_set():
            start = time.perf_counter()
            statuses.append(client.get("/healthz").status_code)
            latencies.append(time.perf_counter() - start)
            time.sleep(0.02)


@pytest.mark.slow
def test_a_16_mb_append_and_count_leave_healthz_answering(server: str) -> None:
    body = big_batch()
    assert len(body) > 15_000_000
    latencies: list[float] = []
    statuses: list[int] = []
    stop = threading.Event()
    probe = threading.Thread(target=_probe, args=(server, stop, latencies, statuses))
    with httpx.Client(base_url=server, timeout=120) as client:
        sid = client.post("/v1/sessions", json={}).json()["id"]
        probe.start()
        try:
            time.sleep(0.3)
            answer = client.post(
                f"/v1/sessions/{sid}/messages",
                content=body,
                headers={"content-type": "application/json", "Idempotency-Key": "big-1"},
            )
            counted = client.post("/v1/tokens/count", content=body, headers=JSON)
        finally:
            stop.set()
            probe.join()
        assert answer.status_code == 201, answer.text[:500]
        assert answer.json()["last_seq"] == MESSAGES
        assert counted.status_code == 200, counted.text[:500]
        assert counted.json()["total"] > answer.json()["tokens"]  # reply priming
        page = client.get(f"/v1/sessions/{sid}/messages", params={"after_seq": 9_999}).json()
        assert page["items"][0]["message"]["metadata"]["n"] == [13, 9_999, 2.5, True, None]
    print(
        f"{len(latencies)} /healthz answers during the append and count, the longest "
        f"{max(latencies) * 1000:.0f} ms"
    )
    assert len(latencies) >= 3 and set(statuses) == {200}
    assert max(latencies) < LIVENESS_S
