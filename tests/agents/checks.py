"""The issue's assertions on a scenario's report, one function each, generic over providers.

``target`` names the provider's request shape as app/domain/validity names it ("anthropic",
"openai", "responses", "gemini"); ``kinds`` are the stand-in's kinds of requests a check covers.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from app.domain.validity import request_problems
from tests.agents.harness import Report

MODEL_CALLS = ("main", "sub", "side")
# Each shape's system prompt and message list, by body field.
FIELDS = {
    "anthropic": ("system", "messages"),
    "openai": (None, "messages"),
    "responses": ("instructions", "input"),
    "gemini": ("systemInstruction", "contents"),
}
# Where a message keeps what must survive storage: its texts, reasoning, signatures, call ids.
KEPT_KEYS = frozenset(
    {
        "text",
        "thinking",
        "signature",
        "tool_use_id",
        "call_id",
        "content",
        "output",
        "encrypted_content",
        "thoughtSignature",
    }
)
CALL_TYPES = frozenset({"tool_use", "function_call"})
# Headers a proxy sets itself (RFC 9110 section 7.6.1's hop-by-hop ones, and the body's own).
NOT_PASSED = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-connection",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
        "host",
        "content-length",
        "accept-encoding",
    }
)


def received(report: Report, kinds: tuple[str, ...] = MODEL_CALLS) -> list[dict[str, Any]]:
    """The stand-in's requests of ``kinds``, in order."""
    requests: list[dict[str, Any]] = report["received"]["requests"]
    chosen = [r for r in requests if r["kind"] in kinds]
    # A check over no request would pass whatever ctxc did.
    assert chosen, f"the stand-in received no {kinds} request\n{report.brief()}"
    return chosen


def exited_ok(report: Report) -> None:
    assert report["exit_code"] == 0 and not report["timed_out"], report.brief()


def loopback_only(report: Report) -> None:
    """The namespace had no interface but ``lo``."""
    links = [line.split(":")[1].strip() for line in report["links"].splitlines() if line]
    assert links == ["lo"], report["links"]


def stand_in_clean(report: Report) -> None:
    """The stand-in saw nothing wrong (e.g. a thinking signature that came back changed)."""
    assert report["received"]["problems"] == [], report["received"]["problems"]


def no_forks(report: Report) -> None:
    """ctxc forked nothing: no ``X-Ctxc-Forked-To`` answer, no ``:fork-`` session."""
    forked = [
        e["answer_headers"]["x-ctxc-forked-to"]
        for e in report["sent"]
        if "x-ctxc-forked-to" in (e["answer_headers"] or {})
    ]
    assert report["stored"], f"ctxc stored no session\n{report.brief()}"
    forks = [s["id"] for s in report["stored"] if ":fork-" in s["id"]]
    assert not forked and not forks, f"forked to {forked}; fork sessions {forks}"


def passed_on(report: Report, paths: tuple[str, ...], kinds: tuple[str, ...] = MODEL_CALLS) -> None:
    """Every header the agent sent in all its requests on ``paths`` (but hop-by-hop ones, Host,
    Content-Length, Accept-Encoding and X-Ctxc-*) reached the stand-in in each model request,
    with the agent's query string."""
    sent = [e for e in report["sent"] if e["path"] in paths]
    assert sent, f"the agent sent nothing on {paths}"
    names = set.intersection(*(set(e["headers"]) for e in sent)) - NOT_PASSED
    names = {name for name in names if not name.startswith("x-ctxc-")}
    queries = {e["query"] for e in sent}
    for i, request in enumerate(received(report, kinds)):
        missing = sorted(names - set(request["headers"]))
        assert not missing, f"request {i} ({request['kind']}) lacks the agent's headers {missing}"
        assert request["query"] in queries, (
            f"request {i}: query {request['query']!r}, not {queries}"
        )


def provider_valid(report: Report, target: str, kinds: tuple[str, ...] = MODEL_CALLS) -> None:
    """Every model request the stand-in received passes the provider's validator."""
    system_field, messages_field = FIELDS[target]
    for i, request in enumerate(received(report, kinds)):
        body = request["body"]
        system = body.get(system_field) if system_field else None
        problems = request_problems(target, system, body.get(messages_field) or [])  # type: ignore[arg-type]
        assert not problems, f"request {i} ({request['kind']}) is not valid: {problems}"


def within_window(report: Report, window: int, kinds: tuple[str, ...] = MODEL_CALLS) -> None:
    """Every model request's prompt is within ``window`` tokens (the stand-in's count)."""
    over = [
        (i, r["kind"], r["tokens"])
        for i, r in enumerate(received(report, kinds))
        if r["tokens"] > window
    ]
    assert not over, f"requests over the {window}-token window (index, kind, tokens): {over}"


def task_everywhere(
    report: Report, task: str, target: str, kinds: tuple[str, ...] = MODEL_CALLS
) -> None:
    """``task`` is in the first user message of every model request of ``kinds`` the stand-in
    received (where the agent put it: not summarised away, not only quoted later on)."""
    _, messages_field = FIELDS[target]
    missing = []
    for i, request in enumerate(received(report, kinds)):
        messages = request["body"].get(messages_field) or []
        users = [m for m in messages if isinstance(m, dict) and m.get("role") == "user"]
        if not users or task not in json.dumps(users[0], ensure_ascii=False):
            missing.append((i, request["kind"]))
    assert not missing, f"requests whose first user message lacks {task!r} (index, kind): {missing}"


def compactions_at_most(report: Report, most: int) -> None:
    """ctxc compacted at most ``most`` times, over all its sessions."""
    assert report["stored"], f"ctxc stored no session\n{report.brief()}"
    counts = {s["id"]: len(s["compactions"]) for s in report["stored"] if s["compactions"]}
    assert sum(counts.values()) <= most, f"compactions by session: {counts}"


def all_stored(report: Report, target: str, paths: tuple[str, ...]) -> None:
    """Every message the agent sent on ``paths`` is stored, live or archived: each text,
    reasoning, signature and call id in it is a value of a stored message."""
    kept = set(_leaves(list(_stored_messages(report))))
    _, messages_field = FIELDS[target]
    missing: list[str] = []
    for e in report["sent"]:
        if e["path"] not in paths or not isinstance(e["body"], dict):
            continue
        for message in e["body"].get(messages_field) or []:
            missing += [atom[:80] for atom in _atoms(message) if atom and atom not in kept]
    assert not missing, f"{len(missing)} pieces of sent messages are not stored: {missing[:10]}"


def tool_turns(report: Report, least: int, kinds: tuple[str, ...] = ("main",)) -> None:
    """The stand-in answered at least ``least`` requests of ``kinds`` with a tool call."""
    calls = [r for r in received(report, kinds) if r["answer"].startswith("tool:")]
    assert len(calls) >= least, f"{len(calls)} tool turns, not {least}"


def answered(report: Report, answer: str) -> None:
    """The stand-in gave ``answer`` (e.g. its scripted "error:overflow-scripted") at least once."""
    answers = [r["answer"] for r in received(report)]
    assert answer in answers, f"no {answer!r} among the stand-in's answers: {answers}"


def interleaved(report: Report, others: tuple[str, ...] = ("sub", "side")) -> None:
    """A request of ``others`` came between two main requests."""
    kinds = [r["kind"] for r in received(report)]
    mains = [i for i, kind in enumerate(kinds) if kind == "main"]
    between = [k for k in kinds[mains[0] : mains[-1]] if k in others] if mains else []
    assert between, f"no {others} request between two main ones: {kinds}"


def _stored_messages(report: Report) -> Iterator[Any]:
    for session in report["stored"]:
        yield from session["messages"]
        for compaction in session["compactions"]:
            yield from compaction.get("archived") or []


def _leaves(value: Any) -> Iterator[str]:
    """Every string in ``value``, at any depth."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _leaves(item)
    elif isinstance(value, list):
        for item in value:
            yield from _leaves(item)


def _atoms(value: Any) -> Iterator[str]:
    """The strings of a sent message that storage must keep (see ``KEPT_KEYS``)."""
    if isinstance(value, dict):
        for key, item in value.items():
            if isinstance(item, str) and (
                key in KEPT_KEYS or (key == "id" and value.get("type") in CALL_TYPES)
            ):
                yield item
            else:
                yield from _atoms(item)
    elif isinstance(value, list):
        for item in value:
            yield from _atoms(item)
