"""The agent tests' checks fail on what they look for (a synthetic report each)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from tests.agents import checks
from tests.agents.harness import Report

TASK = "Read every file."
PATH = "/anthropic/v1/messages"
USER = {"role": "user", "content": [{"type": "text", "text": TASK}]}
CALL = {
    "role": "assistant",
    "content": [{"type": "tool_use", "id": "toolu_1", "name": "Read", "input": {}}],
}
RESULT = {
    "role": "user",
    "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "file text"}],
}
MESSAGES = [USER, CALL, RESULT]
STORED = [
    {"message": {"role": "user", "content": [{"type": "text", "text": TASK}]}},
    {
        "message": {
            "role": "assistant",
            "content": [{"type": "tool_call", "id": "toolu_1", "name": "Read", "arguments": {}}],
        }
    },
    {
        "message": {
            "role": "user",
            "content": [{"type": "tool_result", "call_id": "toolu_1", "content": "file text"}],
        }
    },
]
HEADERS = {"x-api-key": "k", "x-app": "cli", "anthropic-version": "2023-06-01"}


def report(**changes: Any) -> Report:
    """A run that passes every check; ``changes`` replace its parts."""
    request = {
        "method": "POST",
        "path": "/v1/messages",
        "query": "beta=true",
        "headers": HEADERS,
        "body": {"system": "s", "messages": MESSAGES},
        "tokens": 100,
        "kind": "main",
        "answer": "tool:Read",
    }
    data = {
        "exit_code": 0,
        "timed_out": False,
        "stdout": "",
        "stderr": "",
        "links": "1: lo: <UP>\n",
        "sent": [
            {
                "method": "POST",
                "path": PATH,
                "query": "beta=true",
                "headers": {**HEADERS, "x-ctxc-session": "s", "host": "h"},
                "body": {"messages": MESSAGES},
                "status": 200,
                "answer_headers": {},
            }
        ],
        "received": {"requests": [request], "problems": []},
        "stored": [{"id": "s", "messages": STORED, "compactions": []}],
    }
    return Report(data | changes)


def changed(key: str, **fields: Any) -> Report:
    """The passing run with ``fields`` replaced in its first ``key`` entry."""
    base = report().data
    entry = base[key]["requests"][0] if key == "received" else base[key][0]
    entry.update(fields)
    return Report(base)


Check = Callable[[Report], None]
CHECKS: list[tuple[str, Check, Report]] = [
    ("exit", checks.exited_ok, report(exit_code=1)),
    ("links", checks.loopback_only, report(links="1: lo: <UP>\n2: eth0: <UP>\n")),
    ("problems", checks.stand_in_clean, report(received={"requests": [], "problems": ["x"]})),
    (
        "fork",
        checks.no_forks,
        report(stored=[{"id": "s:fork-1", "messages": [], "compactions": []}]),
    ),
    ("forked", checks.no_forks, changed("sent", answer_headers={"x-ctxc-forked-to": "s:fork-1"})),
    (
        "valid",
        lambda r: checks.provider_valid(r, "anthropic"),
        changed("received", body={"messages": [CALL]}),
    ),
    ("window", lambda r: checks.within_window(r, 99), report()),
    (
        "task",
        lambda r: checks.task_everywhere(r, TASK, "anthropic"),
        changed("received", body={"messages": [{"role": "user", "content": "summary"}, *MESSAGES]}),
    ),
    (
        "compactions",
        lambda r: checks.compactions_at_most(r, 0),
        report(stored=[{"id": "s", "messages": STORED, "compactions": [{"archived": []}]}]),
    ),
    (
        "stored",
        lambda r: checks.all_stored(r, "anthropic", (PATH,)),
        report(stored=[{"id": "s", "messages": STORED[:2], "compactions": []}]),
    ),
    (
        "headers",
        lambda r: checks.passed_on(r, (PATH,)),
        changed("received", headers={"x-api-key": "k", "anthropic-version": "2023-06-01"}),
    ),
    ("query", lambda r: checks.passed_on(r, (PATH,)), changed("received", query="")),
    ("turns", lambda r: checks.tool_turns(r, 2), report()),
    (
        "none",
        lambda r: checks.provider_valid(r, "anthropic"),
        report(received={"requests": [], "problems": []}),
    ),
]


def test_a_passing_run_passes_every_check() -> None:
    run = report()
    for check in (checks.exited_ok, checks.loopback_only, checks.stand_in_clean, checks.no_forks):
        check(run)
    checks.provider_valid(run, "anthropic")
    checks.within_window(run, 100)
    checks.task_everywhere(run, TASK, "anthropic")
    checks.compactions_at_most(run, 0)
    checks.all_stored(run, "anthropic", (PATH,))
    checks.passed_on(run, (PATH,))
    checks.tool_turns(run, 1)


@pytest.mark.parametrize(("check", "run"), [c[1:] for c in CHECKS], ids=[c[0] for c in CHECKS])
def test_each_check_fails_on_what_it_looks_for(check: Check, run: Report) -> None:
    with pytest.raises(AssertionError):
        check(run)
