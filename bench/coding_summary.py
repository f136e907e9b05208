"""What the default ledger summary keeps of a real coding session's work.

`python -m bench.coding_summary`: each coding transcript the project has (beside the repository,
``shared/transcripts``: OpenHands, SWE-agent, Claude Code) is compacted as ``POST /compact`` with
kind ``full`` and the default policy plans it, and the part taken is summarised by the ledger at
the default summary budget (``CompactionPolicy.summary_tokens``). Printed per transcript: the file
paths its tool calls named that the summary keeps, the tool calls (distinct tool and main
argument) it keeps on one line, and stale values (a file's line showing an action older than
its latest). ``measure`` is what tests/unit/test_coding_summary.py asserts.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from app.adapters.tokenizers import load_counter
from app.domain.compaction.planning import CompactionPolicy, plan_full
from app.domain.compilers.base import Item
from app.domain.formats.anthropic import from_anthropic
from app.domain.formats.openai import from_openai
from app.domain.messages import DEFAULT_SECTION, Message, ToolCallPart
from app.domain.summaries.ledger import summarize_ledger
from app.domain.summaries.references import find_references
from app.domain.summaries.work import read_call
from app.domain.tokens import count_message

TRANSCRIPTS = Path(__file__).resolve().parents[2] / "shared" / "transcripts"
CODING = (
    "openai/openhands-ponylang__ponyc-4588.json",
    "openai/sweagent-fc-ab7432-marshmallow-code__marshmallow-1867.json",
    "openai/sweagent-fc-c9dc26-function_calling_simple.json",
    "openai/sweagent-text-pydicom__pydicom-1458.json",
    "openai/peerreq-openai-subagent-telemetry.json",
    "anthropic/claudecode-python-to-rust-port.json",
    "anthropic/claudecode-stop-hook-reflection-first-stop.json",
)
ENCODING = "o200k_base"


@dataclass(frozen=True)
class Coverage:
    """One transcript's figures: messages taken, paths and calls kept of those named, stale."""

    name: str
    taken: int
    paths: int
    paths_kept: int
    calls: int
    calls_kept: int
    stale: int
    tokens: int


def load(path: str) -> list[Message]:
    document = json.loads((TRANSCRIPTS / path).read_text(encoding="utf-8"))
    if path.startswith("anthropic/"):
        return from_anthropic(document["messages"], document.get("system"))
    return from_openai(document["messages"])


def taken_part(messages: Sequence[Message]) -> tuple[list[Message], list[int]]:
    """The messages a default full compaction takes, and their seqs."""
    encoder = load_counter().encoder(ENCODING)
    items = [
        Item(n + 1, DEFAULT_SECTION, m, count_message(m, encoder)) for n, m in enumerate(messages)
    ]
    plan = plan_full(items, CompactionPolicy())
    if plan is None:
        return [], []
    return [i.message for i in plan.taken], [i.seq for i in plan.taken]


def named(messages: Sequence[Message]) -> tuple[dict[str, None], dict[tuple[str, str], str]]:
    """The file paths the tool calls name (file arguments, paths in commands) and the distinct
    calls (tool, main argument) with the file they touched last ("" when none)."""
    paths: dict[str, None] = {}
    calls: dict[tuple[str, str], str] = {}
    for part in (p for m in messages for p in m.content if isinstance(p, ToolCallPart)):
        call = read_call(part)
        found = list(call.paths)
        if call.slot.startswith("command:"):
            found += find_references([call.head[2:]]).paths
        paths.update(dict.fromkeys(found))
        main = call.paths[0] if call.paths else call.head
        calls[(part.name, main)] = call.action if call.paths else ""
    return paths, calls


def measure(path: str, budget: int | None = None) -> Coverage:
    messages = load(path)
    taken, seqs = taken_part(messages)
    count = load_counter().encoder(ENCODING).count
    budget = CompactionPolicy().summary_tokens if budget is None else budget
    text = summarize_ledger(taken, budget, count, seqs).text if taken else ""
    lines = text.splitlines()
    paths, calls = named(taken)
    kept_paths = sum(any(p in line for line in lines) for p in paths)
    kept_calls = sum(any(t in line and a in line for line in lines) for t, a in calls)
    latest = _latest_actions(taken)
    stale = sum(
        1
        for line in lines
        for p, action in latest.items()
        if line.startswith(f"{p}: ") and not line.startswith(f"{p}: {action} ->")
    )
    return Coverage(
        path, len(taken), len(paths), kept_paths, len(calls), kept_calls, stale, count(text)
    )


def _latest_actions(messages: Sequence[Message]) -> dict[str, str]:
    latest: dict[str, str] = {}
    for part in (p for m in messages for p in m.content if isinstance(p, ToolCallPart)):
        call = read_call(part)
        for p in call.paths:
            latest[p] = call.action
    return latest


def run() -> None:
    """Print, per real coding transcript, what the default ledger summary keeps of it."""
    if not TRANSCRIPTS.is_dir():
        print(f"bench.coding_summary: no transcripts at {TRANSCRIPTS}")
        return
    print(f"{'transcript':58} {'taken':>5} {'paths kept':>11} {'calls kept':>11} stale tokens")
    for path in CODING:
        c = measure(path)
        print(
            f"{path:58} {c.taken:5} {c.paths_kept:5}/{c.paths:<5} {c.calls_kept:5}/{c.calls:<5}"
            f" {c.stale:5} {c.tokens:6}"
        )


if __name__ == "__main__":
    run()
