"""Claude Code, unmodified, through a live ctxc against a scripted stand-in of Anthropic's API,
in a loopback-only network namespace (see tests/agents/__init__.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.agents import checks
from tests.agents.claude_standin import SUB_TASK, files
from tests.agents.harness import REPO, Report, Scenario, run
from tests.agents.install import CLAUDE_CODE, installed

# The long session runs in the first test's time: its own bound (300 s) and the driver's.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

TASK = "Read every notes file under notes/ and summarise each one in a sentence."
WINDOW = 40_000
SESSION = "claude-code-run"
RECIPE = REPO / "docs" / "recipes" / "claude-code.sh"
# What keeps Claude Code from calling home or updating itself, and lets it skip its permission
# prompts as root (IS_SANDBOX: the namespace is the sandbox).
QUIET = {
    "DISABLE_AUTOUPDATER": "1",
    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    "DISABLE_TELEMETRY": "1",
    "DISABLE_ERROR_REPORTING": "1",
    "IS_SANDBOX": "1",
}
STANDIN = "tests.agents.claude_standin:ClaudeStandIn"
UPSTREAM = {"CTXC_ANTHROPIC_UPSTREAM": "{standin}"}


def long_session(claude: Path, model: list[str], tmp_path: Path) -> Report:
    """Claude Code through 16 reads of 20 KB, 4 Bash calls, a sub-agent and a "prompt is too
    long", in a 40,000-token window; ``model``: its --model option, if any."""
    notes = files(16, 20_000)
    headers = f"X-Ctxc-Session: {SESSION}\nX-Ctxc-Context-Window: {WINDOW}"
    scenario = Scenario(
        standin=STANDIN,
        command=[str(claude), "-p", TASK, "--dangerously-skip-permissions", *model],
        env={
            **QUIET,
            "ANTHROPIC_BASE_URL": "{ctxc}/anthropic",
            "ANTHROPIC_API_KEY": "sk-ant-test",
            "ANTHROPIC_CUSTOM_HEADERS": headers,
        },
        ctxc_settings=UPSTREAM,
        standin_options={
            "task": TASK,
            "files": sorted(notes),
            "window": WINDOW,
            "overflow_at": 9,
            "agent_at": 5,
            "bash_every": 4,
        },
        files=notes,
        timeout=300,
    )
    return run(scenario, tmp_path)


@pytest.fixture(scope="module")
def claude() -> Path:
    return installed(CLAUDE_CODE)


# Its default model (system messages inside `messages`), and an older one (none: the session's
# system prompt and tools only).
MODELS = {"default-model": [], "sonnet-4-5": ["--model", "claude-sonnet-4-5-20250929"]}


@pytest.fixture(scope="module", params=list(MODELS))
def session(
    claude: Path, tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> Report:
    return long_session(claude, MODELS[request.param], tmp_path_factory.mktemp("claude"))


def test_runs_to_the_end_in_a_loopback_only_namespace(session: Report) -> None:
    checks.loopback_only(session)
    checks.exited_ok(session)
    checks.stand_in_clean(session)


def test_a_long_session_with_a_sub_agent(session: Report) -> None:
    checks.tool_turns(session, 15)
    checks.interleaved(session, ("sub",))
    checks.answered(session, "error:overflow-scripted")


def test_never_forks(session: Report) -> None:
    checks.no_forks(session)


def test_headers_and_query_reach_the_provider(session: Report) -> None:
    checks.passed_on(session, ("/anthropic/v1/messages",))


def test_every_request_is_valid_and_within_the_window(session: Report) -> None:
    checks.provider_valid(session, "anthropic")
    checks.within_window(session, WINDOW)


def test_the_task_is_in_every_request(session: Report) -> None:
    checks.task_everywhere(session, TASK, "anthropic", ("main",))
    checks.task_everywhere(session, SUB_TASK, "anthropic", ("sub",))


def test_at_most_three_compactions(session: Report) -> None:
    checks.compactions_at_most(session, 3)


def test_every_message_sent_is_stored(session: Report) -> None:
    checks.all_stored(session, "anthropic", ("/anthropic/v1/messages",))


def test_the_readme_shows_the_recipe_the_test_runs() -> None:
    readme = (REPO / "README.md").read_text()
    assert f"```bash\n{RECIPE.read_text()}```" in readme


def test_the_readme_recipe_as_written(claude: Path, tmp_path: Path) -> None:
    """The README's Claude Code recipe, run by bash as written: only the URL (ctxc's port) and
    the key are the test's; `claude` is the installed CLI, in a user's plain environment."""
    recipe = RECIPE.read_text().replace("http://127.0.0.1:8080", "{ctxc}")
    scenario = Scenario(
        standin=STANDIN,
        command=["bash", "-euo", "pipefail", "{root}/recipe.sh"],
        env={
            "YOUR_ANTHROPIC_API_KEY": "sk-ant-recipe",
            "PATH": f"{claude.parent}:/usr/local/bin:/usr/bin:/bin",
        },
        ctxc_settings=UPSTREAM,
        standin_options={"task": "List the files here", "files": [], "window": 200_000},
        files={"README.txt": "A file to list.\n", "../recipe.sh": recipe},
        timeout=300,
    )
    report = run(scenario, tmp_path)
    checks.exited_ok(report)
    models = checks.received(report)
    assert models and all(r["headers"].get("x-api-key") == "sk-ant-recipe" for r in models)
    assert [s["id"] for s in report["stored"]] == ["my-project"]
    assert report["stored"][0]["messages"], "nothing stored in my-project"
