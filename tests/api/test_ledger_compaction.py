"""The ledger summariser through the service, on both databases: two compactions over HTTP, the
second merging the first summary entry by entry; the loss report on the compaction record and
its counts in the events."""

from __future__ import annotations

import uuid
from typing import Any

import httpx

from tests.api.sse import stream
from tests.conftest import new_session

POLICY = {
    "trigger_tokens": 2_000,
    "target_tokens": 800,
    "min_messages": 4,
    "summary_tokens": 400,
    "preserve_recent_api_rounds": 1,
}


def turns(*texts: str) -> list[dict[str, Any]]:
    roles = ("user", "assistant")
    return [{"role": roles[n % 2], "content": text} for n, text in enumerate(texts)]


def append(client: httpx.Client, sid: str, messages: list[dict[str, Any]]) -> None:
    posted = client.post(f"/v1/sessions/{sid}/messages", json={"messages": messages})
    assert posted.status_code == 201, posted.text


def summary_text(client: httpx.Client, sid: str) -> str:
    items = client.get(f"/v1/sessions/{sid}/messages", params={"limit": 1000}).json()["items"]
    [summary] = [m for m in items if m["section"] == "summary"]
    text: str = summary["message"]["content"][0]["text"]
    return text


def test_a_second_compaction_merges_the_first_ledger(client: httpx.Client) -> None:
    sid = new_session(client, provider="gpt-4o", compaction=POLICY)
    append(
        client,
        sid,
        turns(
            "Let us work on the parser.",
            "Sure.",
            "RULE: Never push to main without a review.",
            "Noted.",
            "FACT: The staging database is db-stage-7 in eu-west-2.",
            "Noted.",
            "HARD CONSTRAINT: Budget cap is $400 total.",
            "Noted.",
            "Current task is the parser rewrite.",
            "Done.",
            "Looking at the logs.",
            "Done.",
        ),
    )
    with stream(client, sid) as events:
        first = client.post(f"/v1/sessions/{sid}/compact", json={"kind": "full"})
        assert first.status_code == 201, first.text
        [event] = events.read(1)
    assert event.event == "compaction"
    assert event.data["loss"]["kept"] >= 3 and event.data["loss"]["dropped"] == 0
    text = summary_text(client, sid)
    assert "Rules:\nNever push to main without a review. @3" in text
    assert "$400" in text and "db-stage-7" in text
    append(
        client,
        sid,
        turns(
            "HARD CONSTRAINT: Budget cap is $850 total.",
            "Noted.",
            "RULE: Never push to main without a review.",
            "Understood, no pushes.",
            "Reading the parser tests.",
            "Done.",
        ),
    )
    second = client.post(f"/v1/sessions/{sid}/compact", json={"kind": "full"})
    assert second.status_code == 201, second.text
    text = summary_text(client, sid)
    assert "$850" in text and "$400" not in text  # the later value replaced the earlier
    assert "db-stage-7" in text  # carried over from the first summary
    assert text.count("Never push to main") == 1  # folded, with both pointers
    detail = client.get(f"/v1/sessions/{sid}/compactions/{second.json()['id']}").json()
    loss = detail["loss"]
    assert [e["text"] for e in loss["replaced"]] == ["Budget cap is $400 total."]
    assert loss["replaced"][0]["seqs"] == [7]
    assert any(e["text"].startswith("Never push to main") for e in loss["merged"])
    assert loss["counts"]["replaced"] == 1 and loss["counts"]["merged"] >= 1
    listed = client.get(f"/v1/sessions/{sid}/compactions").json()["items"]
    assert len(listed) == 2


def test_the_ledger_keeps_to_a_small_budget_and_points_at_what_it_left_out(
    client: httpx.Client,
) -> None:
    policy = {**POLICY, "summary_tokens": 800, "trigger_tokens": 4_000, "target_tokens": 2_000}
    sid = new_session(client, provider="gpt-4o", compaction=policy)
    names = [f"{a}{b}" for a in "pqrstuvwxy" for b in "abcdefghij"]  # distinct subjects
    append(
        client,
        sid,
        turns(
            "Let us list the queues.",
            "Sure.",
            *(f"FACT: The {name} queue holds {100 + n} jobs." for n, name in enumerate(names)),
            "Done.",
            "Thanks.",
        ),
    )
    done = client.post(f"/v1/sessions/{sid}/compact", json={"kind": "full"})
    assert done.status_code == 201, done.text
    record = done.json()
    assert record["summary_tokens"] <= 800
    detail = client.get(f"/v1/sessions/{sid}/compactions/{record['id']}").json()
    assert detail["loss"]["counts"]["dropped"] > 0
    assert "Left out, by seq:" in summary_text(client, sid)
    dropped = detail["loss"]["dropped"][0]["seqs"][0]
    archived = {a["seq"] for a in detail["archived"]}
    assert dropped in archived  # reachable in the compaction's archive


def test_the_loss_report_is_carried_by_export_and_import(client: httpx.Client) -> None:
    sid = new_session(client, id=f"x-{uuid.uuid4().hex}", provider="gpt-4o", compaction=POLICY)
    append(
        client,
        sid,
        turns(
            "Let us work on the parser.",
            "Sure.",
            "FACT: Budget cap is $400 total.",
            "Noted.",
            "FACT: Budget cap is $850 total.",
            "Noted.",
            "Looking at the logs.",
            "Done.",
        ),
    )
    done = client.post(f"/v1/sessions/{sid}/compact", json={"kind": "full"})
    assert done.status_code == 201, done.text
    url = f"/v1/sessions/{sid}/compactions/{done.json()['id']}"
    loss = client.get(url).json()["loss"]
    exported = client.get(f"/v1/sessions/{sid}/export").json()
    [record] = exported["compactions"]
    assert record["loss"] == loss and loss["counts"]["replaced"] == 1
    assert client.delete(f"/v1/sessions/{sid}").status_code == 204
    assert client.post("/v1/sessions/import", json=exported).status_code == 201
    assert client.get(url).json()["loss"] == loss
