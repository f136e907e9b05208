"""A generated coding-agent session in Anthropic's shape, one model call per turn.

Deterministic for a seed: a user asks for a change, the assistant works through 3 to 9 tool
calls (`read_file` of 60-500 lines, `bash` test runs and logs of 20-300 lines, `edit` with
old and new snippets, `grep`), some of which fail (a traceback, an edit whose text was not
found), and then answers; then the next ask. Between model calls the simulated clock moves on
by what a tool and the model take (8-45 s), and between tasks now and then by a user who is away
(6-20 minutes: longer than a prompt cache's five-minute life).
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

WORDS = [
    "def",
    "return",
    "self",
    "value",
    "import",
    "class",
    "for",
    "in",
    "if",
    "else",
    "await",
    "async",
    "None",
    "True",
    "result",
    "session",
    "message",
    "tokens",
    "request",
    "config",
    "path",
    "items",
    "count",
    "error",
    "raise",
    "yield",
    "with",
    "assert",
    "test",
    "fixture",
    "client",
    "response",
    "status",
    "json",
    "data",
    "cache",
    "prefix",
    "summary",
]
PATHS = [
    f"src/app/{name}.py"
    for name in (
        "service",
        "models",
        "cli",
        "routes",
        "storage",
        "cache",
        "tokens",
        "compiler",
        "events",
    )
] + [f"tests/test_{name}.py" for name in ("service", "routes", "cache", "compiler")]
ASKS = (
    "The retry logic in the client gives up too early; make it back off properly.",
    "Add a --dry-run flag to the export command and cover it with a test.",
    "test_compile_budget fails on CI since yesterday's change; find out why and fix it.",
    "Rename the token counter's encoder cache and keep the old name as an alias.",
    "The events stream drops the last event on shutdown. Reproduce it and fix it.",
    "Refactor storage so that every query takes the tenant explicitly.",
)
SYSTEM = "\n".join(
    [
        "You are a coding agent working in the user's repository. Use the tools to read files,",
        "run commands and edit code. Keep changes small, run the tests after each change, and",
        "never push. Tools: read_file(path), bash(command), edit(path, old, new), grep(pattern).",
    ]
    + [f"Rule {n}: " + " ".join(random.Random(n).choices(WORDS, k=40)) for n in range(60)]
)


@dataclass(frozen=True)
class Turn:
    """One model call: the user message appended before it (an ask, or tool results), the
    assistant message it answers, and the simulated seconds since the previous call."""

    incoming: dict[str, Any]
    reply: dict[str, Any]
    gap_s: float
    task_start: bool


def _lines(rng: random.Random, low: int, high: int, prefix: str = "") -> str:
    return "\n".join(
        f"{prefix}{n:4} " + " ".join(rng.choices(WORDS, k=rng.randint(3, 12)))
        for n in range(rng.randint(low, high))
    )


def _tool(rng: random.Random, n: int) -> tuple[str, dict[str, Any], str, bool]:
    """A tool call's name, input, result text and whether it failed."""
    path = rng.choice(PATHS)
    kind = rng.choices(("read_file", "bash", "edit", "grep"), weights=(4, 3, 2, 1))[0]
    if kind == "read_file":
        return kind, {"path": path}, _lines(rng, 60, 500), False
    if kind == "bash":
        command = rng.choice(("pytest -q", "pytest -q -x tests", "ruff check .", "git diff"))
        if rng.random() < 0.15:
            trace = _lines(rng, 10, 40, '  File "src/app/cli.py", line ')
            return kind, {"command": command}, f"Traceback:\n{trace}\nImportError: {n}", True
        return kind, {"command": command}, _lines(rng, 20, 300), False
    if kind == "edit":
        edit = {"path": path, "old": _lines(rng, 3, 30), "new": _lines(rng, 3, 40)}
        if rng.random() < 0.1:
            return kind, edit, f"Error: the old text was not found in {path}", True
        return kind, edit, f"Edited {path}", False
    return kind, {"pattern": rng.choice(WORDS)}, _lines(rng, 5, 60, f"{path}:"), False


def _result(call_id: str, text: str, failed: bool) -> dict[str, Any]:
    block: dict[str, Any] = {"type": "tool_result", "tool_use_id": call_id, "content": text}
    if failed:
        block["is_error"] = True
    return {"role": "user", "content": [block]}


def coding_session(seed: int, turns: int) -> list[Turn]:
    """``turns`` model calls of a coding session (the last task may end early)."""
    rng = random.Random(seed)
    out: list[Turn] = []
    while len(out) < turns:
        incoming: dict[str, Any] = {"role": "user", "content": rng.choice(ASKS)}
        away = rng.random() < 0.15 and bool(out)
        gap = rng.uniform(360, 1_200) if away else rng.uniform(8, 45)
        for step in range(rng.randint(3, 9)):
            call_id = f"toolu_{len(out):04d}"
            name, args, text, failed = _tool(rng, len(out))
            thought = " ".join(rng.choices(WORDS, k=rng.randint(8, 40)))
            reply = {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": thought},
                    {"type": "tool_use", "id": call_id, "name": name, "input": args},
                ],
            }
            out.append(Turn(incoming, reply, gap, step == 0))
            incoming, gap = _result(call_id, text, failed), rng.uniform(8, 45)
        answer = " ".join(rng.choices(WORDS, k=rng.randint(30, 120)))
        out.append(Turn(incoming, {"role": "assistant", "content": answer}, gap, False))
    return out[:turns]
