"""Prompt-cache economics of compaction: a 200-turn coding session through ctxc, billed by a
simulated provider prompt cache (`bench.cache_sim`), against a raw agent.

`python -m bench.prefix_cache [--quick] [--json]` (`--quick`: 80 turns, a smaller policy).
The session is generated (`bench.coding_session`, seed 16). Each turn the agent appends the new
user message (an ask or tool results, with its previous answer) to a session of a real
`ctxc serve` on SQLite, compiles it for `anthropic`, and sends the compiled prompt with its
breakpoint on the last block. The summariser is the built-in one, or in a second arm an LLM
summariser: a local stub speaking the Anthropic Messages protocol (`bench.summariser_stub`),
whose requests go through the same simulated account as the agent's, at the simulated time
they arrive. Tool definitions are not part of the simulated prompts.

Every request is then billed twice, by an Anthropic-mode cache and an OpenAI-mode cache, each
a fresh account per arm. The raw agent sends its whole history every turn; when that would
exceed the 200,000-token window it drops its oldest tasks (asks and all that answers them)
down to half the window, a naive client's truncation (its "compactions"; the request after one
is its compaction turn). Figures are shares and ratios: the
share of prompt tokens read from cache overall and on compaction turns (each summariser
request, and the agent's first request after a compaction), and billed input against the raw
agent and against the same arm with the cache-economic gate switched off (`economic_gate`).
The stub answers in the ledger's sections, so its summaries are used as written.
"""

from __future__ import annotations

import argparse
import functools
import math
from dataclasses import dataclass, field
from typing import Any

import httpx

from app.adapters.tokenizers import load_counter
from app.domain.compaction.planning import CompactionPolicy
from bench.cache_sim import Block, Mode, PrefixCache, prompt_blocks, with_breakpoint_at_end
from bench.coding_session import SYSTEM, Turn, coding_session
from bench.common import _ctxc, database, quick_run, serving, to_json
from bench.summariser_stub import Stub, serving_stub, stub_profiles

SEED = 16
TURNS, QUICK_TURNS = 200, 80
POLICY = {"trigger_tokens": 50_000, "target_tokens": 25_000, "summary_tokens": 2_000}
QUICK_POLICY = {"trigger_tokens": 20_000, "target_tokens": 10_000, "summary_tokens": 1_000}
WINDOW = 200_000
MODES: tuple[Mode, ...] = ("anthropic", "openai")
SHARES = ("overall", "compaction_turns", "summariser", "after")
ENCODER = load_counter().encoder("o200k_base")


@functools.lru_cache(maxsize=200_000)
def count(text: str) -> int:
    return ENCODER.count(text)


@dataclass(frozen=True)
class Sent:
    """One request to the provider: who sent it (`agent`, `after` a compaction, `summariser`),
    when (simulated seconds) and its blocks."""

    kind: str
    at: float
    blocks: list[Block]


@dataclass
class Arm:
    name: str
    sent: list[Sent] = field(default_factory=list)
    compactions: int = 0
    summarizers: set[str] = field(default_factory=set)


GATE = "economic_gate"


def features() -> dict[str, bool]:
    """What of issue 16 this build has, read off the policy's fields: the background
    preparation, the minimum shed and the switch of the cache-economic gate."""
    policy = CompactionPolicy.model_fields
    return {name: name in policy for name in ("prepare_pct", "min_shed_pct", GATE)}


def policy_for(base: dict[str, Any], llm: bool, off: bool) -> dict[str, Any]:
    """The session's policy: ``base``, the stub as summariser when ``llm``, and the gate
    switched off when ``off`` (when this build has it)."""
    policy = dict(base)
    if off and features()[GATE]:
        policy[GATE] = False
    if llm:
        policy["summarizer"] = {"profile": "stub"}
    return policy


def run_raw(session: list[Turn]) -> Arm:
    """The agent without ctxc: its whole history each turn, truncated as the docstring says."""
    arm, at = Arm("raw agent (no ctxc)"), 0.0
    history: list[dict[str, Any]] = []
    starts: list[int] = []
    for turn in session:
        at += turn.gap_s
        if turn.task_start:
            starts.append(len(history))
        history.append(turn.incoming)
        blocks = prompt_blocks(SYSTEM, history, count)
        kind = "agent"
        if sum(b.tokens for b in blocks) > WINDOW:
            arm.compactions, kind = arm.compactions + 1, "after"
            while sum(b.tokens for b in blocks) > WINDOW // 2 and len(starts) > 1:
                cut = starts.pop(1) - starts[0]
                history, starts = history[cut:], [s - cut for s in starts]
                blocks = prompt_blocks(SYSTEM, history, count)
        arm.sent.append(Sent(kind, at, with_breakpoint_at_end(blocks)))
        history.append(turn.reply)
    return arm


def run_ctxc(
    client: httpx.Client, stub: Stub, arm: Arm, policy: dict[str, Any], session: list[Turn]
) -> Arm:
    """The agent through ctxc: append, compile, send; the stub's requests as they come."""
    clock = [0.0]
    stub.clock = lambda: clock[0]
    stub.take()
    fields = {"provider": "anthropic", "compaction": policy}
    sid = client.post("/v1/sessions", json=fields).raise_for_status().json()["id"]
    previous: dict[str, Any] | None = None
    for turn in session:
        clock[0] += turn.gap_s
        body: dict[str, Any] = {"format": "anthropic", "messages": [turn.incoming]}
        if previous is None:
            body["system"] = SYSTEM
        else:
            body["messages"].insert(0, previous)
        client.post(f"/v1/sessions/{sid}/messages", json=body).raise_for_status()
        answer = client.post(f"/v1/sessions/{sid}/compile", json={}).raise_for_status().json()
        _drain(stub, arm)
        blocks = prompt_blocks(answer.get("system"), answer["messages"], count)
        kind = "after" if answer["compactions"] else "agent"
        arm.sent.append(Sent(kind, clock[0], with_breakpoint_at_end(blocks)))
        arm.compactions += len(answer["compactions"])
        arm.summarizers |= {c["summarizer"] or "" for c in answer["compactions"]}
        previous = turn.reply
    _drain(stub, arm)
    return arm


def _drain(stub: Stub, arm: Arm) -> None:
    for recorded in stub.take():
        blocks = prompt_blocks(recorded.body.get("system"), recorded.body["messages"], count)
        arm.sent.append(Sent("summariser", recorded.at, blocks))


def bill(arm: Arm, mode: Mode) -> dict[str, float]:
    """An arm's requests billed by a fresh account in ``mode``: shares and billed input."""
    cache = PrefixCache(mode)
    sums: dict[str, list[float]] = {k: [0, 0, 0] for k in ("agent", "after", "summariser")}
    for sent in arm.sent:
        got, tally = cache.send(sent.blocks, sent.at), sums[sent.kind]
        for n, value in enumerate((got.prompt, got.read, got.billed)):
            tally[n] += value
    total = [sum(v[i] for v in sums.values()) for i in range(3)]

    def share(*kinds: str) -> float:
        prompt = sum(sums[k][0] for k in kinds)
        return sum(sums[k][1] for k in kinds) / prompt if prompt else float("nan")

    return {
        "overall": share("agent", "after", "summariser"),
        "compaction_turns": share("after", "summariser"),
        "summariser": share("summariser"),
        "after": share("after"),
        "prompt_tokens": total[0],
        "billed": total[2],
    }


def measure(quick: bool) -> dict[str, Any]:
    session = coding_session(SEED, QUICK_TURNS if quick else TURNS)
    base = QUICK_POLICY if quick else POLICY
    found = features()
    arms = [run_raw(session)]
    with serving_stub() as stub, database("sqlite") as url:
        _ctxc(url, "migrate")
        env = {"CTXC_SUMMARIZER_PROFILES": stub_profiles(stub.url)}
        with serving(url, env, "bench") as (root, key, _):
            headers = {"Authorization": f"Bearer {key}"}
            with httpx.Client(base_url=root, headers=headers, timeout=600) as client:
                for llm in (False, True):
                    for off in (False, True) if found[GATE] else (False,):
                        name = ("ctxc, LLM summariser (stub)" if llm else "ctxc, built-in") + (
                            ", gate off" if off else ""
                        )
                        arms.append(Arm(name))
                        run_ctxc(client, stub, arms[-1], policy_for(base, llm, off), session)
    raw = {mode: bill(arms[0], mode) for mode in MODES}
    out: dict[str, Any] = {"turns": len(session), "policy": base, "features": found, "arms": {}}
    for arm in arms:
        figures: dict[str, dict[str, float]] = {mode: bill(arm, mode) for mode in MODES}
        for mode in MODES:
            figures[mode]["vs_raw"] = figures[mode]["billed"] / raw[mode]["billed"]
        row: dict[str, Any] = {
            "compactions": arm.compactions,
            "summarizers": sorted(arm.summarizers),
            **figures,
        }
        out["arms"][arm.name] = row
    return out


def _pct(share: float) -> str:
    return "     -" if math.isnan(share) else f"{share:6.1%}"


def report(out: dict[str, Any]) -> None:
    print(
        f"prefix cache: {out['turns']}-turn coding session, policy {out['policy']}; "
        f"issue 16 features in this build: {out['features']}"
    )
    for mode in MODES:
        print(
            f"  {mode} mode: cache-read share of prompt tokens (overall | compaction turns: "
            "summariser requests, first agent request after), billed input vs raw"
        )
        for name, arm in out["arms"].items():
            f = {k: _pct(arm[mode][k]) for k in SHARES}
            print(
                f"    {name:40} compactions {arm['compactions']:3} | overall {f['overall']} "
                f"| compaction turns {f['compaction_turns']} (summariser {f['summariser']}, "
                f"after {f['after']}) | billed {arm[mode]['billed']:12,.0f} = "
                f"{arm[mode]['vs_raw']:5.2f} x raw"
            )
    for name, arm in out["arms"].items():
        if arm["summarizers"]:
            print(f"    {name}: summaries written by {arm['summarizers']}")


def run(quick: bool | None = None, as_json: bool = False) -> None:
    out = measure(quick_run(quick))
    if as_json:
        print(to_json(out))
    else:
        report(out)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.prefix_cache")
    parser.add_argument("--quick", action="store_true", default=None)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    run(args.quick, args.json)


if __name__ == "__main__":
    main()
