"""The Python client page's example, run as written against a live server on each
database (its URL pointed at the server, its key from `CTXC_API_KEY`, as the example reads it)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from tests.client.conftest import fresh_key
from tests.conftest import Api

PAGE = Path(__file__).resolve().parents[2] / "docs" / "python-client.md"
URL = "http://127.0.0.1:8080"


def example() -> str:
    """The python block of the Python client page."""
    [block] = re.findall(r"^```python\n(.*?)^```", PAGE.read_text(), re.M | re.S)
    assert URL in block
    return str(block)


def test_the_python_client_example_runs(api: Api, tmp_path: Path) -> None:
    env = {**os.environ, "CTXC_API_KEY": fresh_key(api)}
    code = example().replace(URL, api.url)
    done = subprocess.run(
        [sys.executable, "-c", code],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    compiled, summarised, event = done.stdout.splitlines()
    assert re.fullmatch(r"\d+ tokens in \d+ messages", compiled), compiled
    assert re.fullmatch(r"summarised seqs \d+ to \d+", summarised), summarised
    assert re.fullmatch(r"\d+ compaction compacted", event), event
