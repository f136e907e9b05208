"""Summarisation compaction over HTTP, on both databases: what it archives (exactly as stored),
what it leaves, the summary, the stateful-profile reset and one compaction at a time."""

from __future__ import annotations

import asyncio
import itertools
import json
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest

from app.adapters.summarizers import Summary
from app.adapters.summarizers.base import Source
from app.adapters.summarizers.extractive import Extractive
from app.adapters.tokenizers import load_counter
from app.domain.compilers.registry import BUILTINS
from app.domain.messages import Message
from app.domain.models import BUILTIN_CATALOG
from app.domain.summaries import Reason
from app.domain.tokens import TokenCounter
from app.services import compiling
from app.services.compaction.compacting import compact_due, compact_now
from app.services.compaction.compactor import Compactor, Deployment
from app.services.compaction.refusals import NotCompacted
from app.services.compaction.reports import Report
from app.services.sessions import session_profile
from app.services.sessions.cache import MessageCache
from app.services.tenancy.keys import authenticate
from app.storage import queries
from app.storage.db import create_engine, create_sessionmaker
from tests.api.sse import stream
from tests.api.test_compile import valid
from tests.conftest import Api, new_session, row_counts

# Compaction itself, inline in the compile over the trigger (not prepared in the background:
# tests/api/test_background_compaction.py covers that).
POLICY = {
    "trigger_tokens": 2_000,
    "target_tokens": 800,
    "min_messages": 10,
    "summary_tokens": 300,
    "background": False,
}


def work_history(rounds: int) -> list[dict[str, Any]]:
    """A coding session: a goal, then reads of distinct files with their contents."""
    out: list[dict[str, Any]] = [
        {"role": "user", "content": "Fix the flaky test in tests/test_sync.py; keep the API."}
    ]
    for n in range(rounds):
        path = f"src/pkg/module_{n}.py"
        body = "\n".join(f"def handler_{n}_{k}(event):\n    return event" for k in range(12))
        out += [
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": f"call_{n}",
                        "type": "function",
                        "function": {"name": "read_file", "arguments": json.dumps({"path": path})},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": f"call_{n}", "content": body},
        ]
    out += [
        {"role": "assistant", "content": "I read them all."},
        {"role": "user", "content": "Now fix it."},
    ]
    return out


def session_with(client: httpx.Client, rounds: int = 12, **fields: Any) -> str:
    sid = new_session(client, **{"provider": "gpt-4o", **fields})
    posted = client.post(f"/v1/sessions/{sid}/messages", json={"messages": work_history(rounds)})
    assert posted.status_code == 201, posted.text
    return sid


def canonical(client: httpx.Client, sid: str) -> list[dict[str, Any]]:
    page = client.get(f"/v1/sessions/{sid}/messages", params={"limit": 1000}).json()
    items: list[dict[str, Any]] = page["items"]
    return items


def compact(client: httpx.Client, sid: str, **body: Any) -> httpx.Response:
    return client.post(f"/v1/sessions/{sid}/compact", json=body)


def test_a_full_compaction_archives_exactly_what_it_summarised(client: httpx.Client) -> None:
    sid = session_with(client, compaction=POLICY)
    before = canonical(client, sid)
    done = compact(client, sid, kind="full")
    assert done.status_code == 201, done.text
    record = done.json()
    assert record["kind"] == "full" and record["reason"] == "reactive_full"
    # Everything but the opening task, the newest two API rounds (the last read, the closing
    # remark) and the current prompt: 2..23 of 27.
    assert (record["seq_from"], record["seq_to"], record["summary_seq"]) == (2, 23, 23)
    detail = client.get(f"/v1/sessions/{sid}/compactions/{record['id']}").json()
    archived = [
        {k: a[k] for k in ("seq", "section", "created_at", "message")} for a in detail["archived"]
    ]
    expected = [
        {k: m[k] for k in ("seq", "section", "created_at", "message")} for m in before[1:23]
    ]
    assert archived == expected
    assert record["messages"] == 22
    after = canonical(client, sid)
    assert [m["seq"] for m in after] == [1, 23, 24, 25, 26, 27]
    assert after[0]["message"] == before[0]["message"]  # the task, as it was
    summary = after[1]
    assert summary["section"] == "summary"
    text = summary["message"]["content"][0]["text"]
    assert text.startswith("[Summary of the earlier conversation]")
    for n in range(11):  # every file path of the summarised part is in the summary
        assert f"src/pkg/module_{n}.py" in text
    assert record["tokens_removed"] == sum(m["tokens"] for m in before[1:23])
    assert (
        record["tokens_after"]
        == record["tokens_before"] - record["tokens_removed"] + (record["summary_tokens"])
    )
    assert record["summary_tokens"] == summary["tokens"]
    assert record["cache_rewrite_tokens"] == sum(m["tokens"] for m in after[1:])
    assert record["summarizer"] == "ledger"
    listed = client.get(f"/v1/sessions/{sid}/compactions").json()["items"]
    assert [c["id"] for c in listed] == [record["id"]]
    # The compiled view opens with the task as it was sent, then the summary (issue 29 item 7),
    # and stays provider-valid.
    answer = valid(client.post(f"/v1/sessions/{sid}/compile", json={}).json())
    assert answer["messages"][0]["content"] == before[0]["message"]["content"][0]["text"]
    assert answer["messages"][1]["content"].startswith("[Summary of the earlier conversation]")
    # An archived call's original is still found by its id.
    found = client.get(f"/v1/sessions/{sid}/tool-calls/call_3").json()
    assert found["arguments"] == {"path": "src/pkg/module_3.py"} and found["result"]["seq"] == 9


def test_micro_takes_the_oldest_rounds_and_a_second_compaction_folds_the_first(
    client: httpx.Client,
) -> None:
    sid = session_with(client, compaction=POLICY)
    first = compact(client, sid, kind="micro").json()
    # Two API rounds (a read with its result each) after the opening task: seqs 2-5.
    assert (first["seq_from"], first["seq_to"]) == (2, 5)
    second = compact(client, sid, kind="micro", policy={"micro_batch_groups": 3}).json()
    assert second["seq_from"] == 5  # the first summary is summarised again
    summary = canonical(client, sid)[1]
    assert summary["seq"] == second["seq_to"]
    assert "src/pkg/module_0.py" in summary["message"]["content"][0]["text"]


def test_a_compile_after_a_summary_takes_a_seq_again_sends_the_summary(
    client: httpx.Client,
) -> None:
    """Stored messages are parsed once and kept by session, seq and write time: a compile
    after a compaction whose summary takes the seq of a message compiled before (twice: the
    second summary takes the first one's) sends what is stored now, as a fresh server would."""
    sid = session_with(client)
    compiled = [client.post(f"/v1/sessions/{sid}/compile", json={}).json()]
    for groups in (2, 3):
        done = compact(client, sid, kind="micro", policy={**POLICY, "micro_batch_groups": groups})
        assert done.status_code == 201, done.text
        compiled.append(valid(client.post(f"/v1/sessions/{sid}/compile", json={}).json()))
        stored = canonical(client, sid)
        summary = next(m for m in stored if m["seq"] == done.json()["summary_seq"])
        sent = [m["content"] for m in compiled[-1]["messages"]]
        assert summary["message"]["content"][0]["text"] in sent
        assert len(sent) == len(stored)
    assert compiled[0]["messages"] != compiled[1]["messages"] != compiled[2]["messages"]


def test_session_kind_compacts_down_to_the_low_water_mark(client: httpx.Client) -> None:
    sid = session_with(client, rounds=20, compaction=POLICY)
    record = compact(client, sid, kind="session").json()
    assert record["reason"] == "session_compaction"
    # What stays is down to the low-water mark, with room reserved for the summary (its real
    # size is the summariser's).
    left = sum(m["tokens"] for m in canonical(client, sid) if m["section"] != "summary")
    assert left + POLICY["summary_tokens"] <= POLICY["target_tokens"]
    assert record["tokens_after"] == left + record["summary_tokens"] < record["tokens_before"]


def test_nothing_to_compact_is_a_409_and_bad_policies_a_422(api: Api, client: httpx.Client) -> None:
    sid = new_session(client, provider="gpt-4o")
    hello = {"messages": [{"role": "user", "content": "hi"}]}
    client.post(f"/v1/sessions/{sid}/messages", json=hello).raise_for_status()
    assert compact(client, sid, kind="full").status_code == 409
    before = row_counts(api.database_url)
    bad = client.post(
        "/v1/sessions", json={"compaction": {"trigger_tokens": 10, "target_tokens": 20}}
    )
    assert bad.status_code == 422 and bad.json()["errors"][0]["path"] == "body.compaction"
    unknown = compact(client, sid, kind="full", policy={"micro_trigger": 3})
    assert unknown.status_code == 422
    assert unknown.json()["errors"][0]["path"] == "body.policy.micro_trigger"
    assert compact(client, sid, kind="sideways").status_code == 422
    assert row_counts(api.database_url) == before
    assert client.get(f"/v1/sessions/{sid}/compactions/nope").status_code == 422
    missing = "00000000-0000-0000-0000-000000000000"
    assert client.get(f"/v1/sessions/{sid}/compactions/{missing}").status_code == 404


def test_a_stateful_provider_session_ends_with_a_compaction(client: httpx.Client) -> None:
    sid = session_with(client, provider="codex-cli", compaction=POLICY)
    first = client.post(f"/v1/sessions/{sid}/compile", json={}).json()
    ack = {"compile_id": first["compile_id"], "provider_session_id": "thread-1"}
    client.post(f"/v1/sessions/{sid}/cursor", json=ack).raise_for_status()
    record = compact(client, sid, kind="full").json()
    assert record["resets_provider_session"] is True
    session = client.get(f"/v1/sessions/{sid}").json()
    assert session["cursor_seq"] is None and session["provider_session_id"] is None
    answer = client.post(f"/v1/sessions/{sid}/compile", json={}).json()
    assert answer["mode"] == "full"


def test_two_concurrent_compactions_of_a_session_make_one(api: Api, client: httpx.Client) -> None:
    sid = session_with(client, compaction=POLICY)

    def run(_: int) -> int:
        with api.client() as c:
            return compact(c, sid, kind="full").status_code

    with ThreadPoolExecutor(4) as pool:
        codes = sorted(pool.map(run, range(4)))
    assert codes.count(201) == 1 and set(codes) <= {201, 409}
    assert len(client.get(f"/v1/sessions/{sid}/compactions").json()["items"]) == 1


def test_compactions_belong_to_their_tenant(api: Api, client: httpx.Client) -> None:
    sid = session_with(client, compaction=POLICY)
    record = compact(client, sid, kind="full").json()
    with api.client(api.key_b) as other:
        assert other.get(f"/v1/sessions/{sid}/compactions").status_code == 404
        assert other.get(f"/v1/sessions/{sid}/compactions/{record['id']}").status_code == 404
        assert compact(other, sid, kind="full").status_code == 404


def test_a_session_compaction_is_announced_start_then_end(client: httpx.Client) -> None:
    sid = session_with(client, rounds=20, compaction=POLICY)
    with stream(client, sid) as events:
        record = compact(client, sid, kind="session").json()
        start, end = events.read(2)
    assert (start.event, end.event) == ("context_compaction_start", "context_compaction_end")
    assert start.id < end.id
    assert start.data["kind"] == "session" and start.data["reason"] == "session_compaction"
    assert start.data["tokens_before"] == end.data["tokens_before"] == record["tokens_before"]
    assert end.data["compaction_id"] == record["id"]
    assert end.data["tokens_after"] == record["tokens_after"]
    assert end.data["budget_used_pct"] == round(100 * record["tokens_after"] / 128_000, 2)
    assert end.data["messages_before"] == 43 and end.data["messages_after"] == (
        43 - record["messages"] + 1
    )


def test_a_reactive_kind_is_announced_as_one_compaction_event(client: httpx.Client) -> None:
    sid = session_with(client, compaction=POLICY)
    with stream(client, sid) as events:
        record = compact(client, sid, kind="micro").json()
        [event] = events.read(1)
    assert event.event == "compaction"
    assert event.data["compaction_id"] == record["id"] and event.data["kind"] == "micro"
    assert (event.data["messages_before"], event.data["messages_after"]) == (27, 24)
    assert event.data["tokens_before"] == record["tokens_before"]


def compile_it(client: httpx.Client, sid: str, **body: Any) -> dict[str, Any]:
    response = client.post(f"/v1/sessions/{sid}/compile", json=body)
    assert response.status_code == 200, response.text
    return valid(response.json())


QUIET = {**POLICY, "trigger_tokens": 1_000_000, "target_tokens": 500_000}  # no boundary runs


def test_a_compile_over_the_trigger_compacts_first(client: httpx.Client) -> None:
    sid = session_with(client, rounds=20, compaction=POLICY)
    with stream(client, sid) as events:
        answer = compile_it(client, sid)
        kinds = [e.event for e in events.read(2)]
    assert kinds == ["context_compaction_start", "context_compaction_end"]
    [done] = answer["compactions"]
    assert done["kind"] == "session" and done["reason"] == "session_compaction"
    assert answer["messages"][1]["content"].startswith("[Summary of the earlier conversation]")
    assert answer["tokens"]["sections"]["summary"] == done["summary_tokens"]
    assert done["tokens_after"] < done["tokens_before"]
    # Had the history stayed over the trigger, the next compile would compact again.
    stored = sum(m["tokens"] for m in canonical(client, sid))
    assert stored == done["tokens_after"]
    again = compile_it(client, sid)["compactions"]
    assert (again == []) == (stored <= POLICY["trigger_tokens"] or len(canonical(client, sid)) < 10)


# A policy measuring the history as sent finds by reads alone, in the compile's own, that no
# report calls for a compaction; the reports that do are acted on as under the other.
MEASURES = ("stored", "sent")


@pytest.mark.parametrize("measure", MEASURES)
def test_reported_usage_drives_reactive_compaction_once(client: httpx.Client, measure: str) -> None:
    policy = {**QUIET, "measure": measure}
    sid = session_with(client, compaction=policy, context_window=10_000)
    first = compile_it(client, sid)
    assert first["compactions"] == []
    ack = {"compile_id": first["compile_id"], "usage": {"prompt_tokens": 8_800}}
    client.post(f"/v1/sessions/{sid}/cursor", json=ack).raise_for_status()
    second = compile_it(client, sid)
    assert [c["kind"] for c in second["compactions"]][:1] == ["micro"]  # 88%: micro
    assert compile_it(client, sid)["compactions"] == []  # that report was acted on


def due_begun(api: Api, sid: str, report: Report | None = None) -> tuple[list[str], bool]:
    """The kinds ``compact_due`` runs for the session ``sid`` as a compile with ``report`` asks,
    and whether it awaited ``begin`` (the compile leaving its autocommit reads)."""

    async def run() -> tuple[list[str], bool]:
        engine = create_engine(api.database_url)
        begun: list[bool] = []

        async def begin() -> None:
            begun.append(True)

        try:
            async with create_sessionmaker(engine)() as db:
                tenant = await authenticate(db, api.key_a)
                assert tenant is not None
                row = await queries.session_row(db, tenant, sid)
                assert row is not None
                counter = load_counter()
                summarizer = Extractive(counter.encoder("o200k_base").count, 2_000)
                deployment = Deployment(counter, summarizer, BUILTIN_CATALOG)
                compactor = Compactor(db, deployment, datetime.now(UTC))
                profile = session_profile(row, BUILTIN_CATALOG)
                done = await compact_due(compactor, row, profile, None, None, report, begin)
                await db.commit()
                return [d.row.kind for d in done], bool(begun)
        finally:
            await engine.dispose()

    return asyncio.run(run())


def test_a_compile_leaves_its_reads_only_when_a_compaction_may_be_due(
    api: Api, client: httpx.Client
) -> None:
    """``compact_due`` awaits ``begin`` before any compaction, and under a policy measuring the
    history as sent not at all while no report calls for one (nor without an enabled policy)."""
    sent = session_with(client, compaction={**QUIET, "measure": "sent"}, context_window=10_000)
    assert due_begun(api, sent) == ([], False)
    assert due_begun(api, sent, Report(prompt_tokens=1_000)) == ([], False)
    kinds, begun = due_begun(api, sent, Report(prompt_tokens=8_800))
    assert kinds[:1] == ["micro"] and begun
    assert due_begun(api, sent, Report(too_long=True)) == (["full"], True)
    stored = session_with(client, compaction=QUIET)
    assert due_begun(api, stored) == ([], True)  # its boundary compaction reads the history
    off = session_with(client, compaction={**QUIET, "enabled": False})
    assert due_begun(api, off) == ([], False)


@pytest.mark.parametrize("measure", MEASURES)
def test_prompt_too_long_calls_for_a_full_compaction(client: httpx.Client, measure: str) -> None:
    sid = session_with(client, compaction={**QUIET, "measure": measure})
    first = compile_it(client, sid)
    ack = {"compile_id": first["compile_id"], "error_kind": "prompt_too_long"}
    client.post(f"/v1/sessions/{sid}/cursor", json=ack).raise_for_status()
    [done] = compile_it(client, sid)["compactions"]
    assert done["kind"] == "full" and done["reason"] == "reactive_full"


def test_usage_on_the_compile_request_itself_and_the_per_request_cap(
    client: httpx.Client,
) -> None:
    sid = session_with(client, rounds=20, compaction=QUIET, context_window=10_000)
    policy = {
        "micro_trigger_pct": 50,
        "full_trigger_pct": 100,
        "max_reactive_compactions_per_request": 2,
    }
    answer = compile_it(client, sid, usage={"prompt_tokens": 9_900}, compaction=policy)
    assert [c["kind"] for c in answer["compactions"]] == ["micro", "micro"]
    bad = client.post(f"/v1/sessions/{sid}/compile", json={"compaction": {"trigger": 1}})
    assert bad.status_code == 422
    assert bad.json()["errors"][0]["path"] == "body.compaction.trigger"


def test_a_compaction_at_compile_starts_a_new_provider_session(client: httpx.Client) -> None:
    sid = session_with(client, provider="codex-cli", compaction=QUIET)
    first = compile_it(client, sid)
    ack = {
        "compile_id": first["compile_id"],
        "provider_session_id": "thread-1",
        "usage": {"prompt_tokens": 190_000},
    }
    client.post(f"/v1/sessions/{sid}/cursor", json=ack).raise_for_status()
    answer = compile_it(client, sid)
    [done] = answer["compactions"]
    assert done["kind"] == "full" and done["resets_provider_session"] is True
    assert answer["mode"] == "full"
    assert "a compaction ended the provider session" in answer["warnings"][0]


def test_originals_survive_chained_compactions(client: httpx.Client) -> None:
    sid = session_with(client, compaction=POLICY)
    compact(client, sid, kind="micro").raise_for_status()
    compact(client, sid, kind="micro", policy={"micro_batch_groups": 3}).raise_for_status()
    found = client.get(f"/v1/sessions/{sid}/tool-calls/call_0").json()
    assert found["arguments"] == {"path": "src/pkg/module_0.py"}
    assert found["result"]["content"].startswith("def handler_0_0(event):")
    listed = client.get(f"/v1/sessions/{sid}/compactions").json()["items"]
    assert [c["seq_from"] for c in listed] == [2, 5]  # in the order they ran


def test_a_summary_no_smaller_than_what_it_replaces_is_not_written(
    api: Api, client: httpx.Client
) -> None:
    sid = new_session(client, provider="gpt-4o")
    tiny = [
        m
        for n in range(4)
        for m in ({"role": "user", "content": "hi"}, {"role": "assistant", "content": "ok"})
    ]
    client.post(f"/v1/sessions/{sid}/messages", json={"messages": tiny}).raise_for_status()
    before = row_counts(api.database_url)
    # The extractive summariser's header alone outweighs these (the ledger's would not).
    extractive = {"preserve_recent_api_rounds": 1, "summarizer": {"profile": "extractive"}}
    refused = compact(client, sid, kind="full", policy=extractive)
    assert refused.status_code == 409 and "would not be smaller" in refused.json()["detail"]
    assert row_counts(api.database_url)["messages"] == before["messages"]
    assert row_counts(api.database_url)["compactions"] == before["compactions"]


def test_a_report_is_acted_on_once_even_when_repeated(client: httpx.Client) -> None:
    sid = session_with(client, rounds=20, compaction=QUIET, context_window=10_000)
    first = compile_it(client, sid)
    ack = {"compile_id": first["compile_id"], "usage": {"prompt_tokens": 8_800}}
    client.post(f"/v1/sessions/{sid}/cursor", json=ack).raise_for_status()
    assert compile_it(client, sid)["compactions"] != []
    client.post(f"/v1/sessions/{sid}/cursor", json=ack).raise_for_status()  # the same again
    assert compile_it(client, sid)["compactions"] == []


def test_a_compile_from_before_a_resetting_compaction_cannot_revive_the_session(
    client: httpx.Client,
) -> None:
    sid = session_with(client, provider="codex-cli", compaction=POLICY)
    first = compile_it(client, sid)
    ack = {"compile_id": first["compile_id"], "provider_session_id": "thread-1"}
    client.post(f"/v1/sessions/{sid}/cursor", json=ack).raise_for_status()
    more = {"messages": [{"role": "user", "content": "and the docs?"}]}
    client.post(f"/v1/sessions/{sid}/messages", json=more).raise_for_status()
    old = compile_it(client, sid)  # a delta, made before the compaction
    assert old["mode"] == "delta"
    compact(client, sid, kind="full").raise_for_status()
    late = {"compile_id": old["compile_id"], "provider_session_id": "thread-1"}
    assert client.post(f"/v1/sessions/{sid}/cursor", json=late).json()["advanced"] is False
    session = client.get(f"/v1/sessions/{sid}").json()
    assert session["cursor_seq"] is None and session["provider_session_id"] is None


class HeldSummarizer:
    """Our summariser interface, holding each summary until released: two compactions of one
    session can then be made to race (the summariser is the only stand-in here)."""

    def __init__(self) -> None:
        self.waiting = asyncio.Event()
        self.release = asyncio.Event()

    async def summarize(
        self,
        messages: Sequence[Message],
        reason: Reason,
        max_tokens: int | None = None,
        source: Source | None = None,
    ) -> Summary:
        self.waiting.set()
        await self.release.wait()
        return Summary(f"{len(messages)} messages about src/pkg", "held")

    async def aclose(self) -> None:
        return None


class CountingSummarizer:
    """The extractive summariser, counting its calls."""

    def __init__(self, counter: TokenCounter) -> None:
        self.inner = Extractive(counter.encoder("o200k_base").count, 2_000)
        self.calls = 0

    async def summarize(
        self,
        messages: Sequence[Message],
        reason: Reason,
        max_tokens: int | None = None,
        source: Source | None = None,
    ) -> Summary:
        self.calls += 1
        return await self.inner.summarize(messages, reason, max_tokens, source)

    async def aclose(self) -> None:
        return None


def test_a_compaction_that_finds_the_lease_held_calls_no_summariser(
    api: Api, client: httpx.Client
) -> None:
    sid = session_with(client, rounds=20, compaction=POLICY)

    async def race() -> tuple[int, int]:
        engine = create_engine(api.database_url)
        maker = create_sessionmaker(engine)
        counter = load_counter()
        held = HeldSummarizer()
        try:
            async with maker() as slow_db, maker() as fast_db:
                async with maker() as keys_db:
                    tenant = await authenticate(keys_db, api.key_a)
                assert tenant is not None
                now = datetime.now(UTC)
                slow = Compactor(slow_db, Deployment(counter, held, BUILTIN_CATALOG), now)
                slow_ctx = compiling.Context(
                    MessageCache(counter, 1 << 20),
                    BUILTINS,
                    BUILTIN_CATALOG,
                    tenant,
                    now,
                    slow_db,
                    slow,
                )
                compile_task = asyncio.create_task(
                    compiling.compile_session(slow_ctx, sid, compiling.Options())
                )
                await held.waiting.wait()  # the compile's compaction is summarising...
                counting = CountingSummarizer(counter)
                fast = Compactor(fast_db, Deployment(counter, counting, BUILTIN_CATALOG), now)
                with pytest.raises(NotCompacted, match="is running"):  # ... it holds the lease
                    await compact_now(fast, tenant, sid, "session", None)
                fast_ctx = compiling.Context(
                    MessageCache(counter, 1 << 20),
                    BUILTINS,
                    BUILTIN_CATALOG,
                    tenant,
                    now,
                    fast_db,
                    fast,
                )
                loser = await compiling.compile_session(fast_ctx, sid, compiling.Options())
                assert loser.compactions == ()  # compiled without waiting
                assert "compiled without waiting" in loser.output.warnings[0]
                held.release.set()
                compiled = await compile_task
                return len(compiled.compactions), counting.calls
        finally:
            await engine.dispose()

    compacted, calls = asyncio.run(race())
    assert (compacted, calls) == (1, 0)
    assert len(client.get(f"/v1/sessions/{sid}/compactions").json()["items"]) == 1


def test_a_policy_measuring_the_history_as_sent_compacts_by_what_is_sent(
    client: httpx.Client,
) -> None:
    """``measure: "sent"``: the previews count, not the stored results, and the tools and the
    system prompt are the fixed part beside the history."""
    previews = {
        "name": "compact_tool_results",
        "params": {
            "max_tokens": 200,
            "head_tokens": 80,
            "tail_tokens": 80,
            "newest_max_tokens": 200,
        },
    }
    policy = {
        "measure": "sent",
        "trigger_tokens": 2_000,
        "target_tokens": 700,
        "summary_tokens": 200,
        "min_messages": 2,
    }
    sid = new_session(
        client,
        provider="gpt-4o",
        compaction=policy,
        compiler={"decorators": [previews, "token_limit"]},
    )
    tools = [{"type": "function", "function": {"name": "read_file", "description": "x " * 3_000}}]
    system = {"role": "system", "content": "Rules. " * 2_000}
    posted = client.post(f"/v1/sessions/{sid}/messages", json={"messages": [system]})
    assert posted.status_code == 201
    for n in range(16):
        body = "\n".join(f"line {k}: value_{n}_{k} = compute(alpha_{k % 7})" for k in range(90))
        rounds = [{"role": "user", "content": f"Read module {n}."}]
        rounds += work_history(1)[1:3]  # a read of about 1,000 tokens
        rounds[-1] = {**rounds[-1], "content": body}
        assert client.post(f"/v1/sessions/{sid}/messages", json={"messages": rounds}).status_code
        answer = client.post(f"/v1/sessions/{sid}/compile", json={"tools": tools})
        assert answer.status_code == 200, answer.text
    records = client.get(f"/v1/sessions/{sid}/compactions").json()["items"]
    # Stored, 16 reads of 1,000 tokens pass a 2,000-token trigger every other turn; as sent
    # (previews of 200) far less often, and the 4,000 tokens of tools and system never count.
    assert 1 <= len(records) <= 3
    for record in records:
        assert record["kind"] == "session"
        assert 2_000 < record["tokens_before"] < 3_000 and record["tokens_after"] <= 700


def test_a_history_as_sent_that_fits_is_not_compacted_two_compiles_in_a_row(
    client: httpx.Client,
) -> None:
    """A task that alone nearly reaches the trigger leaves every compaction over it: what fits
    the window waits a compile after a compaction, rather than compacting on every one."""
    policy = {
        "measure": "sent",
        "trigger_tokens": 2_000,
        "target_tokens": 700,
        "summary_tokens": 200,
        "min_messages": 2,
    }
    sid = new_session(client, provider="gpt-4o", compaction=policy)
    task = {"role": "user", "content": "Fix it. " + "Keep the API stable. " * 370}
    assert client.post(f"/v1/sessions/{sid}/messages", json={"messages": [task]}).status_code
    ran = []
    for n in range(12):
        rounds = [*work_history(2)[1:5], {"role": "assistant", "content": f"Read {n}."}]
        posted = client.post(f"/v1/sessions/{sid}/messages", json={"messages": rounds})
        assert posted.status_code == 201
        answer = client.post(f"/v1/sessions/{sid}/compile", json={})
        assert answer.status_code == 200, answer.text
        ran.append(len(answer.json()["compactions"]))
    assert sum(ran) >= 2
    assert all(not (a and b) for a, b in itertools.pairwise(ran)), ran
