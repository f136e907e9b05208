"""Gemini CLI, unmodified, through a live ctxc against a scripted stand-in of the Gemini API, in a
loopback-only network namespace (see tests/agents/__init__.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.agents import checks
from tests.agents.claude_standin import files
from tests.agents.harness import REPO, Report, Scenario, run
from tests.agents.install import GEMINI_CLI, installed

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

TASK = "Read every notes file under notes/ and summarise each one in a sentence."
WINDOW = 40_000
SESSION = "gemini-cli-run"
MODEL = "gemini-3-pro-preview"
RECIPE = REPO / "docs" / "recipes" / "gemini-cli.sh"
STANDIN = "tests.agents.gemini_standin:GeminiStandIn"
UPSTREAM = {"CTXC_GEMINI_UPSTREAM": "{standin}"}
# Gemini CLI's settings in its HOME: no telemetry, no update checks, the API key's auth, the
# working directory trusted; and its next-speaker check on (a side request to a flash model once
# the model answers with text).
SETTINGS = {
    "model": {"skipNextSpeakerCheck": False},
    "general": {"enableAutoUpdate": False, "enableAutoUpdateNotification": False},
    "privacy": {"usageStatisticsEnabled": False},
    "telemetry": {"enabled": False},
    "security": {"auth": {"selectedType": "gemini-api-key"}, "folderTrust": {"enabled": False}},
}
# Gemini CLI masks its older tool outputs once they pass about 80,000 of its estimated tokens
# (50,000 kept, 30,000 more masked; always on in 0.61): a rewrite of sent history, which ctxc
# takes for an edit (a fork). The session stays under it: 12 reads of 20 KB (about 60,000).
READS = 12
QUIET = {"GEMINI_TELEMETRY_ENABLED": "false", "GEMINI_CLI_NO_RELAUNCH": "true"}


def long_session(gemini: Path, tmp_path: Path, count: int = READS) -> Report:
    """Gemini CLI through ``count`` reads of 20 KB, a shell command every third, a "prompt too
    long" and next-speaker checks, in a 40,000-token window."""
    notes = files(count, 20_000)
    headers = f"X-Ctxc-Session: {SESSION}, X-Ctxc-Context-Window: {WINDOW}"
    scenario = Scenario(
        standin=STANDIN,
        command=[str(gemini), "-p", TASK, "--yolo", "--skip-trust", "-m", MODEL],
        env={
            **QUIET,
            "GOOGLE_GEMINI_BASE_URL": "{ctxc}/gemini",
            "GEMINI_API_KEY": "AIza-test-key",
            "GEMINI_CLI_CUSTOM_HEADERS": headers,
        },
        ctxc_settings=UPSTREAM,
        standin_options={
            "task": TASK,
            "files": sorted(notes),
            "window": WINDOW,
            "overflow_at": 9,
            "shell_every": 3,
        },
        files={**notes, "../home/.gemini/settings.json": json.dumps(SETTINGS)},
        timeout=300,
    )
    return run(scenario, tmp_path)


@pytest.fixture(scope="module")
def gemini() -> Path:
    return installed(GEMINI_CLI)


@pytest.fixture(scope="module")
def session(gemini: Path, tmp_path_factory: pytest.TempPathFactory) -> Report:
    return long_session(gemini, tmp_path_factory.mktemp("gemini"))


def test_runs_to_the_end_in_a_loopback_only_namespace(session: Report) -> None:
    checks.loopback_only(session)
    checks.exited_ok(session)
    checks.stand_in_clean(session)


def test_a_long_session_with_side_requests(session: Report) -> None:
    checks.tool_turns(session, 15)
    checks.interleaved(session, ("side",))
    checks.answered(session, "error:overflow-scripted")


# Gemini CLI's side requests (its router, its next-speaker check) come under the same
# X-Ctxc-Session with histories of their own: each continues a conversation beside the main one,
# and a next-speaker check (the main conversation resent with a question of its own) starts
# another beside it each time. Nothing forks.
def test_never_forks(session: Report) -> None:
    checks.no_forks(session)


def model_paths(report: Report) -> tuple[str, ...]:
    """The paths of the agent's model calls (Gemini CLI maps ``-m`` to a newer model, and
    calls a flash model on the side)."""
    return tuple({e["path"] for e in report["sent"] if e["path"].endswith("Content")})


def test_headers_and_query_reach_the_provider(session: Report) -> None:
    checks.passed_on(session, model_paths(session))


def test_every_request_is_valid_and_within_the_window(session: Report) -> None:
    checks.provider_valid(session, "gemini")
    checks.within_window(session, WINDOW)


def test_the_task_is_in_every_request(session: Report) -> None:
    checks.task_everywhere(session, TASK, "gemini", ("main",))


# The main thread compacts once (at the prompt too long); each fork compacts again.
def test_at_most_three_compactions(session: Report) -> None:
    checks.compactions_at_most(session, 3)


def test_every_message_sent_is_stored(session: Report) -> None:
    checks.all_stored(session, "gemini", model_paths(session))


def test_the_sidecar_page_shows_the_recipe_the_test_runs() -> None:
    page = (REPO / "docs" / "sidecar.md").read_text()
    assert f"```bash\n{RECIPE.read_text()}```" in page


@pytest.fixture(scope="module")
def recipe_run(gemini: Path, tmp_path_factory: pytest.TempPathFactory) -> Report:
    """The docs' Gemini CLI recipe, run by bash as written: only the URL (ctxc's port) and the
    key are the test's; `gemini` is the installed CLI, in a user's plain environment (a HOME
    with no settings)."""
    recipe = RECIPE.read_text().replace("http://127.0.0.1:8080", "{ctxc}")
    scenario = Scenario(
        standin=STANDIN,
        command=["bash", "-euo", "pipefail", "{root}/recipe.sh"],
        env={
            "YOUR_GEMINI_API_KEY": "AIza-recipe",
            "PATH": f"{gemini.parent}:/usr/local/bin:/usr/bin:/bin",
        },
        ctxc_settings=UPSTREAM,
        standin_options={"task": "List the files here", "files": [], "window": 200_000},
        files={"README.txt": "A file to list.\n", "../recipe.sh": recipe},
        timeout=300,
    )
    return run(scenario, tmp_path_factory.mktemp("recipe"))


def test_the_recipe_as_written(recipe_run: Report) -> None:
    checks.exited_ok(recipe_run)
    models = checks.received(recipe_run)
    assert models and all(r["headers"].get("x-goog-api-key") == "AIza-recipe" for r in models)
    [main] = [s for s in recipe_run["stored"] if s["id"] == "my-project"]
    assert main["messages"], "nothing stored in my-project"


def test_the_recipes_side_request_forks_nothing(recipe_run: Report) -> None:
    # Gemini CLI asks a flash model to route the task first (a side request), then the main one.
    checks.no_forks(recipe_run)
