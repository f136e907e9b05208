"""Budget fill on the shared transcripts: token_limit with and without the reduced round.

Every transcript of ``../shared/transcripts`` (in its own provider's shape, counted with the real
tokenizer) is compiled with ``token_limit`` at budgets (``max_tokens``) of 10, 30 and 60% of its
size (the request compiled with no limit). Where the budget binds (the whole request does not
fit) the fill is the request's total over the budget: before (``reduce: false``, the walk drops
the round that does not fit) and after (``reduce: true``, the default: that round is sent with
its tool results previewed, or its assistant text cut, where that fits). Printed per budget: p10,
median, share at or above 0.9 and minimum of the fill, the compiles the budget cannot hold (422),
and provider violations (the validators' problems; must be 0).

Then the compile time the step adds: every binding compile timed with it on and off in the same
run (the snapshot built and counted once, as the service holds it), as a ratio of the sums of
the medians; also over only the compiles where the step reduced a round. The step's work is
bounded by one round (a few tries, each counting its previews), not by the history: the same
ratio on generated agent histories of 1,000 and 10,000 messages at the same budgets.
"""

from __future__ import annotations

import gc
import json
import random
import statistics
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from app.adapters.tokenizers import load_counter
from app.domain.compilers.base import Item, Snapshot
from app.domain.compilers.decorators import BudgetTooSmall
from app.domain.compilers.registry import build
from app.domain.compilers.spec import parse_spec
from app.domain.compiling import Output, Target, compile_request
from app.domain.formats.anthropic import from_anthropic
from app.domain.formats.openai import from_openai
from app.domain.messages import DEFAULT_SECTION
from app.domain.providers import PROFILES, ProviderProfile
from app.domain.tokens import count_message
from app.domain.validity import anthropic_problems, openai_problems
from bench.append import agent_batch
from bench.common import percentile, quick_run, verdict

# The transcripts live beside the repository (CI has them, a fresh clone does not).
TRANSCRIPTS = Path(__file__).resolve().parents[2] / "shared" / "transcripts"
SHARES = (10, 30, 60)
TARGET_FILL = 0.9
TARGET_SHARE = 0.9
COUNTER = load_counter()
NOW = datetime(2026, 1, 1, tzinfo=UTC)


@dataclass(frozen=True)
class Transcript:
    name: str
    profile: ProviderProfile
    snapshot: Snapshot
    tools_tokens: int


@dataclass(frozen=True)
class Fill:
    """One binding compile: its fill, whether a round was reduced, the validators' problems."""

    name: str
    share: int
    fill: float
    reduced: bool
    problems: tuple[str, ...]


def _transcript(name: str, profile: ProviderProfile, messages: list[Any], tools: Any) -> Transcript:
    encoder = COUNTER.encoder(profile.encoding)

    def count(message: Any) -> int:
        return count_message(message, encoder)

    items = tuple(Item(n + 1, DEFAULT_SECTION, m, count(m)) for n, m in enumerate(messages))
    snapshot = Snapshot(items=items, tenant="bench", now=NOW, count=count)
    tools_tokens = encoder.count(json.dumps(tools, ensure_ascii=False)) if tools else 0
    return Transcript(name, profile, snapshot, tools_tokens)


def generated(size: int) -> Transcript:
    """An agent history of ``size`` messages (prompts, calls, file reads, logs), OpenAI-shaped."""
    rng = random.Random(size)
    raw = [m for i in range(0, size, 10) for m in agent_batch(rng, i)][:size]
    return _transcript(f"generated/{size}", PROFILES["gpt-4o"], from_openai(raw), None)


def transcripts(folder: Path = TRANSCRIPTS) -> list[Transcript]:
    """Every transcript in ``folder``, as a snapshot in its provider's shape."""
    out = []
    for path in sorted(folder.glob("*/*.json")):
        document: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
        if path.parent.name == "anthropic":
            profile = PROFILES["anthropic"]
            messages = from_anthropic(document["messages"], document.get("system"))
        else:
            profile = PROFILES["gpt-4o"]
            messages = from_openai(document["messages"])
        name = f"{path.parent.name}/{path.stem}"
        out.append(_transcript(name, profile, messages, document.get("tools")))
    return out


def compile_at(transcript: Transcript, budget: int | None, reduce: bool = True) -> Output:
    """The transcript compiled with token_limit at ``budget`` tokens (None: no limit)."""
    params: dict[str, Any] = {"reduce": reduce}
    if budget is not None:
        params["max_tokens"] = budget
    spec = {"decorators": [{"name": "token_limit", "params": params}]}
    window = max(transcript.profile.context_window, budget or 0)
    target = Target(transcript.profile, window, tools_tokens=transcript.tools_tokens)
    return compile_request(transcript.snapshot, build(parse_spec(spec)), target)


def budgets(every: list[Transcript]) -> Iterator[tuple[Transcript, int, int]]:
    """Each transcript with each share and its budget, where the budget binds."""
    for transcript in every:
        size = compile_at(transcript, None).total
        for share in SHARES:
            budget = size * share // 100
            if budget < size:
                yield transcript, share, budget


def fills(every: list[Transcript], reduce: bool) -> tuple[list[Fill], list[tuple[str, int]]]:
    """The binding compiles' fills, and the (transcript, share) the budget cannot hold."""
    out, refused = [], []
    for transcript, share, budget in budgets(every):
        try:
            output = compile_at(transcript, budget, reduce)
        except BudgetTooSmall:
            refused.append((transcript.name, share))
            continue
        reduced = any(w.startswith("token_limit: the oldest round sent") for w in output.warnings)
        found = problems(transcript, output)
        out.append(Fill(transcript.name, share, output.total / budget, reduced, found))
    return out, refused


def problems(transcript: Transcript, output: Output) -> tuple[str, ...]:
    """What the transcript's provider validator finds wrong with ``output``."""
    if transcript.profile.output == "anthropic":
        return tuple(anthropic_problems(output.system, output.messages))
    return tuple(openai_problems(output.messages))


def met(values: list[Fill]) -> bool:
    """Whether fill >= 0.9 in at least 90% of ``values``."""
    return sum(f.fill >= TARGET_FILL for f in values) >= TARGET_SHARE * len(values)


def describe(values: list[Fill]) -> str:
    fill = [f.fill for f in values]
    share = sum(v >= TARGET_FILL for v in fill) / len(fill)
    return (
        f"p10 {percentile(fill, 10):.3f}  median {statistics.median(fill):.3f}  "
        f">= {TARGET_FILL}: {share:4.0%}  min {min(fill):.3f}"
    )


def _median_times(transcript: Transcript, budget: int, repeats: int) -> tuple[float, float]:
    """The median compile time with the step and without it: CPU time of this process (a
    compile is single-threaded), the two interleaved, so that what else the machine does weighs
    on neither."""
    times: dict[bool, list[float]] = {True: [], False: []}
    for _ in range(repeats):
        for reduce in (False, True):
            gc.collect()  # as timeit does: no collection of the other's garbage in the time
            gc.disable()
            start = time.process_time()
            compile_at(transcript, budget, reduce)
            times[reduce].append(time.process_time() - start)
            gc.enable()
    return statistics.median(times[True]), statistics.median(times[False])


def timings(every: list[Transcript], repeats: int) -> tuple[float, float, float]:
    """Time with the step over time without, over every binding compile and over those where
    it reduced a round (1.0 when none did), and the time it adds to one of those (mean, s)."""
    on = off = on_reduced = off_reduced = 0.0
    count = 0
    for transcript, _, budget in budgets(every):
        try:
            output = compile_at(transcript, budget, True)
        except BudgetTooSmall:
            continue
        with_step, without = _median_times(transcript, budget, repeats)
        on, off = on + with_step, off + without
        if any(w.startswith("token_limit: the oldest round sent") for w in output.warnings):
            on_reduced, off_reduced = on_reduced + with_step, off_reduced + without
            count += 1
    ratio = on_reduced / off_reduced if off_reduced else 1.0
    return on / off, ratio, (on_reduced - off_reduced) / max(count, 1)


def run(quick: bool | None = None) -> None:
    print("budget fill: token_limit on the shared transcripts at 10/30/60% of their size")
    if not TRANSCRIPTS.is_dir():
        print("  no transcripts beside this checkout: skipped")
        return
    every = transcripts()
    results = {reduce: fills(every, reduce) for reduce in (False, True)}
    for reduce, label in ((False, "before (reduce off)"), (True, "after (reduce on) ")):
        done, refused = results[reduce]
        for share in SHARES:
            at = [f for f in done if f.share == share]
            cut = sum(1 for _, s in refused if s == share)
            print(
                f"  {label} {share:2d}%: {len(at):2d} binding, {cut} refused (422) | {describe(at)}"
            )
        violations = sum(len(f.problems) for f in done)
        print(
            f"  {label} all: {len(done)} binding | {describe(done)} | provider violations "
            f"{violations} ({verdict(violations == 0)})"
        )
    after = results[True][0]
    reduced = sum(f.reduced for f in after)
    print(
        f"  target fill >= {TARGET_FILL} in >= {TARGET_SHARE:.0%} of binding compiles: "
        f"{verdict(met(after))} (a round reduced in {reduced} of {len(after)})"
    )
    repeats = 3 if quick_run(quick) else 15
    every_ratio, reduced_ratio, added = timings(every, repeats)
    print(
        f"  compile time with the step / without, same run: {every_ratio:.2f}x over every "
        f"binding compile, {reduced_ratio:.2f}x over those it reduced "
        f"({added * 1000:.2f} ms added to one, on average)"
    )
    for size in (1_000, 10_000):
        history = [generated(size)]
        ratio, _, added = timings(history, max(3, repeats // 3))
        before, after = fills(history, False)[0], fills(history, True)[0]
        print(f"  generated history of {size:,} messages, fill before: {describe(before)}")
        print(
            f"  {'':>34} after:  {describe(after)} | time with the step / without "
            f"{ratio:.2f}x ({added * 1000:.2f} ms added)"
        )


if __name__ == "__main__":
    run()
