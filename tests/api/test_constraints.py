"""Constraints over HTTP, on both databases: marks checked on append, carried verbatim with a
checksum into every summary (chained compactions included), and a compaction that cannot carry
one refused (409, an event saying so, a compile that goes on with a warning)."""

from __future__ import annotations

from typing import Any

import httpx

from app.domain.summaries.constraints import BLOCK_TITLE, checksum
from app.services.compaction.summarising import SUMMARY_HEADER
from tests.api.sse import stream
from tests.api.test_compaction import POLICY, canonical, compact, work_history
from tests.conftest import new_session

RULE = "Never edit the migrations under migrations/versions by hand."
FRAGMENT = "keep the public API unchanged"


def marked_history(rounds: int = 12, rule: str = RULE) -> list[dict[str, Any]]:
    """A coding session with a constraint message and a marked fragment early on."""
    out = work_history(rounds)
    out[3:3] = [
        {"role": "user", "content": rule, "metadata": {"constraint": True}},
        {
            "role": "assistant",
            "content": f"Understood: I will {FRAGMENT} and go on.",
            "metadata": {"constraints": [FRAGMENT]},
        },
    ]
    return out


def session_marked(client: httpx.Client, history: list[dict[str, Any]], **fields: Any) -> str:
    sid = new_session(client, provider="gpt-4o", **fields)
    posted = client.post(f"/v1/sessions/{sid}/messages", json={"messages": history})
    assert posted.status_code == 201, posted.text
    return sid


def block_lines(text: str) -> list[str]:
    assert text.startswith(SUMMARY_HEADER + BLOCK_TITLE + "\n"), text[:200]
    body = text[len(SUMMARY_HEADER) :].split("\n\n", 1)[0]
    return body.split("\n")[1:]


def summary_text(client: httpx.Client, sid: str) -> tuple[str, dict[str, Any]]:
    [summary] = [m for m in canonical(client, sid) if m["section"] == "summary"]
    message = summary["message"]
    return message["content"][0]["text"], message["metadata"]


def test_a_fragment_not_in_the_text_is_a_422_naming_it_and_nothing_is_written(
    client: httpx.Client,
) -> None:
    sid = new_session(client, provider="gpt-4o")
    bad = [
        {"role": "user", "content": "hello"},
        {"role": "user", "content": "Use tabs.", "metadata": {"constraints": ["Use tabs.", "x"]}},
    ]
    answer = client.post(f"/v1/sessions/{sid}/messages", json={"messages": bad})
    assert answer.status_code == 422, answer.text
    paths = [e["path"] for e in answer.json()["errors"]]
    assert paths == ["body.messages[1].metadata.constraints[1]"]
    assert canonical(client, sid) == []
    whole = [{"role": "user", "content": "x", "metadata": {"constraint": "yes"}}]
    answer = client.post(f"/v1/sessions/{sid}/messages", json={"messages": whole})
    assert answer.status_code == 422 and "body.messages[0].metadata.constraint" in answer.text


def test_constraints_are_carried_verbatim_and_re_asserted_by_a_chained_compaction(
    client: httpx.Client,
) -> None:
    sid = session_marked(client, marked_history(), compaction=POLICY)
    with stream(client, sid) as events:
        done = compact(client, sid, kind="full")
        [event] = events.read(1)
    assert done.status_code == 201, done.text
    assert event.data["outcome"] == "compacted" and event.data["constraints"] == 2
    text, metadata = summary_text(client, sid)
    expected = [f"- [{checksum(RULE)}] {RULE}", f"- [{checksum(FRAGMENT)}] {FRAGMENT}"]
    assert block_lines(text) == expected
    assert metadata["carried_constraints"] == [checksum(RULE), checksum(FRAGMENT)]
    assert done.json()["summary_tokens"] <= POLICY["summary_tokens"]

    more = work_history(12)[1:]
    more[0] = {
        "role": "user",
        "content": "Also: no new dependencies.",
        "metadata": {"constraint": True},
    }
    posted = client.post(f"/v1/sessions/{sid}/messages", json={"messages": more})
    assert posted.status_code == 201, posted.text
    again = compact(client, sid, kind="full")
    assert again.status_code == 201, again.text
    text, metadata = summary_text(client, sid)
    new = "Also: no new dependencies."
    assert block_lines(text) == [*expected, f"- [{checksum(new)}] {new}"]
    assert len(metadata["carried_constraints"]) == 3


def test_a_compaction_that_cannot_carry_a_constraint_is_refused_and_reported(
    client: httpx.Client,
) -> None:
    rule = "Keep every one of these rules: " + " ".join(f"rule-{n} holds." for n in range(150))
    sid = session_marked(client, marked_history(rule=rule), compaction=POLICY)
    before = canonical(client, sid)
    with stream(client, sid) as events:
        refused = compact(client, sid, kind="full")
        [event] = events.read(1)
    assert refused.status_code == 409, refused.text
    assert checksum(rule) in refused.json()["detail"]
    assert event.event == "compaction" and event.data["outcome"] == "refused"
    assert event.data["constraints"] == [checksum(rule), checksum(FRAGMENT)]
    assert canonical(client, sid) == before  # nothing written
    assert client.get(f"/v1/sessions/{sid}/compactions").json()["items"] == []

    with stream(client, sid) as events:
        compiled = client.post(f"/v1/sessions/{sid}/compile", json={})
        start, end = events.read(2)
    assert compiled.status_code == 200, compiled.text
    assert (start.event, end.event) == ("context_compaction_start", "context_compaction_end")
    assert end.data["outcome"] == "refused" and checksum(rule) in end.data["constraints"]
    warnings = compiled.json()["warnings"]
    assert any("refused" in w and checksum(rule) in w for w in warnings), warnings
    assert canonical(client, sid) == before
