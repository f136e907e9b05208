"""The agents' CLIs installed from npm, pinned, into a cache kept between runs.

Each package version gets a directory of its own, ``<cache>/<package>@<version>`` (the cache is
``$CTXC_AGENTS_CACHE``, else ``$XDG_CACHE_HOME/ctxc-agents``, else ``~/.cache/ctxc-agents``).
An install runs under an exclusive file lock (pytest-xdist workers may ask for the same CLI at
once) into a scratch directory renamed into place when npm succeeds, so a directory that exists
is a whole install.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

NPM_TIMEOUT = 600  # seconds an install may take


@dataclass(frozen=True)
class Cli:
    """An npm package pinned to a version, and the name of the command it installs."""

    package: str
    version: str
    command: str

    @property
    def spec(self) -> str:
        return f"{self.package}@{self.version}"


CLAUDE_CODE = Cli("@anthropic-ai/claude-code", "2.1.332", "claude")
CODEX = Cli("@openai/codex", "0.171.0", "codex")
GEMINI_CLI = Cli("@google/gemini-cli", "0.61.0", "gemini")


def cache_root() -> Path:
    """Where the installed CLIs are kept between runs."""
    if configured := os.environ.get("CTXC_AGENTS_CACHE"):
        return Path(configured)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "ctxc-agents"


def unavailable(reason: str) -> None:
    """A missing prerequisite: a failure in CI (the tests must run there), else a skip."""
    if os.environ.get("CI"):
        pytest.fail(f"{reason} (CI is set: the agent tests must run)")
    pytest.skip(reason)


def installed(cli: Cli) -> Path:
    """The path of ``cli``'s command, installed first when the cache does not hold it."""
    for tool in ("node", "npm"):
        if shutil.which(tool) is None:
            unavailable(f"{tool} is not installed: the agent tests need Node 20 and npm")
    root = cache_root()
    target = root / cli.spec.replace("/", "+")
    command = target / "node_modules" / ".bin" / cli.command
    root.mkdir(parents=True, exist_ok=True)
    with _locked(root / f"{target.name}.lock"):
        if not command.exists():
            _install(cli, target)
    return command


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    with path.open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _install(cli: Cli, target: Path) -> None:
    """``npm install`` into a scratch directory, renamed to ``target`` once it succeeded."""
    scratch = target.with_name(f".{target.name}.{uuid.uuid4().hex[:8]}")
    command = ["npm", "install", "--no-audit", "--no-fund", "--prefix", str(scratch), cli.spec]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=NPM_TIMEOUT)
    except subprocess.TimeoutExpired:
        shutil.rmtree(scratch, ignore_errors=True)
        pytest.fail(f"npm install {cli.spec} took more than {NPM_TIMEOUT} s")
    if done.returncode != 0:
        shutil.rmtree(scratch, ignore_errors=True)
        # A registry that cannot be reached outside CI is a skip; in CI, a failure.
        unavailable(f"npm install {cli.spec} failed ({done.returncode}): {done.stderr[-2000:]}")
    shutil.rmtree(target, ignore_errors=True)
    scratch.rename(target)
