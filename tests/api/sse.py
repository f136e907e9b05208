"""Test helpers for the event stream: emit as the compaction does, read SSE with httpx."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import httpx
from sqlalchemy import select

from app.domain.sessions import SessionPk
from app.services.sessions import events
from app.storage.db import create_engine, create_sessionmaker
from app.storage.models import SessionRow

STREAM_TIMEOUT = httpx.Timeout(10)  # no event within this (heartbeats are 15 s apart): failure


@dataclass(frozen=True)
class Sse:
    """One SSE message."""

    id: int
    event: str
    data: dict[str, Any]


def compaction(n: int, kind: str = "session") -> dict[str, Any]:
    """Event data as compaction sends it."""
    return {
        "compaction_id": f"cmp_{n}",
        "kind": kind,
        "reason": "session_compaction",
        "tokens_before": 90_000 + n,
        "tokens_after": 12_000,
        "budget_used_pct": 6.0,
    }


def emit_events(
    url: str, session_id: str, items: list[tuple[str, dict[str, Any]]], commit: bool = True
) -> list[int]:
    """Emit ``items`` in one transaction of a short-lived engine of our own, then commit (or
    roll back): the code path of the compaction, from outside the server."""

    async def run() -> list[int]:
        engine = create_engine(url)
        try:
            async with create_sessionmaker(engine)() as db:
                pk = await db.scalar(select(SessionRow.pk).where(SessionRow.id == session_id))
                assert pk is not None
                now = datetime.now(UTC)
                ids = [await events.emit(db, SessionPk(pk), t, d, now) for t, d in items]
                await (db.commit() if commit else db.rollback())
                return ids
        finally:
            await engine.dispose()

    return asyncio.run(run())


def emit_one(url: str, session_id: str, n: int) -> int:
    return emit_events(url, session_id, [(events.COMPACTION_START, compaction(n))])[0]


class Stream:
    """An open event stream: its response and an iterator over its lines."""

    def __init__(self, response: httpx.Response) -> None:
        self.response = response
        self.lines = response.iter_lines()

    def read(self, count: int) -> list[Sse]:
        """The next ``count`` messages (heartbeat comments skipped)."""
        out: list[Sse] = []
        fields: dict[str, str] = {}
        for line in self.lines:
            if line == "":
                if "data" in fields:
                    out.append(Sse(int(fields["id"]), fields["event"], json.loads(fields["data"])))
                    if len(out) == count:
                        return out
                fields = {}
            elif not line.startswith(":"):
                name, _, value = line.partition(":")
                fields[name] = value.removeprefix(" ")
        raise AssertionError(f"the stream ended after {len(out)} of {count} messages")

    def comment(self) -> str:
        """The next comment line (a heartbeat)."""
        for line in self.lines:
            if line.startswith(":"):
                return line
        raise AssertionError("the stream ended without a comment")


@contextmanager
def stream(
    client: httpx.Client, session_id: str, headers: dict[str, str] | None = None, **params: Any
) -> Iterator[Stream]:
    """The session's event stream, connected (status 200) for the block."""
    url = f"/v1/sessions/{session_id}/events"
    with client.stream(
        "GET", url, headers=headers or {}, params=params, timeout=STREAM_TIMEOUT
    ) as response:
        assert response.status_code == 200, response.read()
        assert response.headers["content-type"].startswith("text/event-stream")
        yield Stream(response)


def compactable_turns(rounds: int = 8) -> list[dict[str, Any]]:
    """Turns long enough that a session compaction with a tiny target summarises them."""
    return [
        m
        for n in range(rounds)
        for m in (
            {"role": "user", "content": f"Look at src/part_{n}.py please. " + "Be thorough. " * 40},
            {"role": "assistant", "content": f"It defines handler_{n}. " + "It works fine. " * 40},
        )
    ]
