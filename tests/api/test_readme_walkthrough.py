"""The docs' walk-through and the README's first compile, run as written against `ctxc serve` on
each database.

The shell blocks of a section are read from its page at test time and run with bash,
its `API=` pointed at a server started as `make serve` starts one (`ctxc migrate`, then
`ctxc serve`, local mode). Every `curl` of it goes through a wrapper that fails on a 4xx or 5xx
(with the answer shown) and records each answer; then every answer the block shows in a
`# -> ...` comment is compared with what the server answered (`...` stands for anything).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import DATABASES, free_port, fresh_database
from tests.processes import ctxc_command, ctxc_env, serving

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
WALKTHROUGH = ROOT / "docs" / "walkthrough.md"
BIN = Path(sys.executable).parent
ANY = "..."

# Defined before the block: `set -e` with a `curl` that fails on any 4xx/5xx (showing the answer)
# and records each call's status, method, URL and body; `__expect K` notes which call the K-th
# `# ->` comment describes (the last one made).
PRELUDE = r"""
set -euo pipefail
shopt -s inherit_errexit
curl() {
  local n rc=0
  n=$(( $(<"$WALK_LOG/count") + 1 ))
  echo "$n" > "$WALK_LOG/count"
  command curl --fail-with-body --show-error -o "$WALK_LOG/$n.body" \
    -w '%{http_code} %{method} %{url_effective}' "$@" > "$WALK_LOG/$n.call" || rc=$?
  cat "$WALK_LOG/$n.body"
  if [[ $rc == 28 && " $* " == *" --max-time "* && $(<"$WALK_LOG/$n.call") == 200\ * ]]; then
    rc=0  # a stream ended by its own --max-time
  fi
  if (( rc )); then
    printf 'walk-through: curl %s\nfailed (exit %s): %s\n%s\n' "$*" "$rc" \
      "$(<"$WALK_LOG/$n.call")" "$(<"$WALK_LOG/$n.body")" >&2
  fi
  return "$rc"
}
__expect() { echo "$1 $(<"$WALK_LOG/count")" >> "$WALK_LOG/expect"; }
"""


@dataclass(frozen=True)
class Call:
    """One curl call of the walk-through and its answer."""

    status: int
    method: str
    url: str
    body: str

    def json(self) -> Any:
        return json.loads(self.body)


@dataclass(frozen=True)
class Expected:
    """A `# -> ...` comment: the answer shown after a call, with its line in its page."""

    line: int
    text: str


def walkthrough(page: Path = WALKTHROUGH, heading: str = "# Walk-through") -> list[tuple[int, str]]:
    """The shell code of the section under ``heading`` of ``page`` (its fenced blocks), line by
    line with each line's number in the page."""
    text = "\n" + page.read_text()
    start = text.index(f"\n{heading}\n") + 1
    end = text.find("\n## ", start)
    section = text[start : end if end >= 0 else len(text)]
    first = text.count("\n", 0, start)
    lines = []
    for block in re.finditer(r"^```(?:sh|bash|shell)\n(.*?)^```", section, re.M | re.S):
        at = first + section.count("\n", 0, block.start(1))
        lines += list(enumerate(block.group(1).splitlines(), at))
    assert lines, f"{heading!r} of {page.name} has no sh block"
    return lines


def instrument(block: list[tuple[int, str]], api: str) -> tuple[str, list[Expected]]:
    """The block with `API=` pointed at ``api`` and an `__expect K` before each `# ->` comment,
    and those comments."""
    out: list[str] = []
    expected: list[Expected] = []
    n = 0
    while n < len(block):
        at, line = block[n]
        if line.startswith("API="):
            line = f"API={api}"
        if line.startswith("# -> "):
            text = [line.removeprefix("# -> ")]
            out += [f"__expect {len(expected)}", line]
            while n + 1 < len(block) and re.match(r"#\s\s", block[n + 1][1]):
                n += 1
                text.append(block[n][1][1:].strip())
                out.append(block[n][1])
            expected.append(Expected(at, "\n".join(text)))
        else:
            out.append(line)
        n += 1
    assert f"API={api}" in out, "the walk-through sets no API=..."
    return "\n".join(out) + "\n", expected


def pseudo_json(text: str) -> Any:
    """A `# ->` JSON with `...` in it: `{...}`, `[...]` and a bare `...` value are anything; a
    `...` among a list's items, any further items; among an object's keys, any other keys."""
    text = re.sub(r"\{\s*\.\.\.\s*\}|\[\s*\.\.\.\s*\]", '"..."', text)
    text = re.sub(r"\{\s*\.\.\.\s*,", "{", text)
    text = re.sub(r",\s*\.\.\.\s*\}", "}", text)
    text = re.sub(r'(?<!")\.\.\.(?!")', '"..."', text)
    return json.loads(text)


def mismatches(expected: Any, actual: Any, path: str = "") -> list[str]:
    """Where ``actual`` differs from ``expected`` (objects: the keys shown; `"..."`: anything)."""
    if expected == ANY:
        return []
    if isinstance(expected, dict):
        if not isinstance(actual, dict):
            return [f"{path or '.'}: expected an object, got {actual!r}"]
        return [
            m
            for key, value in expected.items()
            for m in (
                mismatches(value, actual[key], f"{path}.{key}")
                if key in actual
                else [f"{path}.{key}: missing"]
            )
        ]
    if isinstance(expected, list):
        open_ended = bool(expected) and expected[-1] == ANY
        items = expected[:-1] if open_ended else expected
        if not isinstance(actual, list) or not (
            len(actual) >= len(items) if open_ended else len(actual) == len(items)
        ):
            return [f"{path}: expected {expected!r}, got {actual!r}"]
        return [m for i, e in enumerate(items) for m in mismatches(e, actual[i], f"{path}[{i}]")]
    if expected != actual or isinstance(expected, bool) != isinstance(actual, bool):
        return [f"{path or '.'}: expected {expected!r}, got {actual!r}"]
    return []


def sse(body: str, data: Any = json.loads) -> list[dict[str, Any]]:
    """The messages of an event stream, as {"id", "event", "data"} (comments skipped), with
    ``data`` read by ``data``."""
    out = []
    for chunk in body.replace("\r\n", "\n").split("\n\n"):
        fields: dict[str, Any] = {}
        for line in chunk.splitlines():
            if line and not line.startswith(":"):
                name, _, value = line.partition(":")
                fields[name] = value.removeprefix(" ")
        if "data" in fields:
            fields["data"] = data(fields["data"])
            out.append(fields)
    return out


def check(expected: Expected, call: Call) -> list[str]:
    """What the answer of ``call`` contradicts in the comment ``expected``."""
    where = f"line {expected.line} ({call.method} {call.url})"
    if expected.text.startswith(("{", "[")):
        return [f"{where}: {m}" for m in mismatches(pseudo_json(expected.text), call.json())]
    shown = sse(expected.text + "\n", pseudo_json)
    assert len(shown) == 1, f"{where}: a `# ->` is JSON or one SSE message: {expected.text}"
    want = shown[0]
    for got in sse(call.body):
        if not mismatches(want, got):
            return []
    return [f"{where}: no event like {want} in {sse(call.body)}"]


@contextmanager
def served(database_url: str, cwd: Path) -> Iterator[tuple[str, dict[str, str]]]:
    """`ctxc migrate` then `ctxc serve` on ``database_url`` (as `make serve`), local mode."""
    port = free_port()
    env = ctxc_env(CTXC_DATABASE_URL=database_url, CTXC_PORT=str(port))
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"
    migrated = subprocess.run(
        ctxc_command("migrate"), env=env, cwd=cwd, capture_output=True, text=True, timeout=60
    )
    assert migrated.returncode == 0, migrated.stderr
    base = f"http://127.0.0.1:{port}"
    with (
        (cwd / "serve.log").open("w") as log,
        serving(
            ctxc_command("serve"),
            base,
            log=(cwd / "serve.log").read_text,
            env=env,
            cwd=cwd,
            stdout=log,
            stderr=log,
        ),
    ):
        yield base, env


def run_walkthrough(
    api: str, env: dict[str, str], cwd: Path, block: list[tuple[int, str]] | None = None
) -> tuple[list[Call], list[str]]:
    """Run the walk-through's block (or ``block``) against ``api``: its calls in order, and the
    comments it broke."""
    script, expected = instrument(walkthrough() if block is None else block, api)
    logs = cwd / "calls"
    logs.mkdir()
    (logs / "count").write_text("0\n")
    (logs / "expect").write_text("")
    (cwd / "walkthrough.sh").write_text(PRELUDE + script)
    bash = shutil.which("bash") or "bash"
    result = subprocess.run(
        [bash, "walkthrough.sh"],
        env=env | {"WALK_LOG": str(logs)},
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, f"the walk-through failed:\n{result.stderr[-4000:]}"
    calls = []
    for n in range(1, int((logs / "count").read_text()) + 1):
        status, method, url = (logs / f"{n}.call").read_text().split(" ", 2)
        calls.append(Call(int(status), method, url, (logs / f"{n}.body").read_text()))
    after = dict(map(int, line.split()) for line in (logs / "expect").read_text().splitlines())
    assert sorted(after) == list(range(len(expected))), "a `# ->` comment was not reached"
    assert all(after.values()), "a `# ->` comment comes before any call"
    broken = [m for k, e in enumerate(expected) for m in check(e, calls[after[k] - 1])]
    return calls, broken


def answers(calls: list[Call], method: str, path: str) -> list[Any]:
    """The JSON answers of the calls of ``method`` to a URL ending in ``path``."""
    found = [c.json() for c in calls if c.method == method and c.url.split("?")[0].endswith(path)]
    assert found, f"the walk-through makes no {method} .../{path}"
    return found


@pytest.mark.parametrize("kind", DATABASES)
def test_the_readme_walkthrough_runs_as_written(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    with served(fresh_database(kind, tmp_path, request), tmp_path) as (api, env):
        calls, broken = run_walkthrough(api, env, tmp_path)
    assert all(200 <= c.status < 300 for c in calls)

    # No compile sends an answer without its question: after the system prompt, a user turn.
    for answer in answers(calls, "POST", "/compile"):
        roles = [m["role"] for m in answer["messages"] if m["role"] not in ("system", "developer")]
        assert roles[:1] == ["user"], answer["messages"]

    # Every answer the walk-through shows is the server's.
    assert not broken, "\n".join(broken)

    # The compaction is written, listed, and its event is replayed.
    (compaction,) = answers(calls, "POST", "/compact")
    assert [c.status for c in calls if c.url.endswith("/compact")] == [201]
    assert compaction["tokens_removed"] > 0 < compaction["seq_to"]
    listed = {c["id"] for a in answers(calls, "GET", "/compactions") for c in a["items"]}
    assert compaction["id"] in listed
    streams = [c for c in calls if c.method == "GET" and "/events" in c.url]
    assert streams, "the walk-through reads no event stream"
    replayed = {e["data"].get("compaction_id") for c in streams for e in sse(c.body)}
    assert compaction["id"] in replayed


@pytest.mark.parametrize("kind", DATABASES)
def test_the_readme_first_compile_runs_as_written(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    block = walkthrough(README, "## A first compile")
    with served(fresh_database(kind, tmp_path, request), tmp_path) as (api, env):
        calls, broken = run_walkthrough(api, env, tmp_path, block)
    assert not broken, "\n".join(broken)
    [compiled] = answers(calls, "POST", "/compile")
    assert [m["role"] for m in compiled["messages"]] == ["system", "user"]
