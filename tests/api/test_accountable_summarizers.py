"""Accountable summarisers (issue 28): every compaction's summary is the one its policy names
wrote, or its record and its event say why not. Real `ctxc serve` replicas on one database
(two on Postgres), a real webhook summariser, inline and background compactions at once."""

from __future__ import annotations

import json
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from typing import Any

import httpx
import pytest

from app.domain.summaries import SUMMARIZER_REASONS
from tests.api.sse import stream
from tests.api.test_compaction import POLICY, work_history
from tests.api.webhook_summarizer import SECRET, Webhook, serve, serve_env, webhook
from tests.conftest import Api, new_session

FAIL = "FAIL-HOOK"  # a history holding it is answered 500 by the webhook
WAVES = 200  # compile waves at most, until every session compacted once
# Each inline and background: (its webhook call fails, its policy names the profile ``spare``,
# compiled by the last replica only: on Postgres, one without that profile).
SESSIONS = [
    (False, False, False),
    (False, False, True),
    (True, False, False),
    (False, True, False),
    (False, True, True),
]


def _history(failing: bool) -> list[dict[str, Any]]:
    history = work_history(12)
    if failing:  # a tool result in the middle, summarised (not the opening task, kept)
        history[8] = {**history[8], "content": f"{history[8]['content']}\n# {FAIL}"}
    return history


def _envs(api: Api, hook: Webhook, replicas: int) -> list[dict[str, str]]:
    """The replicas' settings: the webhook the default summariser of each; the first also has
    a profile ``spare`` (the webhook too), which the others do not."""
    env = serve_env(api.database_url, hook, lease_seconds=30)
    spare = {"kind": "webhook", "url": hook.url, "webhook_secret": SECRET, "retries": 0}
    first = env | {"CTXC_SUMMARIZER_PROFILES": json.dumps({"spare": spare})}
    return [first, *[env] * (replicas - 1)]


def _compile_until_compacted(routes: dict[str, list[httpx.Client]]) -> None:
    """Compile every session on each of its replicas, all at once, wave after wave, until each
    has a compaction (a background one needs a compile after its preparation)."""
    pending = list(routes)
    with ThreadPoolExecutor(2 * len(routes)) as pool:
        for _ in range(WAVES):
            calls = [(c, s) for s in pending for c in routes[s]]
            answers = list(
                pool.map(lambda a: a[0].post(f"/v1/sessions/{a[1]}/compile", json={}), calls)
            )
            assert [a.status_code for a in answers] == [200] * len(calls)
            pending = [s for s in pending if not _compactions(routes[s][0], s)]
            if not pending:
                return
            time.sleep(0.1)  # the preparations run meanwhile
    raise AssertionError(f"sessions never compacted: {pending}")


def _compactions(client: httpx.Client, sid: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = client.get(f"/v1/sessions/{sid}/compactions").json()["items"]
    return items


def _ended(client: httpx.Client, sid: str, count: int) -> list[dict[str, Any]]:
    """The data of the session's first ``count`` ``context_compaction_end`` events that
    compacted."""
    out: list[dict[str, Any]] = []
    with stream(client, sid, after=0) as events:
        while len(out) < count:
            [event] = events.read(1)
            if event.event == "context_compaction_end" and event.data["outcome"] == "compacted":
                out.append(event.data)
    return out


def _sessions(
    clients: list[httpx.Client],
) -> tuple[dict[str, tuple[bool, bool]], dict[str, list[httpx.Client]]]:
    """``SESSIONS``, inline and background, with their histories: each session's kind (its
    webhook call fails, its policy names ``spare``) and the replicas that compile it."""
    kinds: dict[str, tuple[bool, bool]] = {}
    routes: dict[str, list[httpx.Client]] = {}
    for background in (False, True):
        for failing, spare, last in SESSIONS:
            policy: dict[str, Any] = POLICY | {"background": background}
            if spare:
                policy |= {"summarizer": {"profile": "spare"}}
            sid = new_session(clients[0], provider="gpt-4o", compaction=policy)
            posted = clients[0].post(
                f"/v1/sessions/{sid}/messages", json={"messages": _history(failing)}
            )
            assert posted.status_code == 201, posted.text
            kinds[sid] = (failing, spare)
            routes[sid] = clients[-1:] if last else clients
    return kinds, routes


def _says(record: dict[str, Any], failing: bool, spare: bool) -> None:
    """The record says who wrote its summary, and why not the named summariser if not."""
    said = (record["summarizer"], record["summarizer_reason"])
    if failing:
        assert said[1] == "fallback", said
        assert said[0].startswith("ledger (fallback: webhook: "), said
    elif spare and said[1] is None:  # by the replica that has the profile
        assert said[0] == "webhook [profile spare]"
    elif spare:  # by one that does not: its default webhook, saying so
        assert said[1] == "summarizer_unavailable", said
        assert said[0].startswith("webhook (fallback: no summariser profile 'spare'")
    else:
        assert said == ("webhook", None)


@pytest.mark.slow
def test_every_compaction_is_the_named_summarisers_or_says_why_not(api: Api) -> None:
    replicas = 2 if api.database_url.startswith("postgresql") else 1
    with webhook(delay=0.2) as hook, ExitStack() as stack:
        hook.fail_on = FAIL
        urls = [stack.enter_context(serve(env))[0] for env in _envs(api, hook, replicas)]
        headers = {"Authorization": f"Bearer {api.key_a}"}
        clients = [
            stack.enter_context(httpx.Client(base_url=u, headers=headers, timeout=60)) for u in urls
        ]
        kinds, routes = _sessions(clients)
        _compile_until_compacted(routes)
        records = {sid: _compactions(clients[0], sid) for sid in kinds}
        ended = {sid: _ended(clients[0], sid, len(records[sid])) for sid in kinds}
    every = [r for rs in records.values() for r in rs]
    by_webhook = [r for r in every if r["summarizer"].startswith("webhook")]
    assert hook.calls == len(by_webhook) + hook.failed
    assert hook.failed == len([r for r in every if r["summarizer_reason"] == "fallback"]) > 0
    assert all(r["summarizer_reason"] in SUMMARIZER_REASONS for r in every if r not in by_webhook)
    for sid, (failing, spare) in kinds.items():
        assert [r["id"] for r in records[sid]] == [e["compaction_id"] for e in ended[sid]]
        for record, event in zip(records[sid], ended[sid], strict=True):
            said = (record["summarizer"], record["summarizer_reason"])
            assert (event["summarizer"], event["summarizer_reason"]) == said
            _says(record, failing, spare)
