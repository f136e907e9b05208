"""Dockerfile, compose and the lock files are checked (no Docker engine runs here) and say what
README, Makefile and CI say."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import yaml
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

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


def lint_recipe() -> list[str]:
    recipe = re.search(r"^lint:.*\n((?:\t.*\n)+)", ROOT.joinpath("Makefile").read_text(), re.M)
    assert recipe is not None
    return [line.strip().removeprefix("$(BIN)/") for line in recipe.group(1).splitlines()]


def test_yamllint_passes_under_the_repository_config_as_make_lint_runs_it() -> None:
    assert "yamllint --strict ." in lint_recipe() and "hadolint Dockerfile" in lint_recipe()
    listed = subprocess.run(
        [str(BIN / "yamllint"), "--list-files", "."], cwd=ROOT, capture_output=True, text=True
    )
    assert "./docker-compose.yml" in listed.stdout.split()
    assert ".venv" not in listed.stdout
    result = subprocess.run(
        [str(BIN / "yamllint"), "--strict", "."],
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


def dockerfile_lines() -> list[str]:
    return ROOT.joinpath("Dockerfile").read_text().splitlines()


def test_image_is_built_from_a_wheel_with_the_locked_dependencies() -> None:
    runs = "\n".join(line for line in dockerfile_lines() if not line.startswith("#"))
    assert "pip wheel --no-cache-dir --no-deps --wheel-dir /dist ." in runs
    assert "pip install --no-cache-dir --require-hashes -r /tmp/requirements.lock" in runs
    assert "pip install --no-cache-dir --no-deps /tmp/dist/*.whl" in runs
    assert " -e " not in runs and "--editable" not in runs
    # The dependency layer comes before the project is copied in.
    copies = [line for line in dockerfile_lines() if line.startswith("COPY ")]
    service = copies[copies.index("COPY requirements.lock /tmp/requirements.lock") :]
    assert service[1] == "COPY --from=wheel /dist /tmp/dist"


def test_the_build_context_is_only_what_the_image_copies() -> None:
    rules = [
        line
        for line in ROOT.joinpath(".dockerignore").read_text().splitlines()
        if line and not line.startswith("#")
    ]
    assert rules[0] == "*", "everything is left out unless let in"
    let_in = {rule[1:].rstrip("/") for rule in rules if rule.startswith("!")}
    copied = {
        source
        for line in dockerfile_lines()
        if line.startswith("COPY ") and "--from=" not in line
        for source in line.split()[1:-1]
    }
    assert let_in == copied
    assert not let_in & {".venv", ".git", "data", ".mypy_cache", ".pytest_cache", ".ruff_cache"}
    assert {"**/__pycache__", "**/*.pyc"} <= set(rules)


def locked(name: str) -> dict[str, str]:
    """The pins of a lock file (uv pip compile, universal, with hashes), checking each is hashed."""
    pins: dict[str, str] = {}
    lines = ROOT.joinpath(name).read_text().splitlines()
    for index, line in enumerate(lines):
        if line and not line.startswith((" ", "#")):
            requirement = Requirement(line.rstrip(" \\"))
            (spec,) = requirement.specifier
            assert spec.operator == "==", line
            assert lines[index + 1].strip().startswith("--hash=sha256:"), f"{name}: {line}"
            pins[canonicalize_name(requirement.name)] = spec.version
    return pins


def test_the_lock_files_pin_every_dependency_of_pyproject() -> None:
    project = tomllib.loads(ROOT.joinpath("pyproject.toml").read_text())["project"]
    runtime, dev = locked("requirements.lock"), locked("requirements-dev.lock")
    wanted = [("requirements.lock", runtime, project["dependencies"])]
    wanted.append(("requirements-dev.lock", dev, project["dependencies"]))
    wanted.append(("requirements-dev.lock", dev, project["optional-dependencies"]["dev"]))
    for name, pins, requirements in wanted:
        for line in requirements:
            requirement = Requirement(line)
            pin = pins.get(canonicalize_name(requirement.name))
            assert pin is not None, f"{requirement.name} is not in {name}: run `make lock`"
            assert requirement.specifier.contains(pin, prereleases=True), (
                f"{name} pins {requirement.name}=={pin}, outside {requirement.specifier}: "
                "run `make lock`"
            )
    assert {k: v for k, v in dev.items() if k in runtime} == runtime
