"""Tool payload compaction: the share of tokens each step saves, alone and together, at default
parameters, and the compile time it adds.

Histories: generated coding-agent sessions (files read again and again, some edited between
reads, large writes, long test logs, repeated status commands), and the real agent transcripts
of the shared corpus when it is there. Each is compiled in-process for gpt-4o with a context
window large enough that nothing is trimmed, so the figures are the steps' alone.
"""

from __future__ import annotations

import gc
import json
import random
import statistics
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from app.adapters.tokenizers import load_counter
from app.domain.compilers.base import Item, Snapshot
from app.domain.compilers.registry import build
from app.domain.compilers.spec import parse_spec
from app.domain.compiling import Target, compile_request
from app.domain.formats.convert import parse_messages
from app.domain.messages import Message
from app.domain.providers import PROFILES
from app.domain.tokens import count_message
from app.domain.tool_payloads.compaction import PayloadRules, compact_tool_payloads, dedupe_results

TRANSCRIPTS = Path(__file__).resolve().parents[2] / "shared" / "transcripts"
PROFILE = PROFILES["gpt-4o"]
WINDOW = 100_000_000
REPEATS = 5
# "Dedupe alone": thresholds that omit nothing, so only identical results are replaced.
NOTHING = 2**62
SPECS: dict[str, list[Any]] = {
    "tool_compaction": ["tool_compaction"],
    "dedupe alone": [
        {
            "name": "tool_compaction",
            "params": {
                "inputTrimBytes": NOTHING,
                "outputTrimBytes": NOTHING,
                "dedupeIdenticalResults": True,
            },
        }
    ],
    "compact_tool_results": ["compact_tool_results"],
    "by path": [
        {
            "name": "tool_compaction",
            "params": {"toolIdentifierFields": {"read_file": ["path"], "write_file": ["path"]}},
        }
    ],
    "all together": [
        {"name": "tool_compaction", "params": {"dedupeIdenticalResults": True}},
        "compact_tool_results",
    ],
}
WORDS = ("def", "return", "self", "value", "import", "class", "for", "in", "if", "else")


def _source(rng: random.Random, path: str, version: int) -> str:
    lines = [f"# {path}, version {version}"]
    for n in range(rng.randint(80, 400)):
        body = " ".join(rng.choices(WORDS, k=rng.randint(3, 12)))
        lines.append(f"    {body}  # line {n}")
    return "\n".join(lines)


def _log(rng: random.Random, run: int) -> str:
    lines = [f"test_{n} PASSED ({rng.randint(1, 900)} ms)" for n in range(rng.randint(300, 1500))]
    return "\n".join([f"== run {run} ==", *lines, "== 1 failed =="])


def _call(call_id: str, name: str, args: dict[str, Any]) -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": call_id,
                "type": "function",
                "function": {"name": name, "arguments": json.dumps(args)},
            }
        ],
    }


def agent_session(seed: int, turns: int) -> list[dict[str, Any]]:
    """A coding agent's session: reads, edits, test runs and status checks on a few files."""
    rng = random.Random(seed)
    files = {f"src/module_{n}.py": 1 for n in range(6)}
    texts = {path: _source(rng, path, 1) for path in files}
    out: list[dict[str, Any]] = [{"role": "user", "content": "Make the test suite pass."}]
    for n in range(turns):
        path = rng.choice(list(files))
        kind = rng.choice(["read", "read", "write", "test", "status"])
        call_id = f"call_{n}"
        if kind == "read":
            out += [
                _call(call_id, "read_file", {"path": path}),
                {"role": "tool", "tool_call_id": call_id, "content": texts[path]},
            ]
        elif kind == "write":
            files[path] += 1
            texts[path] = _source(rng, path, files[path])
            done = {"role": "tool", "tool_call_id": call_id, "content": '{"status": "ok"}'}
            out += [_call(call_id, "write_file", {"path": path, "content": texts[path]}), done]
        elif kind == "test":
            out += [
                _call(call_id, "run_tests", {"args": "-q"}),
                {"role": "tool", "tool_call_id": call_id, "content": _log(rng, n)},
            ]
        else:
            status = "\n".join(f" M {p}" for p in sorted(files))
            out += [
                _call(call_id, "git_status", {}),
                {"role": "tool", "tool_call_id": call_id, "content": status},
            ]
        if rng.random() < 0.2:
            out.append({"role": "assistant", "content": "Looking at the failure next."})
    out.append({"role": "user", "content": "Where are we?"})
    return out


def histories() -> list[tuple[str, list[Message]]]:
    found = [
        (f"generated agent session, {n} tool calls", parse_messages("openai", agent_session(7, n)))
        for n in (50, 200)
    ]
    for path in sorted(TRANSCRIPTS.glob("*/*.json")):
        doc = json.loads(path.read_text())
        fmt = "anthropic" if path.parent.name == "anthropic" else "openai"
        found.append(
            (f"{fmt}/{path.stem}", parse_messages(fmt, doc["messages"], doc.get("system")))
        )
    return found


def _compile(messages: list[Message], decorators: list[Any]) -> tuple[int, float]:
    encoder = load_counter().encoder(PROFILE.encoding)

    def count(message: Message) -> int:
        return count_message(message, encoder)

    items = tuple(Item(n + 1, "messages", m, count(m)) for n, m in enumerate(messages))
    snapshot = Snapshot(
        items=items, tenant="bench", now=datetime.now(UTC), count=count, session_id="s"
    )
    compiler = build(parse_spec({"base": "all_sections", "decorators": decorators}))
    times = []
    for _ in range(REPEATS):
        start = time.perf_counter()
        output = compile_request(snapshot, compiler, Target(PROFILE, WINDOW))
        times.append(time.perf_counter() - start)
    return output.total, statistics.median(times)


def again() -> None:
    """The payload steps on a big history (tool_compaction's trimming, then dedupe): over freshly
    parsed messages, and again over the same parsed messages (a posted history the message cache
    holds), where what they worked out for each old payload (sizes, sha256, its compacted form)
    is remembered. Median of 5, CPU time of the thread."""
    raw = agent_session(11, 2_000)
    kept = parse_messages("openai", raw)
    tokens = sum(count_message(m, load_counter().encoder(PROFILE.encoding)) for m in kept)
    rules = PayloadRules()

    def steps(messages: list[Message]) -> float:
        gc.collect()  # the garbage of the parses before is not the steps' cost
        start = time.thread_time()  # CPU time of this thread: what the steps cost, load aside
        trimmed = compact_tool_payloads(messages, rules)
        dedupe_results(trimmed.messages, rules)
        return time.thread_time() - start

    fresh = [steps(parse_messages("openai", raw)) for _ in range(REPEATS)]
    steps(kept)
    same = [steps(kept) for _ in range(REPEATS)]
    print(
        f"tool payload compaction of {len(raw):,} messages ({tokens:,} tokens): trimming and "
        f"dedupe (CPU time), messages just parsed {1000 * statistics.median(fresh):7.1f} ms | "
        f"the same parsed messages again {1000 * statistics.median(same):7.1f} ms"
    )


def run() -> None:
    again()
    print(
        "tool payload compaction: tokens saved per step at default parameters (gpt-4o, "
        "nothing trimmed), and compile time added (median of 5, in-process)"
    )
    print(
        '"by path": tool_compaction with read_file and write_file grouped by their path '
        "argument (only the generated sessions have those tools)"
    )
    header = f"{'history':58} {'msgs':>5} {'tokens':>9} {'compile':>9}"
    print(header + "".join(f" {name:>22}" for name in SPECS))
    sums = {name: [0, 0] for name in SPECS}
    for name, messages in histories():
        total, took = _compile(messages, [])
        cells = []
        for step, decorators in SPECS.items():
            after, step_took = _compile(messages, decorators)
            sums[step][0] += total
            sums[step][1] += after
            share = 100 * (total - after) / total
            cells.append(f"{share:6.1f}% +{1000 * (step_took - took):7.1f} ms")
        head = f"{name[:58]:58} {len(messages):5} {total:9,} {1000 * took:6.1f} ms"
        print(head + "".join(f" {c:>22}" for c in cells))
    overall = "".join(
        f" {100 * (before - after) / before:21.1f}%" for before, after in sums.values()
    )
    print(f"{'all histories':58} {'':5} {sums['all together'][0]:9,} {'':9}{overall}")


if __name__ == "__main__":
    run()
