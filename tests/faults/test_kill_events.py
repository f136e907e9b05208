"""SIGKILL while event subscribers follow sessions (compactions producing events all along),
restart, and the subscribers reconnect with `Last-Event-ID` as EventSource does: each has then
seen every stored event exactly once, in increasing id order, and nothing that was not stored."""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import select

from app.storage.db import create_engine, create_sessionmaker
from app.storage.models import EventRow, SessionRow
from tests.api.sse import Sse
from tests.api.test_compaction import POLICY, work_history
from tests.conftest import fresh_database
from tests.faults.server import Server, running

LEASE_S = 2.0

SESSIONS = 2
FOLLOWERS = 3  # per session
KILLS = 2


class Follower(threading.Thread):
    """An SSE client that reconnects with `Last-Event-ID` whenever its stream ends."""

    def __init__(self, server: Server, sid: str) -> None:
        super().__init__(daemon=True)
        self.server, self.sid = server, sid
        self.got: list[Sse] = []
        self.connects = 0
        self.stopping = threading.Event()

    def run(self) -> None:
        url = f"/v1/sessions/{self.sid}/events"
        with self.server.client() as client:
            while not self.stopping.is_set():
                last = str(self.got[-1].id if self.got else 0)
                with (
                    contextlib.suppress(httpx.HTTPError),
                    client.stream("GET", url, headers={"Last-Event-ID": last}) as response,
                ):
                    if response.status_code == 200:
                        self.connects += 1
                        self._read(response)
                time.sleep(0.25)  # EventSource waits a little before it reconnects

    def _read(self, response: httpx.Response) -> None:
        fields: dict[str, str] = {}
        for line in response.iter_lines():  # a heartbeat each second: the stop flag is seen
            if self.stopping.is_set():
                return
            if line == "" and "data" in fields:
                self.got.append(Sse(int(fields["id"]), fields["event"], json.loads(fields["data"])))
                fields = {}
            elif line and not line.startswith(":"):
                name, _, value = line.partition(":")
                fields[name] = value.removeprefix(" ")

    def saw(self, compaction_id: str) -> bool:
        return any(e.data.get("compaction_id") == compaction_id for e in self.got)


def rounds(n: int, start: int) -> list[dict[str, Any]]:
    """``n`` API rounds (a file read and its result), call ids from ``start``."""
    out: list[dict[str, Any]] = []
    for k in range(start, start + n):
        arguments = json.dumps({"path": f"src/m{k}.py"})
        call = {
            "id": f"call_{k}",
            "type": "function",
            "function": {"name": "read_file", "arguments": arguments},
        }
        body = "\n".join(f"def f_{k}_{j}(x):\n    return x" for j in range(12))
        out += [
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": f"call_{k}", "content": body},
        ]
    return out


class Producer(threading.Thread):
    """Appends rounds to each session and compacts it, over and over, through the kills."""

    def __init__(self, server: Server, sids: list[str]) -> None:
        super().__init__(daemon=True)
        self.server, self.sids = server, sids
        self.stopping = threading.Event()
        self.compactions = 0
        self.next_call = 1_000

    def run(self) -> None:
        n = 0
        with self.server.client() as c:
            while not self.stopping.is_set():
                n += 1
                try:
                    for sid in self.sids:
                        self.next_call += 2
                        body = {"messages": rounds(2, self.next_call)}
                        c.post(f"/v1/sessions/{sid}/messages", json=body)
                        kind = "session" if n % 3 == 0 else "micro"
                        if c.post(f"/v1/sessions/{sid}/compact", json={"kind": kind}).is_success:
                            self.compactions += 1
                except httpx.HTTPError:
                    time.sleep(0.25)  # the server is down: try again a little later


def stored_events(url: str, sid: str) -> list[Sse]:
    async def run() -> list[Sse]:
        engine = create_engine(url)
        try:
            async with create_sessionmaker(engine)() as db:
                pk = select(SessionRow.pk).where(SessionRow.id == sid).scalar_subquery()
                rows = await db.scalars(
                    select(EventRow).where(EventRow.session_pk == pk).order_by(EventRow.id)
                )
                return [Sse(r.id, r.type, r.data) for r in rows]
        finally:
            await engine.dispose()

    return asyncio.run(run())


def wait_for(condition: Any, what: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["postgres", "sqlite"])
def test_sigkill_under_event_subscribers_loses_and_repeats_nothing_on_replay(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    url = fresh_database(kind, tmp_path, request)
    started = time.monotonic()
    # A short compaction lease: the one a killed server held is taken over soon after.
    env = {"CTXC_SSE_HEARTBEAT_SECONDS": "1", "CTXC_COMPACTION_LEASE_SECONDS": str(LEASE_S)}
    with running(url, tmp_path, **env) as server:
        with server.client() as c:
            sids = [
                c.post("/v1/sessions", json={"provider": "gpt-4o", "compaction": POLICY}).json()[
                    "id"
                ]
                for _ in range(SESSIONS)
            ]
            for sid in sids:
                c.post(f"/v1/sessions/{sid}/messages", json={"messages": work_history(6)})
        followers = [Follower(server, sid) for sid in sids for _ in range(FOLLOWERS)]
        for f in followers:
            f.start()
        wait_for(lambda: all(f.connects for f in followers), "the subscribers to connect")
        producer = Producer(server, sids)
        producer.start()
        for cycle in range(1, KILLS + 1):
            wait_for(lambda: min(len(f.got) for f in followers) >= 4 * cycle, "events")  # noqa: B023
            server.kill()
            time.sleep(0.3)  # the subscribers lose their streams and retry in vain
            server.start()
        producer.stopping.set()
        producer.join(timeout=60)
        markers = {}
        with server.client() as c:  # one last event per session, after everything else
            for sid in sids:
                c.post(f"/v1/sessions/{sid}/messages", json={"messages": rounds(3, 9_000)})
                done = c.post(f"/v1/sessions/{sid}/compact", json={"kind": "micro"})
                deadline = time.monotonic() + 3 * LEASE_S
                while done.status_code == 409 and time.monotonic() < deadline:  # lease runs out
                    time.sleep(0.2)
                    done = c.post(f"/v1/sessions/{sid}/compact", json={"kind": "micro"})
                assert done.status_code == 201, done.text
                markers[sid] = done.json()["id"]
        wait_for(lambda: all(f.saw(markers[f.sid]) for f in followers), "the last events")
        for f in followers:
            f.stopping.set()
        for f in followers:
            f.join(timeout=30)
    total = 0
    for f in followers:
        stored = stored_events(url, f.sid)
        ids = [e.id for e in f.got]
        assert ids == sorted(set(ids)), "an event came twice or out of order"
        assert f.got == stored, "the events seen are not exactly the events stored"
        assert f.connects >= KILLS + 1
        total += len(f.got)
    print(
        f"\n{kind}: {KILLS} kills, {len(followers)} subscribers, {producer.compactions} "
        f"compactions, {total} events delivered, 0 lost, 0 repeated;"
        f" {time.monotonic() - started:.1f}s"
    )
