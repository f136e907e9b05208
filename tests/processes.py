"""`ctxc serve` as a real process of its own, for the tests that need one (a CLI start, a
restart, SIGKILL, several replicas)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx


def ctxc_env(**settings: str) -> dict[str, str]:
    """This process's environment without its ``CTXC_*`` variables, with ``settings``; one
    server worker unless they say otherwise (the default, one per core, is tested apart)."""
    plain = {k: v for k, v in os.environ.items() if not k.startswith("CTXC_")}
    return plain | {"CTXC_WORKERS": "1"} | settings


def ctxc_command(*args: str) -> list[str]:
    """The `ctxc` command line: the environment's `ctxc` script (what `make serve` runs), or
    this interpreter's `-m app.cli` where there is none."""
    script = Path(sys.executable).parent / "ctxc"
    return [str(script), *args] if script.exists() else [sys.executable, "-m", "app.cli", *args]


def ready(url: str) -> bool:
    """Whether the server at ``url`` answers ``/readyz`` with 200."""
    try:
        return httpx.get(f"{url}/readyz", timeout=2).status_code == 200
    except httpx.TransportError:
        return False


def wait_ready(
    url: str, process: subprocess.Popen[Any], timeout: float = 60, log: Callable[[], str] = str
) -> None:
    """Wait until the server ``process`` serves ``url``; fail (with ``log()``) if it exits or
    takes longer than ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not ready(url):
        assert process.poll() is None, f"ctxc serve exited: {log()}"
        assert time.monotonic() < deadline, f"ctxc serve did not become ready: {log()}"
        time.sleep(0.05)


def stop(process: subprocess.Popen[Any]) -> None:
    """Stop ``process`` as a supervisor would (SIGTERM, then SIGKILL after 30 s)."""
    if process.poll() is not None:
        return
    process.terminate()
    try:
        process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=30)


@contextmanager
def serving(
    command: Sequence[str], url: str, log: Callable[[], str] = str, **popen: Any
) -> Iterator[subprocess.Popen[Any]]:
    """``command`` (a `ctxc serve`) started with ``popen``'s arguments, yielded once it serves
    ``url``, stopped afterwards."""
    process = subprocess.Popen(command, **popen)
    try:
        wait_ready(url, process, log=log)
        yield process
    finally:
        stop(process)


@contextmanager
def replica(database_url: str, port: int) -> Iterator[str]:
    """`ctxc serve` in a process of its own on ``database_url`` and ``port``, in keys mode:
    its URL."""
    url = f"http://127.0.0.1:{port}"
    env = ctxc_env(CTXC_DATABASE_URL=database_url, CTXC_AUTH="keys", CTXC_LOG_LEVEL="warning")
    with serving(
        ctxc_command("serve", "--port", str(port)), url, env=env, stdout=subprocess.DEVNULL
    ):
        yield url
