"""Running a scenario in a loopback-only network namespace of its own (see __init__.py)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from tests.agents.install import unavailable

REPO = Path(__file__).resolve().parents[2]
# Time the driver may take besides the agent's own timeout: starting ctxc, collecting.
DRIVER_SLACK = 180


@dataclass
class Scenario:
    """One agent run. In ``command``, ``env``, ``files`` and ``ctxc_settings`` values, ``{ctxc}`` is
    ctxc's URL (through the tap), ``{standin}`` the stand-in's, ``{workdir}`` the agent's working
    directory, ``{home}`` its HOME, ``{root}`` the scenario's directory."""

    standin: str  # "module:factory", called as factory(standin_options, workdir)
    command: list[str]
    env: dict[str, str] = field(default_factory=dict)
    ctxc_settings: dict[str, str] = field(default_factory=dict)  # e.g. CTXC_ANTHROPIC_UPSTREAM
    standin_options: dict[str, Any] = field(default_factory=dict)
    files: dict[str, str] = field(default_factory=dict)  # the working directory's files
    timeout: float = 600  # seconds the agent may run


@dataclass
class Report:
    """What a scenario's run gave (see scenario.py): plain JSON, read by tests/agents/checks.py."""

    data: dict[str, Any]

    def __getitem__(self, key: str) -> Any:
        return self.data[key]

    def brief(self) -> str:
        """The agent's exit and the tail of its output, for an assertion's message."""
        d = self.data
        return (
            f"exit {d['exit_code']} (timed out: {d['timed_out']})\nstdout: "
            f"{d['stdout'][-3000:]}\nstderr: {d['stderr'][-3000:]}"
        )


def unshare() -> list[str]:
    """The command prefix that makes a network namespace: ``unshare -n`` as root, else in a user
    namespace of its own (``-r``, where the kernel allows unprivileged ones). Skip (fail in CI)
    when neither works."""
    if shutil.which("unshare") is None or shutil.which("ip") is None:
        unavailable("unshare and ip (util-linux, iproute2) are needed for the agent tests")
    prefix = ["unshare", "-n"] if os.geteuid() == 0 else ["unshare", "-r", "-n"]
    probe = subprocess.run([*prefix, "--", "true"], capture_output=True, timeout=30)
    if probe.returncode != 0:
        unavailable(f"cannot make a network namespace ({' '.join(prefix)}): {probe.stderr!r}")
    return [*prefix, "--kill-child", "--"]


def run(scenario: Scenario, root: Path) -> Report:
    """Run ``scenario`` under ``unshare -n`` with ``root`` as its directory; its report."""
    prefix = unshare()
    (root / "work").mkdir(parents=True, exist_ok=True)
    spec, out = root / "scenario.json", root / "report.json"
    spec.write_text(json.dumps({**asdict(scenario), "root": str(root)}))
    command = [
        *prefix,
        sys.executable,
        "-m",
        "tests.agents.scenario",
        str(spec),
        str(out),
    ]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    try:
        done = subprocess.run(
            command,
            cwd=REPO,
            env=env,
            capture_output=True,
            text=True,
            timeout=scenario.timeout + DRIVER_SLACK,
        )
    except subprocess.TimeoutExpired as exc:
        raise AssertionError(f"the scenario driver hung: {exc.stderr!r}") from None
    assert done.returncode == 0 and out.exists(), (
        f"the scenario driver failed ({done.returncode}):\n{done.stderr[-5000:]}"
    )
    return Report(json.loads(out.read_text()))
