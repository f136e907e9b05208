"""Request-boundary compaction off the request path (issue 16, parts 5 and 6), over HTTP on both
databases with a real webhook summariser: prepared in the background past the early mark (the
compile does not wait for it), swapped in by a compile over the trigger, discarded when the
history changed under it; inline only when the window is exceeded; a minimum shed and a
cache-economic gate, both reported."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from typing import Any

import httpx
import pytest
from sqlalchemy import select, update

from app.domain.summaries.constraints import checksum
from app.settings import Settings
from app.storage.db import create_engine
from app.storage.models import PreparedCompactionRow, SessionRow
from tests.api.sse import stream
from tests.api.test_compaction import work_history
from tests.api.test_constraints import marked_history
from tests.api.webhook_summarizer import SECRET, Webhook, webhook
from tests.conftest import METRICS_TOKEN, Api, LiveServer, new_session, row_counts, scrape

PREPARING = "a compaction is being prepared in the background"


@contextmanager
def served(api: Api, hook: Webhook) -> Iterator[httpx.Client]:
    """An app instance on the test database whose summariser is ``hook``, and a client of it."""
    settings = Settings(
        database_url=api.database_url,
        auth="keys",
        summarizer="webhook",
        summarizer_url=hook.url,
        summarizer_webhook_secret=SECRET,
        summarizer_retries=0,
        summarizer_timeout_seconds=120,
        summarizer_deadline_seconds=120,
        metrics_token=METRICS_TOKEN,
    )
    with LiveServer(settings) as server, api.client() as client:
        client.base_url = httpx.URL(server.url)
        yield client


def prepared_row(url: str, sid: str) -> dict[str, Any] | None:
    """The session's prepared compaction as stored (seqs, digest, prepared_at), if any."""

    async def run() -> dict[str, Any] | None:
        engine = create_engine(url)
        try:
            async with engine.connect() as conn:
                query = (
                    select(
                        PreparedCompactionRow.seqs,
                        PreparedCompactionRow.digest,
                        PreparedCompactionRow.prepared_at,
                    )
                    .join(SessionRow, SessionRow.pk == PreparedCompactionRow.session_pk)
                    .where(SessionRow.id == sid)
                )
                found = (await conn.execute(query)).first()
                return None if found is None else dict(found._mapping)
        finally:
            await engine.dispose()

    return asyncio.run(run())


def spoil_digest(url: str, sid: str) -> None:
    """Make the stored preparation disagree with the history (as one left from a history
    changed since would)."""

    async def run() -> None:
        engine = create_engine(url)
        try:
            async with engine.begin() as conn:
                pk = select(SessionRow.pk).where(SessionRow.id == sid).scalar_subquery()
                await conn.execute(
                    update(PreparedCompactionRow)
                    .where(PreparedCompactionRow.session_pk == pk)
                    .values(digest="0" * 64)
                )
        finally:
            await engine.dispose()

    asyncio.run(run())


def wait_prepared(url: str, sid: str, seconds: float = 30) -> dict[str, Any]:
    deadline = time.monotonic() + seconds
    while (found := prepared_row(url, sid)) is None:
        assert time.monotonic() < deadline, "no compaction was prepared"
        time.sleep(0.05)
    return found


def session_past_the_mark(client: httpx.Client, **policy: Any) -> tuple[str, int]:
    """A session of 12 tool rounds whose policy puts it past the early mark (80% of the
    trigger), and its tokens."""
    sid = new_session(client, provider="gpt-4o")
    posted = client.post(f"/v1/sessions/{sid}/messages", json={"messages": work_history(12)})
    assert posted.status_code == 201, posted.text
    tokens: int = client.get(f"/v1/sessions/{sid}").json()["tokens"]
    compaction = {
        "trigger_tokens": tokens * 5 // 4,
        "target_tokens": tokens * 2 // 5,
        "min_messages": 10,
        "summary_tokens": 300,
        **policy,
    }
    client.patch(f"/v1/sessions/{sid}", json={"compaction": compaction}).raise_for_status()
    return sid, tokens


def grow(client: httpx.Client, sid: str, rounds: int = 8) -> None:
    """More tool rounds, past the trigger."""
    more = work_history(rounds)[1:-2]
    for m in more:
        if m.get("tool_calls"):
            m["tool_calls"][0]["id"] += "_more"
        if m.get("tool_call_id"):
            m["tool_call_id"] += "_more"
    more += [
        {"role": "assistant", "content": "Read those too."},
        {"role": "user", "content": "Go on."},
    ]
    client.post(f"/v1/sessions/{sid}/messages", json={"messages": more}).raise_for_status()


def compile_it(client: httpx.Client, sid: str, **body: Any) -> dict[str, Any]:
    answer = client.post(f"/v1/sessions/{sid}/compile", json=body)
    assert answer.status_code == 200, answer.text
    out: dict[str, Any] = answer.json()
    return out


def test_past_the_mark_a_compaction_is_prepared_without_the_compile_waiting_and_swapped_in_later(
    api: Api,
) -> None:
    with webhook(delay=0) as hook, served(api, hook) as client:
        sid, _ = session_past_the_mark(client)
        hook.hold.set()  # the summariser answers only once released
        try:
            # A compile that waited for the held summariser would time out here.
            first = client.post(f"/v1/sessions/{sid}/compile", json={}, timeout=20)
            assert first.status_code == 200, first.text
            assert first.json()["compactions"] == []
            assert hook.called.wait(30), "no compaction was prepared"
            assert prepared_row(api.database_url, sid) is None  # still summarising
        finally:
            hook.hold.clear()
        stored = wait_prepared(api.database_url, sid)
        grow(client, sid)
        with stream(client, sid, after=0) as events:
            answer = compile_it(client, sid)
            start, end = events.read(2)
        [done] = answer["compactions"]
        assert hook.calls == 1  # swapped in: no summariser call on the request path
        assert prepared_row(api.database_url, sid) is None
        assert (done["seq_from"], done["seq_to"]) == (stored["seqs"][0], stored["seqs"][-1])
        assert done["messages"] == len(stored["seqs"])
        assert done["prepared_at"] is not None and done["economics"]["applied"] is True
        # The task first, as sent; the summary right after it.
        assert answer["messages"][1]["content"].startswith("[Summary of the earlier conversation]")
        assert (start.event, end.event) == ("context_compaction_start", "context_compaction_end")
        assert end.data["outcome"] == "compacted" and end.data["prepared_at"]
        assert end.data["economics"] == done["economics"]
        record = client.get(f"/v1/sessions/{sid}/compactions/{done['id']}").json()
        assert [m["seq"] for m in record["archived"]] == stored["seqs"]


def test_a_compile_over_the_trigger_with_nothing_prepared_prepares_one_and_compiles_without(
    api: Api,
) -> None:
    with webhook(delay=0) as hook, served(api, hook) as client:
        sid, _ = session_past_the_mark(client, prepare_pct=100)
        grow(client, sid)
        hook.hold.set()
        try:
            answer = client.post(f"/v1/sessions/{sid}/compile", json={}, timeout=20)
            assert answer.status_code == 200, answer.text
            assert answer.json()["compactions"] == []
            assert any(PREPARING in w for w in answer.json()["warnings"])
        finally:
            hook.hold.clear()
        wait_prepared(api.database_url, sid)
        [done] = compile_it(client, sid)["compactions"]
        assert done["prepared_at"] is not None and hook.calls == 1


def test_a_preparation_the_history_changed_under_is_discarded_and_another_prepared(
    api: Api,
) -> None:
    with webhook(delay=0) as hook, served(api, hook) as client:
        sid, _ = session_past_the_mark(client)
        compile_it(client, sid)
        wait_prepared(api.database_url, sid)
        # A compaction of the history drops the preparation of it.
        micro = client.post(f"/v1/sessions/{sid}/compact", json={"kind": "micro"})
        assert micro.status_code == 201, micro.text
        assert prepared_row(api.database_url, sid) is None
        grow(client, sid)
        assert any(PREPARING in w for w in compile_it(client, sid)["warnings"])
        wait_prepared(api.database_url, sid)
        assert hook.calls == 3  # the first preparation, the micro compaction, the second
        # One whose messages no longer read as they did when it was made is not swapped in.
        spoil_digest(api.database_url, sid)
        answer = compile_it(client, sid)
        assert answer["compactions"] == []
        assert any(PREPARING in w for w in answer["warnings"])
        fresh = wait_prepared(api.database_url, sid)
        assert fresh["digest"] != "0" * 64 and hook.calls == 4
        [done] = compile_it(client, sid)["compactions"]
        assert done["prepared_at"] is not None


def test_a_history_that_does_not_fit_the_window_is_compacted_inline(api: Api) -> None:
    with webhook(delay=0) as hook, served(api, hook) as client:
        sid, tokens = session_past_the_mark(client, prepare_pct=100)
        grow(client, sid)
        answer = compile_it(client, sid, context_window=tokens)
        [done] = answer["compactions"]
        assert done["prepared_at"] is None and done["economics"]["applied"] is True
        assert hook.calls == 1


def test_a_compaction_that_sheds_too_little_is_not_applied(api: Api) -> None:
    with webhook(delay=0) as hook, served(api, hook) as client:
        sid, _ = session_past_the_mark(client, background=False, min_shed_pct=100)
        grow(client, sid)
        with stream(client, sid, after=0) as events:
            assert compile_it(client, sid)["compactions"] == []
            start, end = events.read(2)
        assert start.event == "context_compaction_start"
        assert end.data["outcome"] == "skipped" and "min_shed_pct" in end.data["skipped"]
        assert end.data["economics"]["applied"] is False
        assert hook.calls == 0  # refused before any summariser was called
        assert client.get(f"/v1/sessions/{sid}/compactions").json()["items"] == []


def test_an_inline_compaction_whose_summary_sheds_too_little_is_not_summarised_every_compile(
    api: Api,
) -> None:
    with webhook(delay=0) as hook, served(api, hook) as client:
        probe, _ = session_past_the_mark(client, background=False, min_shed_pct=0)
        grow(client, probe)
        [done] = compile_it(client, probe)["compactions"]
        assert hook.calls == 1
        shed = done["tokens_before"] - done["tokens_after"]
        # Enough were the summary nothing, too little with the webhook's.
        least = round(100 * (shed + done["summary_tokens"] / 2) / done["tokens_before"], 2)
        sid, _ = session_past_the_mark(client, background=False, min_shed_pct=least)
        grow(client, sid)
        for _ in range(4):  # over the trigger each time: summarised once, refused, not again
            assert compile_it(client, sid)["compactions"] == []
        assert hook.calls == 2
        assert client.get(f"/v1/sessions/{sid}/compactions").json()["items"] == []
        grow(client, sid, rounds=12)  # grown by more than a tenth: summarised again
        compile_it(client, sid)
        assert hook.calls == 3


@pytest.mark.parametrize(("turns", "applied"), [(1, False), (1_000, True)])
def test_the_cache_gate_weighs_what_a_compaction_sheds_against_the_cache_it_rewrites(
    api: Api, turns: int, applied: bool
) -> None:
    with webhook(delay=0) as hook, served(api, hook) as client:
        sid, _ = session_past_the_mark(client, background=False, expected_turns=turns)
        client.patch(f"/v1/sessions/{sid}", json={"provider": "anthropic"}).raise_for_status()
        grow(client, sid)
        with stream(client, sid, after=0) as events:
            answer = compile_it(client, sid)
            _, end = events.read(2)
        economics = end.data["economics"]
        shed, rewrite = economics["shed_tokens"], economics["rewrite_tokens"]
        # Anthropic: a cache read is a tenth of the input price, a write 1.25 times it.
        assert economics["saved"] == pytest.approx(shed * turns * 0.1, abs=0.01)
        assert economics["cost"] == pytest.approx(rewrite * 1.15, abs=0.01)
        assert economics["expected_turns"] == turns and economics["applied"] is applied
        assert len(answer["compactions"]) == int(applied)
        if applied:
            assert answer["compactions"][0]["economics"] == economics
        else:
            assert end.data["outcome"] == "skipped" and "prompt cache" in end.data["skipped"]
        assert hook.calls == 1


def test_two_instances_on_one_database_prepare_a_compaction_once(api: Api) -> None:
    if not api.database_url.startswith("postgresql"):
        pytest.skip("replicas share a Postgres database")
    with webhook(delay=0) as hook, ExitStack() as stack:
        one = stack.enter_context(served(api, hook))
        two = stack.enter_context(served(api, hook))
        sid, _ = session_past_the_mark(one)
        hook.hold.set()
        try:
            compile_it(one, sid)
            assert hook.called.wait(30)
            for client in (one, two, two):
                assert compile_it(client, sid)["compactions"] == []
        finally:
            hook.hold.clear()
        wait_prepared(api.database_url, sid)
        for client in (one, two):
            compile_it(client, sid)
        time.sleep(0.5)  # a second preparation, had one been scheduled, would have called by now
        assert hook.calls == 1


def test_shutdown_cancels_a_preparation_and_gives_its_lease_back(api: Api) -> None:
    with webhook(delay=0) as hook:
        hook.hold.set()  # the summariser never answers while this instance runs
        with served(api, hook) as client:
            sid, _ = session_past_the_mark(client)
            compile_it(client, sid)
            assert hook.called.wait(30)
        assert prepared_row(api.database_url, sid) is None
        hook.hold.clear()
        with served(api, hook) as client:
            # The lease is free at once (not left to expire): a compaction may run now.
            done = client.post(f"/v1/sessions/{sid}/compact", json={"kind": "session"})
            assert done.status_code == 201, done.text


def preparations(client: httpx.Client) -> dict[str, float]:
    """``ctxc_compaction_preparations_total`` by outcome."""
    prefix = 'ctxc_compaction_preparations_total{outcome="'
    lines = [line for line in scrape(client).text.splitlines() if line.startswith(prefix)]
    return {line[len(prefix) :].split('"')[0]: float(line.rsplit(" ", 1)[1]) for line in lines}


def test_a_preparation_that_would_lose_a_constraint_is_not_tried_again_until_the_history_grows(
    api: Api,
) -> None:
    rule = "Keep every one of these rules: " + " ".join(f"rule-{n} holds." for n in range(150))
    with webhook(delay=0) as hook, served(api, hook) as client:
        sid = new_session(client, provider="gpt-4o")
        posted = client.post(
            f"/v1/sessions/{sid}/messages", json={"messages": marked_history(rule=rule)}
        )
        assert posted.status_code == 201, posted.text
        tokens: int = client.get(f"/v1/sessions/{sid}").json()["tokens"]
        compaction = {
            "trigger_tokens": tokens * 5 // 4,
            "target_tokens": tokens * 2 // 5,
            "min_messages": 10,
            "summary_tokens": 300,
        }
        client.patch(f"/v1/sessions/{sid}", json={"compaction": compaction}).raise_for_status()
        compile_it(client, sid)
        deadline = time.monotonic() + 30
        while preparations(client).get("refused") != 1:
            assert time.monotonic() < deadline, preparations(client)
            time.sleep(0.05)
        for _ in range(3):  # the same history: not planned (nor summarised) again
            assert compile_it(client, sid)["compactions"] == []
        time.sleep(0.5)
        assert preparations(client) == {"refused": 1}
        # Another policy is another preparation (here refused again: the block still does not fit).
        compaction["summary_tokens"] = 301
        client.patch(f"/v1/sessions/{sid}", json={"compaction": compaction}).raise_for_status()
        compile_it(client, sid)
        deadline = time.monotonic() + 30
        while preparations(client).get("refused") != 2:
            assert time.monotonic() < deadline, preparations(client)
            time.sleep(0.05)
        # Over the trigger, the compile says why nothing was prepared.
        client.post(
            f"/v1/sessions/{sid}/messages",
            json={"messages": [{"role": "user", "content": "x " * 2000}]},
        ).raise_for_status()
        answer = compile_it(client, sid)
        assert answer["compactions"] == []
        assert any("refused" in w and checksum(rule) in w for w in answer["warnings"]), answer
        assert not any(PREPARING in w for w in answer["warnings"])
        # Grown by a tenth of its messages, the history is tried again.
        grow(client, sid)
        compile_it(client, sid)
        deadline = time.monotonic() + 30
        while preparations(client).get("refused") != 3:
            assert time.monotonic() < deadline, preparations(client)
            time.sleep(0.05)
        assert hook.calls == 0 and prepared_row(api.database_url, sid) is None


def test_a_preparation_whose_summary_would_shed_too_little_is_not_made_again_and_again(
    api: Api,
) -> None:
    settings = Settings(database_url=api.database_url, auth="keys", metrics_token=METRICS_TOKEN)
    with LiveServer(settings) as server, api.client() as client:  # the built-in ledger
        client.base_url = httpx.URL(server.url)
        probe = new_session(client, provider="gpt-4o")
        client.post(f"/v1/sessions/{probe}/messages", json={"messages": work_history(12)})
        tokens: int = client.get(f"/v1/sessions/{probe}").json()["tokens"]
        policy = {
            "trigger_tokens": tokens * 5 // 4,
            "target_tokens": tokens * 2 // 5,
            "min_messages": 10,
            "summary_tokens": 300,
        }
        # A preparation plans ahead: down to the low-water mark less the growth to the trigger.
        ahead = {
            **policy,
            "target_tokens": policy["target_tokens"] - policy["trigger_tokens"] + tokens,
        }
        done = client.post(
            f"/v1/sessions/{probe}/compact", json={"kind": "session", "policy": ahead}
        ).json()
        shed = done["tokens_before"] - done["tokens_after"]
        # Enough were the summary nothing, too little with the ledger's (budget-exact) one.
        least = round(100 * (shed + done["summary_tokens"] / 2) / done["tokens_before"], 2)
        sid = new_session(client, provider="gpt-4o", compaction={**policy, "min_shed_pct": least})
        client.post(f"/v1/sessions/{sid}/messages", json={"messages": work_history(12)})
        compile_it(client, sid)
        deadline = time.monotonic() + 30
        while not preparations(client):
            assert time.monotonic() < deadline, "no preparation ended"
            time.sleep(0.05)
        assert preparations(client) == {"none": 1}
        client.post(
            f"/v1/sessions/{sid}/messages",
            json={"messages": [{"role": "user", "content": "x " * 2000}]},
        ).raise_for_status()
        for _ in range(3):  # over the trigger: nothing swapped in, nothing summarised again
            assert compile_it(client, sid)["compactions"] == []
        time.sleep(0.5)
        assert preparations(client) == {"none": 1}
        assert prepared_row(api.database_url, sid) is None


def test_when_a_compaction_was_prepared_and_its_economics_are_carried_by_export_and_import(
    api: Api,
) -> None:
    with webhook(delay=0) as hook, served(api, hook) as client:
        sid, _ = session_past_the_mark(client)
        compile_it(client, sid)
        wait_prepared(api.database_url, sid)
        grow(client, sid)
        [done] = compile_it(client, sid)["compactions"]
        url = f"/v1/sessions/{sid}/compactions/{done['id']}"
        record = client.get(url).json()
        assert record["prepared_at"] is not None and record["economics"]["applied"] is True
        exported = client.get(f"/v1/sessions/{sid}/export").json()
        assert client.delete(f"/v1/sessions/{sid}").status_code == 204
        imported = client.post("/v1/sessions/import", json=exported)
        assert imported.status_code == 201, imported.text
        assert client.get(url).json() == record


def test_deleting_a_session_with_a_prepared_compaction_deletes_it(api: Api) -> None:
    with webhook(delay=0) as hook, served(api, hook) as client:
        sid, _ = session_past_the_mark(client)
        compile_it(client, sid)
        wait_prepared(api.database_url, sid)
        before = row_counts(api.database_url)
        assert client.delete(f"/v1/sessions/{sid}").status_code == 204
        after = row_counts(api.database_url)
        assert after["prepared_compactions"] == before["prepared_compactions"] - 1


def test_a_refused_preparation_is_replaced_when_one_planned_on_the_history_now_would_pay(
    api: Api,
) -> None:
    with webhook(delay=0) as hook, served(api, hook) as client:
        sid, _ = session_past_the_mark(client, expected_turns=20)
        client.patch(f"/v1/sessions/{sid}", json={"provider": "anthropic"}).raise_for_status()
        compile_it(client, sid)
        stale = wait_prepared(api.database_url, sid)
        # The history doubles: the preparation sheds what it shed at the mark, but rewrites all
        # that grew since; one planned now sheds the growth too.
        grow(client, sid, rounds=24)
        with stream(client, sid, after=0) as events:
            answer = compile_it(client, sid)
            _, end = events.read(2)
        assert answer["compactions"] == [] and any(PREPARING in w for w in answer["warnings"])
        assert end.data["outcome"] == "skipped" and "prompt cache" in end.data["skipped"]
        fresh = wait_prepared(api.database_url, sid)
        assert fresh["seqs"] != stale["seqs"] and hook.calls == 2
        [done] = compile_it(client, sid)["compactions"]
        assert done["prepared_at"] is not None and done["economics"]["applied"] is True
        assert done["economics"]["shed_tokens"] > end.data["economics"]["shed_tokens"]
        assert done["economics"]["rewrite_tokens"] < end.data["economics"]["rewrite_tokens"]


def test_a_preparation_by_another_summariser_than_the_policy_names_now_is_not_swapped_in(
    api: Api,
) -> None:
    with webhook(delay=0) as hook, served(api, hook) as client:
        sid, _ = session_past_the_mark(client)
        compile_it(client, sid)
        wait_prepared(api.database_url, sid)  # by the webhook, the default
        grow(client, sid)
        ledger = {"summarizer": {"profile": "ledger"}}
        answer = compile_it(client, sid, compaction=ledger)
        assert answer["compactions"] == []  # discarded, and one prepared by the ledger
        assert any(PREPARING in w for w in answer["warnings"])
        wait_prepared(api.database_url, sid)
        with stream(client, sid, after=0) as events:
            [done] = compile_it(client, sid, compaction=ledger)["compactions"]
            _, end = events.read(2)
        assert hook.calls == 1
        assert (done["summarizer"], done["summarizer_reason"]) == ("ledger", None)
        assert (end.data["summarizer"], end.data["summarizer_reason"]) == ("ledger", None)


def test_a_preparation_made_before_the_deployment_changed_its_summariser_is_not_swapped_in(
    api: Api,
) -> None:
    with webhook(delay=0) as hook:
        with served(api, hook) as client:
            sid, _ = session_past_the_mark(client)
            compile_it(client, sid)
            wait_prepared(api.database_url, sid)  # by the webhook
        with LiveServer(Settings(database_url=api.database_url, auth="keys")) as server:
            client = api.client()
            client.base_url = httpx.URL(server.url)
            with client:
                grow(client, sid)
                assert compile_it(client, sid)["compactions"] == []  # discarded
                wait_prepared(api.database_url, sid)  # by the ledger, the default now
                [done] = compile_it(client, sid)["compactions"]
    assert hook.calls == 1
    assert (done["summarizer"], done["summarizer_reason"]) == ("ledger", None)
