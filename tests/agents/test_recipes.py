"""The README's agent recipes are the files the real-agent tests run."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_readmes_codex_recipe_is_the_file_the_codex_test_runs() -> None:
    readme = (ROOT / "README.md").read_text()
    blocks = re.findall(r"^```toml\n(.*?)^```", readme, re.M | re.S)
    recipe = (ROOT / "docs" / "recipes" / "codex-config.toml").read_text()
    assert recipe in blocks
