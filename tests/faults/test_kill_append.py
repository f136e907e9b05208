"""SIGKILL during a large append, then a restart: the batch is all there or not at all, seqs
stay gap-free, and a retry with the same Idempotency-Key writes it exactly once."""

from __future__ import annotations

import threading
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import fresh_database
from tests.faults.server import Server, all_messages, running, write_in_flight

BATCH = 3_000
SEED = 10


def batch(tag: str, count: int) -> dict[str, Any]:
    text = "the build of {} failed in step {} with exit status 2; retrying with -v and --no-cache"
    return {
        "messages": [
            {
                "role": "user" if n % 2 == 0 else "assistant",
                "content": f"{tag}#{n}: " + text.format(tag, n),
            }
            for n in range(count)
        ]
    }


def post_in_background(
    server: Server, sid: str, body: dict[str, Any], key: str
) -> threading.Thread:
    def send() -> None:
        try:
            with server.client() as c:
                c.post(f"/v1/sessions/{sid}/messages", json=body, headers={"Idempotency-Key": key})
        except httpx.TransportError:
            pass  # the server was killed under it

    thread = threading.Thread(target=send, daemon=True)
    thread.start()
    return thread


def check_whole(server: Server, sid: str, tag: str) -> bool:
    """The session's history is the seed plus either the whole batch or none of it, seqs 1..n;
    True when the batch is there."""
    with server.client() as c:
        stored = all_messages(c, sid)
        shown = c.get(f"/v1/sessions/{sid}").json()
    seqs = [m["seq"] for m in stored]
    # The session's running totals went with the batch, or stayed without it.
    totals = (shown["message_count"], shown["tokens"])
    assert totals == (len(stored), sum(m["tokens"] for m in stored)), "totals drifted"
    assert seqs == list(range(1, len(seqs) + 1)), "seqs have a gap"
    assert len(stored) in (SEED, SEED + BATCH), f"a partial batch: {len(stored)} messages"
    texts = [m["message"]["content"][0]["text"] for m in stored[SEED:]]
    assert texts == [t["content"] for t in batch(tag, BATCH)["messages"]][: len(texts)]
    return len(stored) == SEED + BATCH


def kill_round(server: Server, when: str, duration: float) -> dict[str, Any]:
    """One fault: a new session with a seed, a large batch in flight, SIGKILL at ``when``."""
    with server.client() as c:
        sid = c.post("/v1/sessions", json={}).json()["id"]
        assert c.post(f"/v1/sessions/{sid}/messages", json=batch("seed", SEED)).status_code == 201
    tag, key = uuid.uuid4().hex[:8], f"append-{uuid.uuid4()}"
    body = batch(tag, BATCH)
    thread = post_in_background(server, sid, body, key)
    if when == "in-transaction":
        landed = write_in_flight(server.database_url, timeout=duration * 5 + 5)
    else:
        time.sleep(duration * float(when))
        landed = thread.is_alive()
    server.kill()
    thread.join(timeout=30)
    server.start()
    committed = check_whole(server, sid, tag)
    with server.client() as c:
        retried = c.post(
            f"/v1/sessions/{sid}/messages", json=body, headers={"Idempotency-Key": key}
        )
        assert retried.status_code == 201, retried.text
        answer = retried.json()
        assert (answer["first_seq"], answer["last_seq"]) == (SEED + 1, SEED + BATCH)
        again = c.post(f"/v1/sessions/{sid}/messages", json=body, headers={"Idempotency-Key": key})
        assert again.json() == answer  # replayed, nothing written
        assert check_whole(server, sid, tag)
        later = c.post(f"/v1/sessions/{sid}/messages", json=batch("after", 1)).json()
        assert later["first_seq"] == SEED + BATCH + 1  # the seq counter survived too
    return {"when": when, "landed": landed, "committed_before_kill": committed}


def measure(server: Server) -> float:
    with server.client() as c:
        sid = c.post("/v1/sessions", json={}).json()["id"]
        started = time.monotonic()
        assert c.post(f"/v1/sessions/{sid}/messages", json=batch("m", BATCH)).status_code == 201
        return time.monotonic() - started


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["postgres", "sqlite"])
def test_sigkill_during_a_large_append_leaves_all_or_nothing_and_the_retry_writes_once(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    url = fresh_database(kind, tmp_path, request)
    started = time.monotonic()
    with running(url, tmp_path) as server:
        duration = measure(server)
        whens = (
            ["0.5", "in-transaction", "in-transaction"] if kind == "postgres" else ["0.5", "0.9"]
        )
        rounds = [kill_round(server, when, duration) for when in whens]
    print(
        f"\n{kind}: append of {BATCH} took {duration:.2f}s; faults {rounds};"
        f" {time.monotonic() - started:.1f}s"
    )
    if kind == "postgres":
        assert all(r["landed"] for r in rounds if r["when"] == "in-transaction")
