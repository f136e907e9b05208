"""Codex CLI, unmodified, through a live ctxc against a scripted stand-in of OpenAI's Responses
API, in a loopback-only network namespace (see tests/agents/__init__.py). Its ``config.toml`` is
the docs' recipe (docs/recipes/codex-config.toml) as written: only ctxc's URL is the test's."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.agents import checks
from tests.agents.claude_standin import files
from tests.agents.codex_standin import FINAL_TEXT
from tests.agents.harness import REPO, Report, Scenario, run
from tests.agents.install import CODEX, installed

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

TASK = "Read every notes file under notes/ and summarise the incident in one paragraph."
WINDOW = 24_000
SESSION = "my-project"  # the recipe's
KEY = "sk-codex-test"
RECIPE = REPO / "docs" / "recipes" / "codex-config.toml"
PATHS = ("/openai/v1/responses",)


@pytest.fixture(scope="module")
def codex() -> Path:
    return installed(CODEX)


@pytest.fixture(scope="module")
def session(codex: Path, tmp_path_factory: pytest.TempPathFactory) -> Report:
    """Codex through 16 reads of 20 KB and a "context_length_exceeded", in a 24,000-token
    window, its config the recipe's."""
    notes = files(16, 20_000)
    config = RECIPE.read_text().replace("http://127.0.0.1:8080", "{ctxc}")
    scenario = Scenario(
        standin="tests.agents.codex_standin:CodexStandIn",
        # danger-full-access: no sandbox of Codex's own (the namespace is the sandbox).
        command=[str(codex), "exec", "--skip-git-repo-check", "-s", "danger-full-access", TASK],
        env={"OPENAI_API_KEY": KEY, "CTXC_CONTEXT_WINDOW": str(WINDOW)},
        ctxc_settings={"CTXC_OPENAI_UPSTREAM": "{standin}/v1"},
        standin_options={"files": sorted(notes), "window": WINDOW, "overflow_at": 9, "key": KEY},
        files={**notes, "../home/.codex/config.toml": config},
        timeout=300,
    )
    return run(scenario, tmp_path_factory.mktemp("codex"))


def test_runs_to_the_end_in_a_loopback_only_namespace(session: Report) -> None:
    checks.loopback_only(session)
    checks.exited_ok(session)
    checks.stand_in_clean(session)  # every reasoning item came back byte for byte
    assert FINAL_TEXT in session["stdout"], session.brief()


def test_a_long_session(session: Report) -> None:
    checks.tool_turns(session, 15)
    checks.answered(session, "error:overflow-scripted")


def test_never_forks(session: Report) -> None:
    checks.no_forks(session)
    assert [s["id"] for s in session["stored"]] == [SESSION]


def test_headers_and_query_reach_the_provider(session: Report) -> None:
    checks.passed_on(session, PATHS)
    for request in checks.received(session):
        assert request["headers"]["accept"] == "text/event-stream"
        assert request["headers"]["authorization"] == f"Bearer {KEY}"
        body = request["body"]
        assert body["store"] is False and body["include"] == ["reasoning.encrypted_content"]
        assert body["prompt_cache_key"] and body["client_metadata"]


def test_every_request_is_valid_and_within_the_window(session: Report) -> None:
    checks.provider_valid(session, "responses")
    checks.within_window(session, WINDOW)


def test_every_message_sent_is_stored(session: Report) -> None:
    checks.all_stored(session, "responses", PATHS)


def test_ctxc_said_it_managed_every_turn(session: Report) -> None:
    answers = [e["answer_headers"] or {} for e in session["sent"] if e["path"] in PATHS]
    assert answers and all(a.get("x-ctxc-managed") == "true" for a in answers)
    assert any(a.get("x-ctxc-retried") == "prompt_too_long" for a in answers)


def _task_item(request: dict[str, object]) -> bool:
    """Whether the request holds the user item Codex put the task in, as Codex wrote it."""
    body = request["body"]
    assert isinstance(body, dict)
    return any(
        isinstance(item, dict)
        and item.get("role") == "user"
        and TASK in json.dumps(item.get("content"))
        and "Summary of the earlier conversation" not in json.dumps(item.get("content"))
        for item in body["input"]
    )


def test_the_task_survives_and_compactions_are_few(session: Report) -> None:
    # Codex's first user item is its environment context; the task is its own item after it.
    missing = [i for i, r in enumerate(checks.received(session)) if not _task_item(r)]
    counts = [len(s["compactions"]) for s in session["stored"]]
    assert not missing and sum(counts) <= 3, f"without the task: {missing}; compactions {counts}"


def test_the_sidecar_page_shows_the_recipe_the_test_runs() -> None:
    readme = (REPO / "docs" / "sidecar.md").read_text()
    assert f"```toml\n{RECIPE.read_text()}```" in readme
