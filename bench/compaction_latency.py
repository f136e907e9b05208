"""Compile latency at 10,000 stored messages: compaction turns against ordinary turns.

`python -m bench.compaction_latency [--quick] [--db sqlite|postgres|both] [--json]`
(`--quick`: 2 sessions of 2,000 messages). On each database, one `ctxc serve`; per summariser
arm (the built-in one, and an LLM summariser: the local Anthropic-protocol stub answering after
2 s), sessions of 10,000 messages of mixed sizes (short asks and answers, tool calls, tool
results from a few dozen to a few thousand tokens: about a million tokens) in a 2,000,000-token
window, so the window is never exceeded. Once filled (not timed), the session's policy is set
with its trigger a third of the way into the turns that follow, and a first compile with
compaction off reads what the session's digest does not cover yet (not timed); each turn
appends one message and compiles (the compile is timed, as the client sees it). A compaction
turn is a compile that applied a compaction, or the first compile over the trigger (over the
early mark, with background compaction); every other compile is an ordinary turn. Figures:
p50 and p99 of each, and compaction p99 / ordinary p99 (with few compaction turns, p99 is their
slowest).
"""

from __future__ import annotations

import argparse
import json
import random
import time
from typing import Any

import httpx

from app.domain.compaction.planning import CompactionPolicy
from bench.common import _ctxc, database, percentile, quick_run, serving, to_json
from bench.prefix_cache import features
from bench.summariser_stub import Stub, serving_stub, stub_profiles

MESSAGES, QUICK_MESSAGES = 10_000, 2_000
SESSIONS, QUICK_SESSIONS = 3, 2
TURNS = 45
WINDOW = 2_000_000
STUB_DELAY_S = 2.0
FILL_BATCH = 1_000
WORDS = "the agent reads src/app/main.py then runs pytest and fixes the failing import".split()  # noqa: SIM905


def _text(rng: random.Random, low: int, high: int) -> str:
    return " ".join(rng.choices(WORDS, k=rng.randint(low, high)))


def _result_words(rng: random.Random) -> tuple[int, int]:
    roll = rng.random()
    return (20, 150) if roll < 0.7 else (150, 600) if roll < 0.95 else (600, 2_500)


def message(rng: random.Random, n: int) -> dict[str, Any]:
    """The ``n``-th message of a session: an ask, a tool call, its result, an answer, in turn."""
    kind = n % 4
    if kind == 0:
        return {"role": "user", "content": _text(rng, 10, 60)}
    if kind == 1:
        arguments = json.dumps({"path": f"f{n}.py"})
        call = {
            "id": f"call_{n}",
            "type": "function",
            "function": {"name": "read_file", "arguments": arguments},
        }
        return {"role": "assistant", "content": None, "tool_calls": [call]}
    if kind == 2:
        return {
            "role": "tool",
            "tool_call_id": f"call_{n - 1}",
            "content": _text(rng, *_result_words(rng)),
        }
    return {"role": "assistant", "content": _text(rng, 10, 60)}


def _policy(tokens: int, margin: int, llm: bool) -> dict[str, Any]:
    trigger = tokens + margin
    policy: dict[str, Any] = {"trigger_tokens": trigger, "summary_tokens": 2_000}
    if llm:
        policy["summarizer"] = {"profile": "stub"}
    return policy


def _early_mark(trigger: int) -> int:
    """Where a compaction is first due: the trigger, or with background compaction the early
    mark at the policy's default ``prepare_pct``."""
    prepare = CompactionPolicy.model_fields.get("prepare_pct")
    return trigger if prepare is None else trigger * int(prepare.default) // 100


def one_session(
    client: httpx.Client, size: int, seed: int, llm: bool
) -> tuple[list[float], list[float], int]:
    """Fill a session, set its policy, and time its turns: (ordinary, compaction) seconds and
    the compactions applied."""
    rng = random.Random(seed)
    fields = {"provider": "openai", "context_window": WINDOW}
    sid = client.post("/v1/sessions", json=fields).raise_for_status().json()["id"]
    for first in range(0, size, FILL_BATCH):
        batch = [message(rng, n) for n in range(first, min(size, first + FILL_BATCH))]
        client.post(f"/v1/sessions/{sid}/messages", json={"messages": batch}).raise_for_status()
    tokens = client.get(f"/v1/sessions/{sid}").raise_for_status().json()["tokens"]
    policy = _policy(tokens, tokens // size * TURNS // 3, llm)
    client.patch(f"/v1/sessions/{sid}", json={"compaction": policy}).raise_for_status()
    warm_up = {"compaction": {"enabled": False}}
    client.post(f"/v1/sessions/{sid}/compile", json=warm_up).raise_for_status()
    mark, crossed = _early_mark(policy["trigger_tokens"]), False
    ordinary: list[float] = []
    compacting: list[float] = []
    applied = 0
    for n in range(size, size + TURNS):
        posted = client.post(f"/v1/sessions/{sid}/messages", json={"messages": [message(rng, n)]})
        tokens += posted.raise_for_status().json()["messages"][0]["tokens"]
        start = time.perf_counter()
        answer = client.post(f"/v1/sessions/{sid}/compile", json={}).raise_for_status().json()
        took = time.perf_counter() - start
        first_over = tokens > mark and not crossed
        crossed = crossed or tokens > mark
        (compacting if answer["compactions"] or first_over else ordinary).append(took)
        if answer["compactions"]:
            applied += len(answer["compactions"])
            tokens = client.get(f"/v1/sessions/{sid}").json()["tokens"]
    return ordinary, compacting, applied


def measure_db(kind: str, stub: Stub, quick: bool) -> dict[str, Any]:
    size = QUICK_MESSAGES if quick else MESSAGES
    sessions = QUICK_SESSIONS if quick else SESSIONS
    out: dict[str, Any] = {}
    with database(kind) as url:
        _ctxc(url, "migrate")
        env = {
            "CTXC_SUMMARIZER_PROFILES": stub_profiles(stub.url, 1_000_000),
            "CTXC_MAX_BODY_BYTES": str(256 * 1024 * 1024),
        }
        with serving(url, env, "bench") as (root, key, _):
            headers = {"Authorization": f"Bearer {key}"}
            with httpx.Client(base_url=root, headers=headers, timeout=600) as client:
                for llm in (False, True):
                    ordinary: list[float] = []
                    compacting: list[float] = []
                    applied = 0
                    for seed in range(sessions):
                        o, c, a = one_session(client, size, seed, llm)
                        ordinary += o
                        compacting += c
                        applied += a
                    name = f"LLM stub, {STUB_DELAY_S:.0f} s" if llm else "built-in"
                    out[name] = _figures(ordinary, compacting, applied, len(stub.take()))
    return out


def _figures(
    ordinary: list[float], compacting: list[float], applied: int, requests: int
) -> dict[str, Any]:
    def ms(values: list[float], pct: float) -> float:
        return 1000 * percentile(values, pct) if values else float("nan")

    p99 = ms(ordinary, 99)
    return {
        "ordinary_n": len(ordinary),
        "ordinary_p50_ms": ms(ordinary, 50),
        "ordinary_p99_ms": p99,
        "compaction_n": len(compacting),
        "compaction_p50_ms": ms(compacting, 50),
        "compaction_p99_ms": ms(compacting, 99),
        "ratio_p99": ms(compacting, 99) / p99,
        "compactions": applied,
        "summariser_requests": requests,
    }


def run(quick: bool | None = None, db: str = "both", as_json: bool = False) -> None:
    quick = quick_run(quick)
    kinds = ("sqlite", "postgres") if db == "both" else (db,)
    out: dict[str, Any] = {
        "messages": QUICK_MESSAGES if quick else MESSAGES,
        "features": features(),
        "databases": {},
    }
    with serving_stub(STUB_DELAY_S) as stub:
        for kind in kinds:
            out["databases"][kind] = measure_db(kind, stub, quick)
    if as_json:
        print(to_json(out))
        return
    print(
        f"compile latency at {out['messages']:,} messages: compaction turns against ordinary "
        f"turns (one message appended, then a compile); features: {out['features']}"
    )
    for kind, arms in out["databases"].items():
        for name, f in arms.items():
            print(
                f"  {kind:8} {name:14} ordinary p50 {f['ordinary_p50_ms']:8.1f} ms p99 "
                f"{f['ordinary_p99_ms']:8.1f} ms (n={f['ordinary_n']}) | compaction p50 "
                f"{f['compaction_p50_ms']:8.1f} ms p99 {f['compaction_p99_ms']:8.1f} ms "
                f"(n={f['compaction_n']}, {f['compactions']} applied, "
                f"{f['summariser_requests']} summariser requests) | p99 ratio "
                f"{f['ratio_p99']:6.1f}"
            )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.compaction_latency")
    parser.add_argument("--quick", action="store_true", default=None)
    parser.add_argument("--db", choices=("sqlite", "postgres", "both"), default="both")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    run(args.quick, args.db, args.json)


if __name__ == "__main__":
    main()
