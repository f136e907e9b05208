"""What is kept first under a budget, over HTTP on both databases: the question the newest
answer replies to before the opening task, and a huge opening task cut (its original kept)
when the provider refused the prompt."""

from __future__ import annotations

import re
from typing import Any

import httpx

from tests.api.test_compaction import QUIET, compile_it
from tests.api.test_compile import compile_posted
from tests.conftest import new_session

EXCHANGE = [
    {"role": "user", "content": "Write a haiku."},
    {"role": "assistant", "content": "Rain taps on the roof, the gutters hum a low tune."},
    {"role": "user", "content": "Now write one about the snow that fell last night."},
    {"role": "assistant", "content": "Snow settles softly, the street forgets its footsteps."},
]


def test_room_for_two_messages_sends_the_question_and_its_answer(client: httpx.Client) -> None:
    two = compile_posted(client, messages=EXCHANGE[2:])["tokens"]["total"]
    limit = {"name": "token_limit", "params": {"max_tokens": two}}
    answer = compile_posted(client, messages=EXCHANGE, compiler={"decorators": [limit]})
    assert answer["messages"] == EXCHANGE[2:]
    assert answer["tokens"]["total"] <= two
    [left] = answer["left_out"]
    assert left["seq_ranges"] == [[1, 2]]
    assert any("opening task (seq 1" in w for w in answer["warnings"])
    # With room for the task too, it comes before the older answer.
    three = compile_posted(client, messages=[EXCHANGE[0], *EXCHANGE[2:]])["tokens"]["total"]
    limit["params"]["max_tokens"] = three
    answer = compile_posted(client, messages=EXCHANGE, compiler={"decorators": [limit]})
    assert answer["messages"] == [EXCHANGE[0], *EXCHANGE[2:]]


def pasted_log(lines: int) -> str:
    return "\n".join(
        f"2026-11-28 12:{n % 60:02d} worker-{n % 7} queue depth {n * 13}" for n in range(lines)
    )


def huge_task_history() -> list[dict[str, Any]]:
    task = "Find why the worker stalls. Here is the log:\n" + pasted_log(600) + "\nEND OF LOG"
    call = {"id": "c1", "type": "function", "function": {"name": "grep", "arguments": "{}"}}
    return [
        {"role": "user", "content": task},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c1", "content": "worker-3: lock held 40s"},
        {"role": "assistant", "content": "Worker 3 holds the lock too long."},
        {"role": "user", "content": "Fix it."},
    ]


def test_prompt_too_long_with_a_huge_opening_task_sheds_it_and_keeps_the_original(
    client: httpx.Client,
) -> None:
    sid = new_session(client, provider="gpt-4o", compaction=QUIET)
    history = huge_task_history()
    posted = client.post(f"/v1/sessions/{sid}/messages", json={"messages": history})
    assert posted.status_code == 201, posted.text
    first = compile_it(client, sid)
    refused = first["tokens"]["total"]
    ack = {"compile_id": first["compile_id"], "error_kind": "prompt_too_long"}
    client.post(f"/v1/sessions/{sid}/cursor", json=ack).raise_for_status()
    second = compile_it(client, sid)
    [done] = second["compactions"]
    assert done["kind"] == "full" and done["reason"] == "reactive_full"
    # The next compile fits in far less: the task is cut to the summary's budget.
    assert second["tokens"]["total"] <= QUIET["summary_tokens"] + 200 < refused // 10
    task = second["messages"][0]["content"]
    task = task if isinstance(task, str) else task[0]["text"]
    assert task.startswith("Find why the worker stalls.") and task.endswith("END OF LOG")
    sha = re.search(r"/payloads/([0-9a-f]{64})", task)
    assert sha is not None
    original = client.get(f"/v1/sessions/{sid}/payloads/{sha.group(1)}")
    assert original.status_code == 200 and original.json()["value"] == history[0]["content"]
    detail = client.get(f"/v1/sessions/{sid}/compactions/{done['id']}").json()
    [kept] = detail["archived"]
    assert kept["seq"] == 1 and kept["message"]["content"][0]["text"] == history[0]["content"]
    assert second["messages"][1:] == history[1:]
    assert compile_it(client, sid)["compactions"] == []  # that report was acted on
    # The cut session is exported and imported back as it is, its original with it.
    exported = client.get(f"/v1/sessions/{sid}/export").json()
    assert client.delete(f"/v1/sessions/{sid}").status_code == 204
    imported = client.post("/v1/sessions/import", json=exported)
    assert imported.status_code == 201, imported.text
    assert client.get(f"/v1/sessions/{sid}/export").json() == exported
