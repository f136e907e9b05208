"""The scenario driver, run inside the loopback-only network namespace by ``harness.run``:
``python -m tests.agents.scenario <scenario.json> <report.json>``.

It brings ``lo`` up, starts the stand-in, ``ctxc serve`` (migrated SQLite, default settings but
for the stand-in as its upstream) and the tap in front of it, runs the agent's command with its
own HOME and working directory, then writes the report: the agent's exit and output, what the
stand-in received, what the agent sent (the tap), and what ctxc stored (its HTTP API).
"""

from __future__ import annotations

import importlib
import json
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx

from tests.agents.tap import Tap
from tests.processes import ctxc_command, ctxc_env, serving

TAIL = 20_000  # characters of an output kept in the report
PAGE = 500


def main(scenario_path: str, report_path: str) -> None:
    scenario: dict[str, Any] = json.loads(Path(scenario_path).read_text())
    subprocess.run(["ip", "link", "set", "lo", "up"], check=True, timeout=30)
    links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True, timeout=30)
    root = Path(scenario["root"])
    workdir, home = root / "work", root / "home"
    home.mkdir(parents=True, exist_ok=True)
    module, _, attr = scenario["standin"].partition(":")
    factory = getattr(importlib.import_module(module), attr)
    report: dict[str, Any] = {"links": links.stdout}
    with factory(scenario["standin_options"], workdir) as standin:
        with ctxc(scenario, standin.url, root) as url, Tap(url, scenario["timeout"]) as tap:
            places = {
                "{ctxc}": tap.url,
                "{standin}": standin.url,
                "{workdir}": str(workdir),
                "{home}": str(home),
                "{root}": str(root),
            }
            for name, text in scenario["files"].items():
                (workdir / name).parent.mkdir(parents=True, exist_ok=True)
                (workdir / name).write_text(fill(text, places))
            report |= run_agent(scenario, places, workdir, home)
            report["sent"] = tap.report()
            report["stored"] = stored(url)
        report["received"] = standin.report()
    report["ctxc_log"] = (root / "ctxc.log").read_text(errors="replace")[-TAIL:]
    Path(report_path).write_text(json.dumps(report))


@contextmanager
def ctxc(scenario: dict[str, Any], upstream: str, root: Path) -> Iterator[str]:
    """`ctxc serve` on a fresh migrated SQLite file, its upstream setting at the stand-in."""
    port = free_port()
    settings = {
        key: value.replace("{standin}", upstream)
        for key, value in scenario["ctxc_settings"].items()
    }
    env = ctxc_env(CTXC_DATABASE_URL=f"sqlite+aiosqlite:///{root / 'ctxc.db'}", **settings)
    subprocess.run(ctxc_command("migrate"), env=env, check=True, capture_output=True, timeout=120)
    log = (root / "ctxc.log").open("w")
    command = ctxc_command("serve", "--port", str(port))
    url = f"http://127.0.0.1:{port}"
    with serving(
        command,
        url,
        lambda: (root / "ctxc.log").read_text(),
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    ):
        yield url


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def fill(text: str, places: dict[str, str]) -> str:
    for name, value in places.items():
        text = text.replace(name, value)
    return text


def run_agent(
    scenario: dict[str, Any], places: dict[str, str], workdir: Path, home: Path
) -> dict[str, Any]:
    """Run the agent's command, bounded by the scenario's timeout: its exit and output."""
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "LANG": "C.UTF-8",
        "HOME": str(home),
        "TMPDIR": str(home),
        "TERM": "dumb",
        "NO_COLOR": "1",
    }
    env |= {key: fill(value, places) for key, value in scenario["env"].items()}
    command = [fill(arg, places) for arg in scenario["command"]]
    process = subprocess.Popen(
        command,
        cwd=workdir,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    timed_out = False
    try:
        out, err = process.communicate(timeout=scenario["timeout"])
    except subprocess.TimeoutExpired:
        timed_out = True
        os.killpg(process.pid, signal.SIGKILL)
        out, err = process.communicate(timeout=30)
    return {
        "command": command,
        "exit_code": process.returncode,
        "timed_out": timed_out,
        "stdout": out.decode(errors="replace")[-TAIL:],
        "stderr": err.decode(errors="replace")[-TAIL:],
    }


def stored(url: str) -> list[dict[str, Any]]:
    """Every session ctxc holds, with its live messages and its compactions' archives."""
    with httpx.Client(base_url=url, timeout=60) as client:
        sessions = pages(client, "/v1/sessions", "after", lambda page: page["next_after"])
        for session in sessions:
            base = f"/v1/sessions/{session['id']}"
            session["messages"] = pages(
                client, f"{base}/messages", "after_seq", lambda page: page.get("next_after_seq")
            )
            compactions = get(client, f"{base}/compactions")["items"]
            session["compactions"] = [
                get(client, f"{base}/compactions/{c['id']}") for c in compactions
            ]
    return sessions


def pages(client: httpx.Client, path: str, cursor: str, following: Any) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    params: dict[str, Any] = {"limit": PAGE}
    while True:
        page = get(client, path, params)
        items += page["items"]
        after = following(page)
        if after is None:
            return items
        params[cursor] = after


def get(client: httpx.Client, path: str, params: dict[str, Any] | None = None) -> Any:
    answer = client.get(path, params=params)
    answer.raise_for_status()
    return answer.json()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
