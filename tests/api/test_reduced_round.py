"""The round token_limit's walk stops at, sent reduced in a session compile (issue 15): its
previewed result and its cut text point at requests that return the originals, on both
databases, and ``reduce: false`` drops it as before."""

from __future__ import annotations

from typing import Any

import httpx

from tests.api.test_compile import valid
from tests.api.test_long_session import append, log_text, original_by_pointer
from tests.conftest import new_session

LOG = log_text(400)  # about 4,800 tokens
NARRATION = " ".join(
    f"Step {n}: the parser rejects the header, so I read the log." for n in range(60)
)
HISTORY = [
    {"role": "user", "content": "Why does the build fail?"},
    {
        "role": "assistant",
        "content": NARRATION,
        "tool_calls": [
            {
                "id": "call_log",
                "type": "function",
                "function": {"name": "read_file", "arguments": '{"path": "build.log"}'},
            }
        ],
    },
    {"role": "tool", "tool_call_id": "call_log", "content": LOG},
    {"role": "assistant", "content": "The header parser is wrong."},
    {"role": "user", "content": "Fix it, then."},
]


def compiled(client: httpx.Client, sid: str, max_tokens: int, reduce: bool) -> dict[str, Any]:
    limit = {
        "name": "token_limit",
        "params": {"max_tokens": max_tokens, "reduce": reduce, "keep_task": False},
    }
    answer = client.post(f"/v1/sessions/{sid}/compile", json={"compiler": {"decorators": [limit]}})
    assert answer.status_code == 200, answer.text
    return valid(answer.json())


def test_a_reduced_round_points_at_its_originals_and_can_be_turned_off(
    client: httpx.Client,
) -> None:
    sid = new_session(client, provider="gpt-4o")
    append(client, sid, HISTORY)
    body = compiled(client, sid, 700, reduce=True)
    assert body["tokens"]["total"] <= 700
    assert body["left_out"] == [{"reason": "token_limit", "count": 1, "seq_ranges": [[1, 1]]}]
    call, result = body["messages"][0], body["messages"][1]
    assert call["tool_calls"] == HISTORY[1]["tool_calls"]  # the call whole
    assert original_by_pointer(client, result["content"]) == LOG
    # The narration was cut too (the call's message alone is about as big as the room).
    assert "characters cut here; the whole message: GET " in call["content"]
    path = call["content"].split("the whole message: GET ", 1)[1].split("]", 1)[0]
    page = client.get(path)
    assert page.status_code == 200, page.text
    (item,) = page.json()["items"]
    assert item["seq"] == 2
    assert item["message"]["content"][0]["text"] == NARRATION
    steps = {s["name"]: s for s in body["steps"]}
    assert steps["token_limit"]["seqs"] == [2, 3]
    assert any(
        w.startswith("token_limit: the oldest round sent (seqs 2-3") for w in body["warnings"]
    )
    before = compiled(client, sid, 700, reduce=False)
    assert [m["content"] for m in before["messages"]] == [m["content"] for m in HISTORY[3:]]
    assert before["steps"] == [] and before["tokens"]["total"] < body["tokens"]["total"]
