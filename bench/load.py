"""Load: many agent sessions at once against one real `ctxc serve`, the load generator on the
same machine.

64 sessions of 200 stored messages each; every session loops, for 30 s:
- stateful (`claude-code`, session resumption): append a turn, compile, acknowledge the compile
  (the cursor), so after its first full compile each one is a delta;
- stateless (`openai`): append a turn, compile (full, trimmed to the window).
Printed per configuration: loops/s, compile p50/p99 (the p99 also as a ratio of the compile
median of one session looping alone on the same server for 3 s first, the unloaded floor),
errors, connections closed under a request, and the server's peak RSS (VmHWM of its serving
processes, summed over workers).

Configurations, side by side in one run: the baseline (one worker with uvicorn's former 5 s
keep-alive, as `ctxc serve` ran before `--workers`), then one and two workers as `ctxc serve`
runs now. Then the same loops over 8 sessions of 100,000 stored messages, for the RSS.

Those loops never wait: the server is saturated, every session's next request queues behind
the others', and by Little's law a loop takes sessions / throughput however fast a compile is
alone. An agent waits for its model between turns, so with two workers the 64 sessions also
loop paced: each session starts its loops on a schedule of its own (exponential gaps, a random
first start) whose rate offers ``PACES`` of the saturated loops/s just measured, whatever a
loop takes, as agents whose model calls take that long would. Their compile p99 against the
unloaded median is the latency an agent feels on a server that is not saturated (the printed
RSS is the peak since the server started, the saturated run's included).

The generator runs in ``GENERATORS`` processes (httpx, asyncio), each driving its share of the
sessions on a pool of its own, as separate agents would.

Environment: ``LOAD_SECONDS`` (30), ``LOAD_DATABASES`` (``postgres``, or ``postgres,sqlite``),
``LOAD_BIG`` (1: also the 100,000-message sessions; 0: skip), ``LOAD_BIG_SESSIONS`` (8).
"""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import random
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import httpx

from bench.append import agent_batch
from bench.common import _ctxc, database, percentile, serving

SESSIONS = 64
STORED = 200
SECONDS = float(os.environ.get("LOAD_SECONDS", "30"))
GENERATORS = 2
BIG_SESSIONS = int(os.environ.get("LOAD_BIG_SESSIONS", "8"))
BIG_STORED = 100_000
PROFILES = {"stateful": "claude-code", "stateless": "openai"}
ALONE_SECONDS = 3.0  # one session looping alone on the same server first: the unloaded compile
PACES = (0.5, 0.8)  # paced loops: the load offered, as a fraction of the saturated loops/s
CLOSED = (httpx.RemoteProtocolError, httpx.ReadError, httpx.WriteError)


@dataclass
class Tally:
    loops: int = 0
    compiles: list[float] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    closed: int = 0
    alone: float = 0.0  # the compile median of one session looping alone, seconds
    offered: float = 0.0  # paced: the loops/s the sessions' schedules offer (0: saturated)

    def add(self, other: Tally) -> None:
        self.loops += other.loops
        self.compiles += other.compiles
        self.errors += other.errors
        self.closed += other.closed


@dataclass(frozen=True)
class Config:
    name: str
    workers: int
    env: dict[str, str]
    paces: tuple[float, ...] = ()


CONFIGS = (
    Config("baseline: 1 worker, keep-alive 5 s", 1, {"CTXC_KEEP_ALIVE_SECONDS": "5"}),
    Config("1 worker", 1, {}),
    Config("2 workers", 2, {}, PACES),
)


def history(rng: random.Random, count: int, start: int = 0) -> list[dict[str, Any]]:
    out = [m for i in range(start, start + count, 10) for m in agent_batch(rng, i)]
    return out[:count]


def turn(n: int) -> list[dict[str, Any]]:
    return [
        {"role": "user", "content": f"Step {n}: run the tests again and tell me what failed."},
        {"role": "assistant", "content": f"Step {n}: two tests failed in test_parser.py."},
    ]


async def _loop(
    client: httpx.AsyncClient, sid: str, stateful: bool, until: float, tally: Tally, wait: float
) -> None:
    """Loop one session until ``until``; paced (a mean ``wait``, s), its loops start on a
    schedule of their own: the first at a uniform offset, each next one an exponential draw after
    the one before was due (at once when a loop ran late), so the session offers one loop per
    ``wait`` whatever a loop takes."""
    rng = random.Random(sid)
    due = time.monotonic() + (rng.uniform(0, 2 * wait) if wait else 0.0)
    n = 0
    while True:
        if wait:
            await asyncio.sleep(max(0.0, min(due, until) - time.monotonic()))
            due += rng.expovariate(1 / wait)
        if time.monotonic() >= until:
            break
        n += 1
        try:
            appended = await client.post(f"/v1/sessions/{sid}/messages", json={"messages": turn(n)})
            if appended.status_code != 201:
                tally.errors.append(f"append {appended.status_code}")
                continue
            start = time.perf_counter()
            compiled = await client.post(f"/v1/sessions/{sid}/compile", json={})
            tally.compiles.append(time.perf_counter() - start)
            if compiled.status_code != 200:
                tally.errors.append(f"compile {compiled.status_code}: {compiled.text[:100]}")
                continue
            if stateful:
                ack = {"compile_id": compiled.json()["compile_id"], "provider_session_id": sid}
                acked = await client.post(f"/v1/sessions/{sid}/cursor", json=ack)
                if acked.status_code != 200:
                    tally.errors.append(f"cursor {acked.status_code}: {acked.text[:100]}")
                    continue
            tally.loops += 1
        except CLOSED as exc:
            tally.closed += 1
            tally.errors.append(f"closed: {exc!r}")
        except httpx.HTTPError as exc:
            tally.errors.append(repr(exc))


def _generate(
    base: str, key: str, sids: list[str], stateful: bool, seconds: float, wait: float = 0.0
) -> Tally:
    """One generator process: its sessions' loops, for ``seconds`` (``wait``: see ``_loop``)."""

    async def run() -> Tally:
        tally = Tally()
        limits = httpx.Limits(max_connections=len(sids), max_keepalive_connections=len(sids))
        headers = {"Authorization": f"Bearer {key}"}
        async with httpx.AsyncClient(
            base_url=base, headers=headers, limits=limits, timeout=120
        ) as client:
            until = time.monotonic() + seconds
            loops = (_loop(client, sid, stateful, until, tally, wait) for sid in sids)
            await asyncio.gather(*loops)
        return tally

    return asyncio.run(run())


def _peak_rss_kib(parent: int, workers: int) -> int:
    """VmHWM of the serving processes: the server itself, or its spawned workers."""
    if workers == 1:
        pids = [parent]
    else:
        pids = []
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                stat = (entry / "stat").read_text()
                cmdline = (entry / "cmdline").read_bytes()
            except OSError:
                continue
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
            if ppid == parent and b"spawn_main" in cmdline:
                pids.append(int(entry.name))
    total = 0
    for pid in pids:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                total += int(line.split()[1])
    return total


@contextmanager
def serve(url: str, config: Config) -> Iterator[tuple[str, str, int]]:
    """``ctxc serve`` on the migrated ``url`` with ``config``: base URL, key and pid."""
    env = {"CTXC_MAX_BODY_BYTES": str(256 * 1024 * 1024), "CTXC_WORKERS": str(config.workers)}
    with serving(url, env | config.env, f"load-{time.monotonic_ns()}") as served:
        yield served


def _sessions(base: str, key: str, profile: str, count: int, stored: int) -> list[str]:
    """``count`` new sessions of ``profile`` with ``stored`` messages each."""
    rng = random.Random(11)
    batch = 5_000
    with httpx.Client(
        base_url=base, headers={"Authorization": f"Bearer {key}"}, timeout=600
    ) as client:
        sids = []
        for _ in range(count):
            created = client.post("/v1/sessions", json={"provider": profile})
            created.raise_for_status()
            sid = created.json()["id"]
            for start in range(0, stored, batch):
                body = {"messages": history(rng, min(batch, stored - start), start)}
                client.post(f"/v1/sessions/{sid}/messages", json=body).raise_for_status()
            sids.append(sid)
        return sids


def _run(
    base: str, key: str, sids: list[str], stateful: bool, seconds: float, wait: float
) -> Tally:
    """The sessions' loops, shared between the generator processes (one session looping alone
    first, for the unloaded median)."""
    shares = [sids[i::GENERATORS] for i in range(GENERATORS)]
    context = multiprocessing.get_context("spawn")
    with context.Pool(GENERATORS) as pool:
        alone = pool.apply(_generate, (base, key, sids[:1], stateful, ALONE_SECONDS))
        tallies = pool.starmap(
            _generate, [(base, key, share, stateful, seconds, wait) for share in shares]
        )
    total = Tally(alone=percentile(alone.compiles or [0.0], 50))
    for tally in tallies:
        total.add(tally)
    return total


def measure(
    url: str,
    config: Config,
    sessions: int,
    stored: int,
    seconds: float,
    built: dict[str, tuple[str, list[str]]] | None = None,
) -> dict[str, tuple[Tally, int]]:
    """Each loop kind in turn on a fresh server of ``config``: its tally and the peak RSS (then
    its paced loops, keyed by kind and pace). With ``built`` (by kind: a key and its sessions),
    those sessions are used, else new ones (and ``built`` gets them, for the next
    configuration)."""
    out = {}
    for kind, profile in PROFILES.items():
        with serve(url, config) as (base, new_key, pid):
            if built is not None and kind in built:
                key, sids = built[kind]
            else:
                key, sids = new_key, _sessions(base, new_key, profile, sessions, stored)
                if built is not None:
                    built[kind] = (key, sids)
            total = _run(base, key, sids, kind == "stateful", seconds, 0.0)
            out[kind] = (total, _peak_rss_kib(pid, config.workers))
            for pace in config.paces if total.loops else ():
                offered = pace * total.loops / seconds
                paced = _run(base, key, sids, kind == "stateful", seconds, len(sids) / offered)
                paced.offered = offered
                out[f"{kind} {pace:.0%}"] = (paced, _peak_rss_kib(pid, config.workers))
    return out


def report(name: str, tally: Tally, rss_kib: int, seconds: float, floor: float | None) -> float:
    rate = tally.loops / seconds
    ms = [c * 1000 for c in tally.compiles] or [0.0]
    ratio = f"{rate / floor:5.2f}x" if floor else "  1.00x"
    if tally.offered:
        ratio = f"offered {tally.offered:5.1f}"
    alone = tally.alone * 1000
    p99 = percentile(ms, 99)
    print(
        f"  {name:<38} {rate:8.1f} loops/s ({ratio})  compile p50 {percentile(ms, 50):7.1f} ms"
        f"  p99 {p99:7.1f} ms ({p99 / alone if alone else 0:5.1f}x one session alone:"
        f" {alone:5.1f} ms)  errors {len(tally.errors):3d}"
        f"  closed {tally.closed:2d}  RSS {rss_kib / 1024:6.0f} MiB"
    )
    for error in sorted(set(tally.errors))[:3]:
        print(f"      {error}")
    return rate


def run() -> None:
    kinds = os.environ.get("LOAD_DATABASES", "postgres").split(",")
    print(
        f"Load: {SESSIONS} sessions of {STORED} stored messages, {SECONDS:g} s per loop kind, "
        f"{GENERATORS} generator processes on this machine ({os.cpu_count()} CPUs); "
        "loops/s as a ratio of the baseline's"
    )
    for kind in kinds:
        with database(kind) as url:
            _ctxc(url, "migrate")
            results = {c.name: measure(url, c, SESSIONS, STORED, SECONDS) for c in CONFIGS}
            for loop_kind, profile in PROFILES.items():
                print(f" {kind}, {loop_kind} ({profile}):")
                floor = None
                for name, by_kind in results.items():
                    tally, rss = by_kind[loop_kind]
                    rate = report(name, tally, rss, SECONDS, floor)
                    floor = floor or rate
                    for pace in next(c for c in CONFIGS if c.name == name).paces:
                        tally, rss = by_kind[f"{loop_kind} {pace:.0%}"]
                        report(f"{name}, paced at {pace:.0%}", tally, rss, SECONDS, None)
    if os.environ.get("LOAD_BIG", "1") == "1":
        print(
            f"Load over {BIG_SESSIONS} sessions of {BIG_STORED:,} stored messages, "
            f"{SECONDS:g} s per loop kind (Postgres): is the server's RSS bounded?"
        )
        with database("postgres") as url:
            _ctxc(url, "migrate")
            built: dict[str, tuple[str, list[str]]] = {}  # built once, 100,000 messages each
            for config in CONFIGS[1:]:
                unpaced = replace(config, paces=())
                for loop_kind, (tally, rss) in measure(
                    url, unpaced, BIG_SESSIONS, BIG_STORED, SECONDS, built
                ).items():
                    report(f"{config.name}, {loop_kind}", tally, rss, SECONDS, None)


if __name__ == "__main__":
    run()
