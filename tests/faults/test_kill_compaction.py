"""SIGKILL during a summarisation compaction (a real local webhook summariser that takes its
time), then a restart: the compaction is applied whole (the summary in place, the archive equal
to the originals as read before) or not at all (the messages exactly as before)."""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.adapters.stubs import Answer, Received, StubServer
from tests.api.test_compaction import POLICY, work_history
from tests.conftest import fresh_database
from tests.faults.server import Server, all_messages, rows_locked, running, write_in_flight

SECRET = "webhook-secret"
LEASE_S = 2.0
KEYS = ("seq", "section", "created_at", "message")
LOCK_MESSAGES = (
    "SELECT m.seq FROM messages m JOIN sessions s ON s.pk = m.session_pk WHERE s.id = $1 "
    "FOR UPDATE OF m"
)
# (compaction kind, when the SIGKILL lands) per database.
ROUNDS = {
    "postgres": [
        ("session", "summarising"),
        ("full", "summarising"),
        ("session", "in-transaction"),
        ("full", "in-transaction"),
        ("session", "0.05"),
    ],
    "sqlite": [("session", "summarising"), ("full", "0.0"), ("session", "0.05")],
}


class Summariser:
    """The operator's webhook: checks the signature, counts the calls, and takes ``delay``
    seconds to answer (woken early when the test ends)."""

    def __init__(self) -> None:
        self.delay = 0.0
        self.called = threading.Event()
        self.calls = 0
        self.bad_signatures = 0
        self.stub = StubServer(self.handle)

    def handle(self, request: Received) -> Answer:
        stamp = request.headers.get("x-ctxc-timestamp", "")
        mac = hmac.new(SECRET.encode(), stamp.encode() + b"." + request.body, hashlib.sha256)
        if not hmac.compare_digest(
            f"sha256={mac.hexdigest()}", request.headers.get("x-ctxc-signature", "")
        ):
            self.bad_signatures += 1
            return Answer(401, {"error": "bad signature"})
        self.calls += 1
        self.called.set()
        if self.delay:
            self.stub.stopping.wait(self.delay)
        count = len(request.json()["messages"])
        return Answer(
            200, {"summary": f"Decisions:\n- Webhook summary of {count} messages: src/pkg."}
        )


def compact(server: Server, sid: str, kind: str) -> Any:
    with server.client() as c:
        return c.post(f"/v1/sessions/{sid}/compact", json={"kind": kind})


def outcome(server: Server, sid: str, before: list[dict[str, Any]]) -> str:
    """``applied`` or ``not applied``, after checking it is exactly one of the two."""
    with server.client() as c:
        after = all_messages(c, sid)
        listed = c.get(f"/v1/sessions/{sid}/compactions").json()["items"]
        if not listed:
            assert after == before, "no compaction recorded, yet the messages changed"
            return "not applied"
        [record] = listed
        detail = c.get(f"/v1/sessions/{sid}/compactions/{record['id']}").json()
    taken = [m for m in before if record["seq_from"] <= m["seq"] <= record["seq_to"]]
    assert [{k: a[k] for k in KEYS} for a in detail["archived"]] == [
        {k: m[k] for k in KEYS} for m in taken
    ]
    kept = [m for m in before if m not in taken]
    summaries = [m for m in after if m["section"] == "summary"]
    assert len(summaries) == 1 and summaries[0]["seq"] == record["seq_to"]
    assert summaries[0]["message"]["content"][0]["text"].endswith(
        f"Webhook summary of {len(taken)} messages: src/pkg."
    )
    assert [m for m in after if m["section"] != "summary"] == kept
    return "applied"


def kill_round(server: Server, summariser: Summariser, kind: str, when: str) -> str:
    """One fault, SIGKILL: ``summarising``, while the summariser is still working;
    ``in-transaction`` (Postgres), once the compaction's transaction has written; else ``when``
    seconds after the summariser was called (it answers at once)."""
    with server.client() as c:
        sid = c.post("/v1/sessions", json={"provider": "gpt-4o", "compaction": POLICY}).json()["id"]
        assert (
            c.post(f"/v1/sessions/{sid}/messages", json={"messages": work_history(12)}).status_code
            == 201
        )
        before = all_messages(c, sid)
    summariser.called.clear()
    summariser.delay = 30.0 if when == "summarising" else 0.0
    calls = summariser.calls
    # In a transaction, the compaction deletes the messages it archives: with their rows locked
    # here it waits there, after its first writes, however late the test looks (a busy machine).
    held = (
        rows_locked(server.database_url, LOCK_MESSAGES, sid)
        if when == "in-transaction"
        else (contextlib.nullcontext())
    )
    with held:
        thread = threading.Thread(target=_compact_quietly, args=(server, sid, kind), daemon=True)
        thread.start()
        assert summariser.called.wait(30), "the summariser was never called"
        if when == "summarising":
            time.sleep(0.2)
        elif when == "in-transaction":
            assert write_in_flight(server.database_url, timeout=30)
        else:
            time.sleep(float(when))
        server.kill()
    thread.join(timeout=30)
    server.start()
    first = outcome(server, sid, before)
    if when == "summarising":
        assert first == "not applied"
    summariser.delay = 0.0
    if first == "not applied":  # the retry compacts once, and the summariser is asked once more
        done = compact(server, sid, kind)
        deadline = time.monotonic() + 3 * LEASE_S
        while done.status_code == 409 and time.monotonic() < deadline:  # the lease runs out
            time.sleep(0.2)
            done = compact(server, sid, kind)
        assert done.status_code == 201, done.text
        assert done.json()["summarizer"] == "webhook"
        assert outcome(server, sid, before) == "applied"
        assert summariser.calls == calls + 2
    return first


def _compact_quietly(server: Server, sid: str, kind: str) -> None:
    with contextlib.suppress(httpx.HTTPError):  # the server dies under it
        compact(server, sid, kind)


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["postgres", "sqlite"])
def test_sigkill_during_a_compaction_applies_it_whole_or_not_at_all(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    url = fresh_database(kind, tmp_path, request)
    started = time.monotonic()
    summariser = Summariser()
    with summariser.stub:
        env = {
            "CTXC_SUMMARIZER": "webhook",
            "CTXC_SUMMARIZER_URL": f"{summariser.stub.url}/hook",
            "CTXC_SUMMARIZER_WEBHOOK_SECRET": SECRET,
            "CTXC_SUMMARIZER_RETRIES": "0",
            # The killed server's compaction lease: taken over once it has run out.
            "CTXC_COMPACTION_LEASE_SECONDS": str(LEASE_S),
        }
        with running(url, tmp_path, **env) as server:
            faults = [(k, w, kill_round(server, summariser, k, w)) for k, w in ROUNDS[kind]]
    assert summariser.bad_signatures == 0
    print(
        f"\n{kind}: {faults}; {summariser.calls} summariser calls;"
        f" {time.monotonic() - started:.1f}s"
    )
