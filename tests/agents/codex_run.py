"""Codex CLI through a live ctxc, run inside a loopback-only network namespace; prints a JSON
report (``python -m tests.agents.codex_run <codex> <workdir>``, run by tests/agents/test_codex.py
under ``unshare -n``).

Inside: the loopback up; the local Responses stand-in (tests/upstreams.py) scripted as the
model of a long task (``TOOL_TURNS`` ``exec_command`` calls, each reading a ~20 KB file, one
"prompt too long" on the way, then the answer); ``ctxc serve`` on port 8080 (the recipe's) on
a new SQLite file, default settings; Codex CLI's ``config.toml`` copied from
docs/recipes/codex-config.toml as a user writes it, the window in ``CTXC_CONTEXT_WINDOW``; then
``codex exec`` with the task. The report says what Codex did (exit code, its rollout's items),
what the stand-in received (each request's input, counts and the rules it breaks) and what ctxc
stored (sessions, forks, compactions, messages live and archived).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx

from app.adapters.tokenizers import load_encoding
from app.domain.validity.responses_rules import responses_problems
from tests.processes import ctxc_command, ctxc_env, stop, wait_ready
from tests.upstream_wires import Error, Text, ToolCall, dumps
from tests.upstreams import Upstream

ROOT = Path(__file__).resolve().parents[2]
RECIPE = ROOT / "docs" / "recipes" / "codex-config.toml"
CTXC = "http://127.0.0.1:8080"  # the recipe's base URL
SESSION = "my-project"  # the recipe's session
KEY = "sk-codex-local"
WINDOW = 24_000
TOOL_TURNS = 16
OVERFLOW_AT = 9  # the request the stand-in refuses once as too long
TASK = "Summarise the incident notes in notes/ into one paragraph: read every part."
FILE_BYTES = 20_000


def script(upstream: Upstream) -> None:
    """The model's turns: read each part, one "prompt too long" midway, then answer."""
    steps: list[Any] = []
    for n in range(1, TOOL_TURNS + 1):
        if n == OVERFLOW_AT:
            steps.append(Error("overflow", provider="responses"))
        steps.append(
            ToolCall("exec_command", {"cmd": f"cat notes/part_{n:02d}.txt"}, provider="responses")
        )
    steps.append(Text("The incident notes say the cache was cold.", provider="responses"))
    upstream.script.extend(steps)


def workdir(path: Path) -> None:
    notes = path / "notes"
    notes.mkdir(parents=True)
    for n in range(1, TOOL_TURNS + 1):
        line = (
            f"part {n}: at 10:{n:02d} the on-call engineer looked at shard {n} and wrote it down.\n"
        )
        text = (line * (FILE_BYTES // len(line) + 1))[:FILE_BYTES]
        (notes / f"part_{n:02d}.txt").write_text(text)


def serve(home: Path, upstream: Upstream) -> subprocess.Popen[bytes]:
    env = ctxc_env(
        CTXC_DATABASE_URL=f"sqlite+aiosqlite:///{home / 'ctxc.db'}",
        CTXC_OPENAI_UPSTREAM=upstream.openai_base,
    )
    subprocess.run(ctxc_command("migrate"), env=env, check=True, capture_output=True)
    log = (home / "ctxc.log").open("wb")
    process = subprocess.Popen(
        ctxc_command("serve", "--port", "8080"), env=env, stdout=log, stderr=subprocess.STDOUT
    )
    wait_ready(CTXC, process, log=lambda: (home / "ctxc.log").read_text()[-4000:])
    return process


def run_codex(codex: str, home: Path, work: Path) -> subprocess.CompletedProcess[str]:
    codex_home = home / "codex"
    codex_home.mkdir()
    shutil.copy(RECIPE, codex_home / "config.toml")  # as written
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(home),
        "CODEX_HOME": str(codex_home),
        "OPENAI_API_KEY": KEY,
        "CTXC_CONTEXT_WINDOW": str(WINDOW),
    }
    command = [codex, "exec", "--skip-git-repo-check", "-s", "danger-full-access", TASK]
    return subprocess.run(
        command,
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        stdin=subprocess.DEVNULL,
    )


def rollout(home: Path) -> list[dict[str, Any]]:
    """The items Codex recorded of its conversation."""
    items = []
    for path in sorted((home / "codex" / "sessions").rglob("rollout-*.jsonl")):
        for line in path.read_text().splitlines():
            record = json.loads(line)
            if record.get("type") == "response_item":
                items.append(record["payload"])
    return items


def received(upstream: Upstream) -> list[dict[str, Any]]:
    """What the stand-in got: per request, its input, its count, the rules it breaks."""
    encoding = load_encoding("o200k_base")
    out = []
    for seen in upstream.requests:
        body = seen.body
        prompt = {k: body[k] for k in ("tools", "instructions", "input") if k in body}
        given = body.get("input")
        items: list[Any] = given if isinstance(given, list) else []
        out.append(
            {
                "path": seen.path,
                "headers": seen.headers,
                "tokens": len(encoding.encode_ordinary(dumps(prompt))),
                "problems": responses_problems(body.get("instructions"), items),
                "input": items,
                "rest": {k: v for k, v in body.items() if k not in ("input", "tools")},
            }
        )
    return out


def stored() -> dict[str, Any]:
    """ctxc's sessions, and the recipe's session's compactions and messages (live and
    archived)."""
    with httpx.Client(base_url=CTXC, timeout=60) as c:
        sessions = [s["id"] for s in c.get("/v1/sessions", params={"limit": 500}).json()["items"]]
        path = f"/v1/sessions/{SESSION}"
        live = c.get(f"{path}/messages", params={"limit": 1000}).json()["items"]
        compactions = c.get(f"{path}/compactions").json()["items"]
        archived = []
        for record in compactions:
            archived += c.get(f"{path}/compactions/{record['id']}").json()["archived"]
    return {"sessions": sessions, "live": live, "compactions": compactions, "archived": archived}


def main(codex: str, base: str) -> None:
    home = Path(base)
    subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
    work = home / "work"
    workdir(work)
    with Upstream(window=WINDOW, api_key=KEY) as upstream:
        script(upstream)
        process = serve(home, upstream)
        try:
            done = run_codex(codex, home, work)
            report = {
                "exit": done.returncode,
                "stdout": done.stdout[-4000:],
                "stderr": done.stderr[-4000:],
                "rollout": rollout(home),
                "received": received(upstream),
                "stored": stored(),
                "window": WINDOW,
                "task": TASK,
                "tool_turns": TOOL_TURNS,
            }
        finally:
            stop(process)
    print(json.dumps(report))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
