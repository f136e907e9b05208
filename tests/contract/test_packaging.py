"""Dockerfile and compose are linted (no Docker engine runs here) and say what README and CI say."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent


def readme_commands() -> list[str]:
    section = ROOT.joinpath("README.md").read_text().split("## The two commands", 1)[1]
    block = section.split("```", 2)[1]
    return [line.split("#")[0].strip() for line in block.splitlines() if line.startswith("make ")]


def dockerfile_cmd() -> list[str]:
    line = next(
        line
        for line in ROOT.joinpath("Dockerfile").read_text().splitlines()
        if line.startswith("CMD ")
    )
    cmd: list[str] = json.loads(line.removeprefix("CMD "))
    return cmd


def compose() -> dict[str, Any]:
    doc: dict[str, Any] = yaml.safe_load(ROOT.joinpath("docker-compose.yml").read_text())
    return doc


def test_hadolint_passes() -> None:
    result = subprocess.run(
        [str(BIN / "hadolint"), "Dockerfile"], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_yamllint_passes_on_compose() -> None:
    config = "{extends: default, rules: {line-length: {max: 110}, document-start: disable}}"
    result = subprocess.run(
        [str(BIN / "yamllint"), "-s", "-d", config, "docker-compose.yml"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_compose_runs_postgres_16_with_health_checks_and_migrations_first() -> None:
    services = compose()["services"]
    assert services["postgres"]["image"] == "postgres:16"
    assert "healthcheck" in services["postgres"] and "healthcheck" in services["app"]
    assert services["app"]["depends_on"]["migrate"]["condition"] == "service_completed_successfully"
    assert services["migrate"]["depends_on"]["postgres"]["condition"] == "service_healthy"
    url = services["app"]["environment"]["CTXC_DATABASE_URL"]
    assert url == services["migrate"]["environment"]["CTXC_DATABASE_URL"]
    assert url.startswith("postgresql+asyncpg://")


def test_image_and_compose_commands_are_the_ones_make_serve_runs() -> None:
    serve_recipe = re.search(
        r"^serve:.*\n((?:\t.*\n)+)", ROOT.joinpath("Makefile").read_text(), re.M
    )
    assert serve_recipe is not None
    steps = [line.strip().removeprefix("$(BIN)/") for line in serve_recipe.group(1).splitlines()]
    assert steps == ["ctxc migrate", "ctxc serve"]
    assert dockerfile_cmd() == ["ctxc", "serve"] == compose()["services"]["app"]["command"]
    assert compose()["services"]["migrate"]["command"] == ["ctxc", "migrate"]


def test_image_runs_as_non_root() -> None:
    users = [
        line
        for line in ROOT.joinpath("Dockerfile").read_text().splitlines()
        if line.startswith("USER ")
    ]
    assert users and users[-1].split()[1].split(":")[0] not in ("root", "0")


def test_ci_runs_exactly_the_readme_test_command() -> None:
    serve, test = readme_commands()
    assert serve == "make serve"
    ci = [
        line
        for line in ROOT.joinpath(".ci/run").read_text().splitlines()
        if line and not line.startswith(("#", "set ", "cd "))
    ]
    assert ci == [test]
