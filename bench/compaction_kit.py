"""Summary quality on compaction-conformance-kit (a dev dependency): ctxc's summariser and fold
against the kit's built-in compactors, at fixed character budgets, over chained rounds.

`python -m bench.compaction_kit` (`--quick`, or `CTXC_BENCH_QUICK=1`: seeds 1-4; `--seeds 1-50`,
`--rounds 10`, `--json FILE` for the figures).

The kit plants typed canaries (safety rules, constraints, facts, goals, preferences, values later
updated) in seeded sessions: its randomized corpus (survival, re-stated updates) and its two
semantic corpora (paraphrased updates, distinct near-duplicates). Budgets are the kit's: characters,
a share of the original transcript, fixed across rounds; what a compactor leaves is probed with the
kit's own probe, and a budget overrun in any round makes the compactor non-compliant.

Chaining: the kit re-compacts a round's output alone; ctxc never summarises a summary alone (a
plan needs two messages), it summarises the previous summary with the messages that came after it.
So every round after the first gives each compactor the previous round's output plus the same new
canary-free turns (for the kit's compactors its output as a system turn, the kit's way; for ctxc
its live history, the summary message where the service stores it).

ctxc is run through the service's own summariser and fold (bench/kit_ctxc.py).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from compaction_kit import (
    Canary,
    CanaryType,
    Turn,
    build_random_session,
    build_semantic_heldout_session,
    build_semantic_session,
)
from compaction_kit.cli import COMPACTORS
from compaction_kit.probes import BehaviorProbe

from app.adapters.summarizers import summarizer_from_settings
from app.adapters.tokenizers import load_counter
from app.settings import Settings
from bench.common import quick_run, verdict
from bench.kit_ctxc import ENCODING, NEW_ROUNDS, CtxcChain, new_turns, text_of

CTXC = "ctxc"
BUDGETS = (0.10, 0.20, 0.30)
ROUNDS = 10
SEEDS = range(1, 51)
QUICK_SEEDS = range(1, 5)


@dataclass
class Tally:
    """One compactor's figures at one budget."""

    survived: dict[int, int] = field(default_factory=dict)  # round -> randomized canaries held
    canaries: int = 0
    by_type: dict[str, list[int]] = field(default_factory=dict)  # type -> [held, of] at the end
    stale: dict[int, int] = field(default_factory=dict)  # round -> superseded values present
    updates: int = 0
    resolved: int = 0  # semantic conflicts: latest held, stale gone (last round)
    conflicts: int = 0
    pairs_held: int = 0
    pairs: int = 0
    compliant: bool = True
    worst: float = 0.0  # the largest output against the budget
    seconds: float = 0.0

    def survival(self, round_num: int) -> float:
        return self.survived.get(round_num, 0) / max(1, self.canaries)


def _lower(text: str) -> str:
    return text.lower()


def _held(canary: Canary, text: str) -> bool:
    return BehaviorProbe().probe(canary, text).survived


def _stale(canary: Canary, lower: str) -> bool:
    return any(t.lower() in lower for t in canary.superseded_tokens)


async def _outputs(
    name: str, turns: list[Turn], seed: int, budget: int, rounds: int, ctx: dict[str, Any]
) -> list[str]:
    """The text each round leaves, for ``name`` on a session of ``turns``."""
    outputs: list[str] = []
    if name == CTXC:
        transcript = text_of(turns)
        per_char = ctx["counter"].encoder(ENCODING).count(transcript) / len(transcript)
        chain = CtxcChain(ctx["summarizer"], ctx["counter"], budget, per_char)
        chain.add(turns)
        for k in range(1, rounds + 1):
            if k > 1:
                chain.add(new_turns(seed, k))
            outputs.append(await chain.compact())
        return outputs
    compactor = COMPACTORS[name]()
    given = turns
    for k in range(1, rounds + 1):
        if k > 1:
            given = [Turn("system", outputs[-1]), *new_turns(seed, k)]
        outputs.append(compactor.compact(given, round_num=k, budget_chars=budget).text)
    return outputs


async def measure(
    name: str, fraction: float, seeds: Sequence[int], rounds: int, ctx: dict[str, Any]
) -> Tally:
    """``name``'s figures at ``fraction`` over the kit's three corpora."""
    tally, started = Tally(), time.perf_counter()
    for seed in seeds:
        sessions = [(*build_random_session(seed), None)]
        sessions += [
            builder(seed) for builder in (build_semantic_session, build_semantic_heldout_session)
        ]
        for session, canaries, meta in sessions:
            turns = session.transcript()
            budget = max(1, int(len(text_of(turns)) * fraction))
            outputs = await _outputs(name, turns, seed, budget, rounds, ctx)
            for text in outputs:
                tally.worst = max(tally.worst, len(text) / budget)
                tally.compliant &= len(text) <= budget
            updates = [c for c in canaries if c.superseded_tokens]
            if meta is not None:
                updates = [c for c in canaries if c.id in meta["conflicts"]]
            for k in sorted({1, rounds}):
                lower = _lower(outputs[k - 1])
                tally.stale[k] = tally.stale.get(k, 0) + sum(_stale(c, lower) for c in updates)
            final = outputs[-1]
            if meta is None:
                tally.canaries += len(canaries)
                tally.updates += len(updates)
                for k in sorted({1, rounds}):
                    held = sum(_held(c, outputs[k - 1]) for c in canaries)
                    tally.survived[k] = tally.survived.get(k, 0) + held
                for c in canaries:
                    counts = tally.by_type.setdefault(c.type.value, [0, 0])
                    counts[0] += _held(c, final)
                    counts[1] += 1
                continue
            held = {c.id: _held(c, final) for c in canaries}
            for c in updates:
                tally.conflicts += 1
                tally.resolved += held[c.id] and not _stale(c, _lower(final))
            for first, second in meta["distinct_pairs"]:
                tally.pairs += 1
                tally.pairs_held += held.get(first, False) and held.get(second, False)
    tally.seconds = time.perf_counter() - started
    return tally


def _rank(tally: Tally, rounds: int) -> tuple[bool, float, float, float]:
    """The kit's leaderboard order: compliance, survival, semantic resolution, distinct pairs."""
    return (
        not tally.compliant,
        -tally.survival(rounds),
        -tally.resolved / max(1, tally.conflicts),
        -tally.pairs_held / max(1, tally.pairs),
    )


def report(fraction: float, tallies: dict[str, Tally], rounds: int) -> dict[str, Any]:
    """Print one budget's table and the verdicts; the figures as a dict."""
    builtins = sorted((n for n in tallies if n != CTXC), key=lambda n: _rank(tallies[n], rounds))
    best, ours = builtins[0], tallies[CTXC]
    print(f"budget {fraction:.0%} of the transcript (characters), {rounds} chained rounds")
    heads = ("round 1", f"round {rounds}", "stale", "resolved", "pairs", "compliant")
    widths = (8, 8, 7, 8, 6, 9)
    cells = " ".join(f"{h:>{w}}" for h, w in zip(heads, widths, strict=True))
    print(f"  {'compactor':24} {cells} {'max/budget':>10} {'seconds':>8}")
    for name in [CTXC, *builtins]:
        t = tallies[name]
        stale = f"{t.stale.get(1, 0)}/{t.stale.get(rounds, 0)}"
        print(
            f"  {name:24} {t.survival(1):8.1%} {t.survival(rounds):8.1%} {stale:>7} "
            f"{t.resolved / max(1, t.conflicts):8.1%} {t.pairs_held / max(1, t.pairs):6.1%} "
            f"{'yes' if t.compliant else 'NO':>9} {t.worst:10.2f} {t.seconds:8.1f}"
        )
    b = tallies[best]
    stale = max(ours.stale.get(1, 0), ours.stale.get(rounds, 0))
    targets = {
        f"survival after round {rounds} at least the best built-in ({best}, "
        f"{b.survival(rounds):.1%})": ours.survival(rounds) >= b.survival(rounds),
        f"0 stale values (rounds 1 and {rounds}: {ours.stale.get(1, 0)}, "
        f"{ours.stale.get(rounds, 0)} of {ours.updates + ours.conflicts})": stale == 0,
        f"budget-compliant (largest output {ours.worst:.2f} of the budget)": ours.compliant,
        f"no drop from round 1 to round {rounds} ({ours.survival(1):.1%} -> "
        f"{ours.survival(rounds):.1%})": ours.survival(rounds) >= ours.survival(1),
    }
    for text, met in targets.items():
        print(f"  target: {text}: {verdict(met)}")
    return {
        "budget_fraction": fraction,
        "best_builtin": best,
        "targets_met": all(targets.values()),
        "compactors": {
            name: {
                "survival_round_1": round(t.survival(1), 4),
                f"survival_round_{rounds}": round(t.survival(rounds), 4),
                "final_by_type": {k: round(v[0] / v[1], 4) for k, v in sorted(t.by_type.items())},
                "stale_round_1": t.stale.get(1, 0),
                f"stale_round_{rounds}": t.stale.get(rounds, 0),
                "stale_probes": t.updates + t.conflicts,
                "semantic_resolved": round(t.resolved / max(1, t.conflicts), 4),
                "distinct_pairs": round(t.pairs_held / max(1, t.pairs), 4),
                "budget_compliant": t.compliant,
                "max_output_to_budget": round(t.worst, 3),
                "seconds": round(t.seconds, 2),
            }
            for name, t in tallies.items()
        },
    }


async def benchmark(
    seeds: Sequence[int], rounds: int, budgets: Sequence[float] = BUDGETS
) -> list[dict[str, Any]]:
    """Every budget's figures, printed as they come."""
    counter = load_counter()
    summarizer = summarizer_from_settings(Settings(), counter)
    ctx = {"counter": counter, "summarizer": summarizer}
    names = [CTXC, *COMPACTORS]
    out = []
    try:
        for fraction in budgets:
            tallies = {n: await measure(n, fraction, seeds, rounds, ctx) for n in names}
            out.append(report(fraction, tallies, rounds))
            print()
    finally:
        await summarizer.aclose()
    return out


def _seeds(spec: str) -> list[int]:
    first, _, last = spec.partition("-")
    return list(range(int(first), int(last or first) + 1))


def run(
    quick: bool | None = None,
    seeds: Sequence[int] | None = None,
    rounds: int = ROUNDS,
    json_path: str | None = None,
) -> None:
    """The benchmark: seeds 1-50 (1-4 quick), ``rounds`` chained rounds, 10/20/30% budgets."""
    seeds = list(seeds or (QUICK_SEEDS if quick_run(quick) else SEEDS))
    print(
        f"compaction-conformance-kit: the service's summariser ({Settings().summarizer}) and "
        f"fold against the kit's built-in compactors; seeds {seeds[0]}-{seeds[-1]}, randomized "
        f"and semantic corpora, {NEW_ROUNDS} new API rounds between compactions"
    )
    started = time.perf_counter()
    figures = asyncio.run(benchmark(seeds, rounds))
    print(
        f"  {time.perf_counter() - started:.0f} s in all; types: "
        f"{', '.join(t.value for t in CanaryType)}"
    )
    if json_path:
        payload = {"seeds": seeds, "rounds": rounds, "budgets": figures}
        with open(json_path, "w") as out:
            json.dump(payload, out, indent=2)


def main(argv: Sequence[str]) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.compaction_kit")
    parser.add_argument("--quick", action="store_true", help="seeds 1-4")
    parser.add_argument("--seeds", help="a range such as 1-50")
    parser.add_argument("--rounds", type=int, default=ROUNDS)
    parser.add_argument("--json", dest="json_path", help="write the figures there")
    args = parser.parse_args(argv)
    seeds = _seeds(args.seeds) if args.seeds else None
    run(args.quick or None, seeds, args.rounds, args.json_path)


if __name__ == "__main__":
    main(sys.argv[1:])
