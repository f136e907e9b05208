"""Session compiles (full, full after a new turn, delta) at 1,000 / 10,000 / 100,000 stored
messages, against floors.

`python -m bench.session_compile` (`--quick`, or `CTXC_BENCH_QUICK=1`: 1,000 and 10,000 only).
On Postgres and on SQLite, one `ctxc serve` each, one session of agent turns
(`bench.append.agent_batch`) grown through appends to each size in turn. At each size:

- full: `POST /v1/sessions/{id}/compile` with `{}` (the default profile, `openai` with its
  128k window, and the default compiler). The first compile after growing reads what the
  session's digest does not cover yet (all of it, the first time) and is shown apart
  (`first`); the digest it has made or moved in the background is waited for, as an agent's
  next turn would find it, then the compiles are timed. The session does not change between
  them, so each is answered with the output the first one made (``remembered``): what a retry,
  or a compile that finds nothing new, costs;
- after a new turn: rounds of one appended turn (10 messages) and a full compile, which finds
  new messages and so compiles the view again (reading only the rows stored since the tail the
  compile before read, which was kept);
- delta: the same session compiled for `codex-cli` (session-stateful) with an active provider
  session: the cursor reset, a compile acknowledged with a `provider_session_id` (the full
  start), then rounds of one appended turn (10 messages), a compile (timed, delta mode) and its
  acknowledgement. The rounds grow the session a little before the next size.

Each is set against a floor sampled right after every compile (three times), so both see the
same machine: an authenticated no-op (`GET /v1/providers`: a Bearer key and a constant answer, no
database) plus a raw read of exactly the rows that compile sent (asyncpg on Postgres, sqlite3 on
SQLite: one connection, the seqs taken from the answer, `seq_range` less the `left_out` ranges),
encoded with orjson (JSON columns as the driver returns them, text); floor = the two medians
added. Times are the client's, whole requests. Full compiles stop after a time budget (at least
3 samples), so a slow one is sampled fewer times (the count is printed).
"""

from __future__ import annotations

import asyncio
import os
import random
import sqlite3
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import Any

import asyncpg
import httpx
import orjson
from sqlalchemy.engine import make_url

from bench.append import agent_batch
from bench.common import database, metric, percentile, quick_run, served, verdict

SIZES = (1_000, 10_000, 100_000)
QUICK_SIZES = SIZES[:2]
GROW_BATCH = 2_000  # messages per append while growing the session (a multiple of 4: whole turns)
REPEATS = 30  # full compiles at most per size ...
BUDGET_S = 20.0  # ... within about this long, at least MIN_REPEATS
MIN_REPEATS = 3
SETTLE_S = 300.0  # the longest wait for a digest job after the first compile
DIGESTS = "ctxc_digests_total"
WHOLE_READS = 'ctxc_session_compile_reads_total{read="whole"}'
MOVE_S = 5.0  # the wait for a digest moved after a compile that read a tail: often none is due
ROUNDS = 20  # delta rounds per size
TURN = 10  # messages appended per delta round
FLOOR_SAMPLES = 3  # no-ops and raw reads after each compile
NOOP = "/v1/providers"
DELTA_PROFILE = "codex-cli"
COLUMNS = "seq, section, role, name, content, metadata, tokens_o200k"
Ranges = list[tuple[int, int]]


@dataclass(frozen=True)
class Sample:
    """Seconds of repeated runs of one thing."""

    times: list[float]

    @property
    def median(self) -> float:
        return statistics.median(self.times)

    @property
    def p99(self) -> float:
        return percentile(self.times, 99)


@dataclass(frozen=True)
class Row:
    """One measured line: the compiles, and the floor's two parts."""

    kind: str
    size: int
    compiles: Sample
    noop: Sample
    read: Sample
    rows: int
    first: float | None = None  # the first full compile after growing

    @property
    def floor(self) -> float:
        return self.noop.median + self.read.median

    @property
    def ratio(self) -> float:
        return self.compiles.median / self.floor


def sent_ranges(answer: dict[str, Any]) -> Ranges:
    """The stored seqs a compile answer sent: its ``seq_range`` less its ``left_out`` ranges."""
    if answer["seq_range"] is None:
        return []
    first, last = answer["seq_range"]
    kept: Ranges = [(first, last)]
    for left in answer["left_out"]:
        for lo, hi in left["seq_ranges"]:
            kept = [piece for a, b in kept for piece in _minus(a, b, lo, hi)]
    return kept


def _minus(a: int, b: int, lo: int, hi: int) -> Ranges:
    if hi < a or lo > b:
        return [(a, b)]
    return [r for r in ((a, lo - 1), (hi + 1, b)) if r[0] <= r[1]]


def _count(ranges: Ranges) -> int:
    return sum(b - a + 1 for a, b in ranges)


def _select(ranges: Ranges, mark: Callable[[int], str]) -> str:
    """The rows of ``ranges`` in seq order, one index range scan each (an OR of ranges makes
    SQLite, without statistics, scan the whole session), with numbered parameters."""
    return (
        " UNION ALL ".join(
            f"SELECT {COLUMNS} FROM messages WHERE session_pk = {mark(1)}"
            f" AND seq BETWEEN {mark(2 + 2 * i)} AND {mark(3 + 2 * i)}"
            for i in range(len(ranges))
        )
        + " ORDER BY seq"
    )


def _bounds(ranges: Ranges) -> list[int]:
    return [seq for pair in ranges for seq in pair]


class _PostgresReads:
    """asyncpg on a loop of its own, one connection, the session's pk looked up once."""

    def __init__(self, url: str, sid: str) -> None:
        dsn = make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)
        self.loop = asyncio.new_event_loop()
        self.conn = self.loop.run_until_complete(asyncpg.connect(dsn))
        query = "SELECT pk FROM sessions WHERE id = $1"
        self.pk = self.loop.run_until_complete(self.conn.fetchval(query, sid))

    def read(self, ranges: Ranges) -> float:
        took: float = self.loop.run_until_complete(self._read(ranges))
        return took

    async def _read(self, ranges: Ranges) -> float:
        sql = _select(ranges, "${}".format)
        start = time.perf_counter()
        rows = await self.conn.fetch(sql, self.pk, *_bounds(ranges))
        orjson.dumps([dict(r) for r in rows])
        return time.perf_counter() - start

    def close(self) -> None:
        self.loop.run_until_complete(self.conn.close())
        self.loop.close()


class _SqliteReads:
    """sqlite3 on the server's file, one connection, the session's pk looked up once."""

    def __init__(self, url: str, sid: str) -> None:
        self.conn = sqlite3.connect(str(make_url(url).database))
        (self.pk,) = self.conn.execute("SELECT pk FROM sessions WHERE id = ?", (sid,)).fetchone()

    def read(self, ranges: Ranges) -> float:
        sql = _select(ranges, "?{}".format)
        start = time.perf_counter()
        found = self.conn.execute(sql, (self.pk, *_bounds(ranges)))
        names = [d[0] for d in found.description]
        orjson.dumps([dict(zip(names, row, strict=True)) for row in found.fetchall()])
        return time.perf_counter() - start

    def close(self) -> None:
        self.conn.close()


@dataclass
class Floor:
    """The floor's two parts, sampled next to each compile so both see the same machine."""

    client: httpx.Client
    reads: _PostgresReads | _SqliteReads
    noop: list[float] = field(default_factory=list)
    read: list[float] = field(default_factory=list)

    def sample(self, ranges: Ranges) -> None:
        for _ in range(FLOOR_SAMPLES):
            start = time.perf_counter()
            self.client.get(NOOP).raise_for_status()
            self.noop.append(time.perf_counter() - start)
            self.read.append(self.reads.read(ranges) if ranges else 0.0)


@contextmanager
def floor(kind: str, url: str, sid: str, client: httpx.Client) -> Iterator[Floor]:
    reads = _PostgresReads(url, sid) if kind == "postgres" else _SqliteReads(url, sid)
    try:
        yield Floor(client, reads)
    finally:
        reads.close()


def grow(client: httpx.Client, sid: str, stored: int, size: int) -> None:
    """Append agent turns until the session holds ``size`` messages."""
    for start in range(stored, size, GROW_BATCH):
        count = min(GROW_BATCH, size - start)
        batch = [
            m for i in range(start, start + count, 10) for m in agent_batch(random.Random(i), i)
        ]
        append(client, sid, batch[:count])


def append(client: httpx.Client, sid: str, batch: list[dict[str, Any]]) -> None:
    body = orjson.dumps({"messages": batch})
    headers = {"Content-Type": "application/json"}
    client.post(f"/v1/sessions/{sid}/messages", content=body, headers=headers).raise_for_status()


def compile_once(
    client: httpx.Client, sid: str, body: dict[str, Any]
) -> tuple[dict[str, Any], float]:
    start = time.perf_counter()
    response = client.post(f"/v1/sessions/{sid}/compile", json=body)
    took = time.perf_counter() - start
    response.raise_for_status()
    answer: dict[str, Any] = response.json()
    return answer, took


def acknowledge(client: httpx.Client, sid: str, answer: dict[str, Any], **fields: Any) -> None:
    body = {"compile_id": answer["compile_id"], **fields}
    client.post(f"/v1/sessions/{sid}/cursor", json=body).raise_for_status()


def settle(client: httpx.Client, jobs: float, patience: float = SETTLE_S) -> None:
    """Wait for the digest the first compile after growing has made or moved in the
    background (``jobs``: digest jobs finished before it), as an agent's next turn would."""
    deadline = time.monotonic() + patience
    while metric(client, DIGESTS) <= jobs:
        if time.monotonic() > deadline:
            if patience == SETTLE_S:
                print(f"  (no digest job finished within {SETTLE_S:.0f} s)")
            return
        time.sleep(0.2)


def full(kind: str, url: str, client: httpx.Client, sid: str, size: int) -> Row:
    """Full-mode compiles of the session as it stands, and their floor: the first compile
    after growing (which reads what the digest does not cover yet) apart, then turns."""
    jobs, wholes = metric(client, DIGESTS), metric(client, WHOLE_READS)
    _, first = compile_once(client, sid, {})
    # A compile that read the whole history has a digest made after it; one that read a tail
    # (or the compile the appends warmed) found the digest the appends made, and one may still
    # be moving.
    settle(client, jobs, SETTLE_S if metric(client, WHOLE_READS) > wholes else MOVE_S)
    times: list[float] = []
    began = time.perf_counter()
    with floor(kind, url, sid, client) as base:
        while len(times) < REPEATS and (
            len(times) < MIN_REPEATS or time.perf_counter() - began < BUDGET_S
        ):
            answer, took = compile_once(client, sid, {})
            assert answer["mode"] == "full", answer["mode"]
            times.append(took)
            ranges = sent_ranges(answer)
            base.sample(ranges)
    row = Row(kind, size, Sample(times), Sample(base.noop), Sample(base.read), _count(ranges))
    return replace(row, first=first)


def turns(kind: str, url: str, client: httpx.Client, sid: str, size: int) -> Row:
    """Full-mode compiles right after one appended turn each: what an agent's next turn costs
    when it finds new messages (a compile of the session as it was compiled before is
    remembered, and costs what the first table shows)."""
    times: list[float] = []
    with floor(kind, url, sid, client) as base:
        for n in range(ROUNDS):
            start = size + n * TURN
            append(client, sid, agent_batch(random.Random(start), start))
            answer, took = compile_once(client, sid, {})
            times.append(took)
            ranges = sent_ranges(answer)
            base.sample(ranges)
    return Row(kind, size, Sample(times), Sample(base.noop), Sample(base.read), _count(ranges))


def delta(kind: str, url: str, client: httpx.Client, sid: str, size: int) -> Row:
    """Delta compiles, one appended turn each, for a session-stateful profile; their floor."""
    body = {"provider": DELTA_PROFILE}
    client.delete(f"/v1/sessions/{sid}/cursor").raise_for_status()
    answer, _ = compile_once(client, sid, body)  # the full start of a new provider session
    acknowledge(client, sid, answer, provider_session_id="thread-1")
    times, counts = [], []
    with floor(kind, url, sid, client) as base:
        for n in range(ROUNDS):
            start = size + n * TURN
            append(client, sid, agent_batch(random.Random(start), start))
            answer, took = compile_once(client, sid, body)
            assert answer["mode"] == "delta", answer["mode"]
            acknowledge(client, sid, answer)
            times.append(took)
            ranges = sent_ranges(answer)
            counts.append(_count(ranges))
            base.sample(ranges)
    rows = round(statistics.mean(counts))
    return Row(kind, size, Sample(times), Sample(base.noop), Sample(base.read), rows)


def measure(kind: str, sizes: tuple[int, ...]) -> tuple[list[Row], list[Row], list[Row]]:
    fulls, news, deltas = [], [], []
    with database(kind) as url, served(url, max_body_bytes=1 << 28, timeout=600) as (client, _):
        sid = client.post("/v1/sessions", json={}).json()["id"]
        stored = 0
        for size in sizes:
            began = time.perf_counter()
            grow(client, sid, stored, size)
            print(
                f"  {kind}: grown to {size:,} messages in {time.perf_counter() - began:.0f} s",
                flush=True,
            )
            fulls.append(full(kind, url, client, sid, size))
            news.append(turns(kind, url, client, sid, size))
            deltas.append(delta(kind, url, client, sid, size + ROUNDS * TURN))
            stored = size + 2 * ROUNDS * TURN
    return fulls, news, deltas


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:8.1f}"


def table(title: str, rows: list[Row]) -> None:
    print(title)
    print(
        "  database    stored    n   median      p99 | rows  no-op  read+enc    floor"
        " | /floor median  p99 |    first"
    )
    for r in rows:
        first = "" if r.first is None else _ms(r.first)
        print(
            f"  {r.kind:8s} {r.size:>9,} {len(r.compiles.times):4d} {_ms(r.compiles.median)} "
            f"{_ms(r.compiles.p99)} | {r.rows:4d} {r.noop.median * 1000:6.2f} "
            f"{r.read.median * 1000:9.2f} {_ms(r.floor)} | {r.ratio:12.1f}x "
            f"{r.compiles.p99 / r.floor:5.1f}x | {first}"
        )


def targets(rows: list[Row], flat: float, near: float) -> None:
    """The target lines: largest size against the smallest, and each against its floor."""
    for kind in dict.fromkeys(r.kind for r in rows):
        mine = [r for r in rows if r.kind == kind]
        small, big = mine[0], mine[-1]
        growth = big.compiles.median / small.compiles.median
        tail = big.compiles.p99 / small.compiles.p99
        worst = max(mine, key=lambda r: r.ratio)
        print(
            f"  {kind:8s} {big.size // 1000}k/{small.size // 1000}k: median {growth:6.2f}x "
            f"(p99 {tail:6.2f}x)  target within {flat}x: {verdict(growth <= flat)} | "
            f"worst compile/floor {worst.ratio:7.1f}x at {worst.size:,}  "
            f"target within {near}x: {verdict(worst.ratio <= near)}"
        )


def run(quick: bool | None = None) -> None:
    quick = quick_run(quick)
    sizes = QUICK_SIZES if quick else SIZES
    load = os.getloadavg()[0]
    print(
        f"session compile against its floor at {', '.join(f'{s:,}' for s in sizes)} stored "
        f"messages, through HTTP (load average {load:.1f})"
    )
    print(f"  floor = authenticated no-op (GET {NOOP}) + raw read of the rows sent + orjson")
    results = {kind: measure(kind, sizes) for kind in ("postgres", "sqlite")}
    fulls = [r for f, _, _ in results.values() for r in f]
    news = [r for _, n, _ in results.values() for r in n]
    deltas = [r for _, _, d in results.values() for r in d]
    table("full compile (openai, 128k window, default compiler; times in ms)", fulls)
    targets(fulls, flat=1.3, near=3)
    table(f"full compile after a new {TURN}-message turn (nothing to reuse whole)", news)
    targets(news, flat=1.3, near=3)
    table(
        f"delta compile ({DELTA_PROFILE}, active provider session, one {TURN}-message turn)", deltas
    )
    targets(deltas, flat=1.2, near=2)
    print(f"  (load average at the end {os.getloadavg()[0]:.1f})")


if __name__ == "__main__":
    run(quick="--quick" in sys.argv[1:])
