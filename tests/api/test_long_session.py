"""A long agent session under a summarisation policy never wedges (issue 19, item 5): over HTTP,
on both databases, every compile of 300 tool rounds in a 16k window answers 200 and every
summary stays within the policy's ``summary_tokens``; a giant tool result in the round being
answered is previewed with a pointer that returns the original."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from app.settings import Settings
from tests.adapters.helpers import chat_completion
from tests.adapters.stubs import Answer, Received, StubServer
from tests.api.test_compile import valid
from tests.conftest import LiveServer, new_session

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
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": call,
                    "type": "function",
                    "function": {"name": "read_file", "arguments": args},
                }
            ],
        },
        {"role": "tool", "tool_call_id": call, "content": "\n".join(lines)},
    ]


def append(client: httpx.Client, sid: str, messages: list[dict[str, Any]]) -> None:
    posted = client.post(f"/v1/sessions/{sid}/messages", json={"messages": messages})
    assert posted.status_code == 201, posted.text


@pytest.mark.slow
@pytest.mark.parametrize(("window", "rounds"), [(16_000, 300), (32_000, 1_000)])
def test_long_tool_sessions_in_a_small_window_never_wedge(
    client: httpx.Client, window: int, rounds: int
) -> None:
    policy = {"trigger_tokens": window // 2}  # target a quarter, summary_tokens 2,000
    sid = new_session(client, provider="gpt-4o", context_window=window, compaction=policy)
    append(client, sid, [{"role": "user", "content": "Map every handler under src/ for me."}])
    statuses: list[int] = []
    for start in range(0, rounds, 20):
        append(client, sid, [m for n in range(start, start + 20) for m in tool_round(n)])
        answer = client.post(f"/v1/sessions/{sid}/compile", json={})
        statuses.append(answer.status_code)
        if answer.status_code == 200:
            assert valid(answer.json())["tokens"]["total"] <= window
    compactions = client.get(f"/v1/sessions/{sid}/compactions").json()["items"]
    sizes = [c["summary_tokens"] for c in compactions]
    print(f"window {window}, {rounds} rounds: compiles {statuses}; largest summary {max(sizes)}")
    assert statuses == [200] * (rounds // 20)
    assert compactions and max(sizes) <= SUMMARY_TOKENS
    # What the summaries left out is in the archive, exactly as stored.
    items = client.get(f"/v1/sessions/{sid}/messages", params={"limit": 1000}).json()["items"]
    [summary] = [m for m in items if m["section"] == "summary"]
    first_path = "src/area_0/part_0/module_0_0.py"
    assert first_path not in json.dumps(summary)
    archive = client.get(f"/v1/sessions/{sid}/compactions/{compactions[0]['id']}").json()
    assert first_path in json.dumps(archive["archived"])


def log_text(lines: int) -> str:
    """A tool result of ``lines`` distinct lines (about 40 characters, 12 tokens each)."""
    return "\n".join(f"line {i}: value_{i} = compute(alpha_{i % 7}, beta)" for i in range(lines))


def ask_with_result(client: httpx.Client, sid: str, text: str) -> None:
    """The agent's read, answered by ``text``: the round the next compile answers."""
    append(
        client,
        sid,
        [
            {"role": "user", "content": "Read the build log."},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "call_log",
                        "type": "function",
                        "function": {"name": "read_file", "arguments": '{"path": "build.log"}'},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "call_log", "content": text},
        ],
    )


def sent_result(answer: dict[str, Any]) -> str:
    found = [m["content"] for m in answer["messages"] if m.get("tool_call_id") == "call_log"]
    assert len(found) == 1
    text: str = found[0]
    return text


def original_by_pointer(client: httpx.Client, text: str) -> str:
    """The original the preview's pointer names, fetched by that request."""
    path = text.split("the whole text: GET ", 1)[1].split("]", 1)[0]
    found = client.get(path)
    assert found.status_code == 200, found.text
    original: str = found.json()["result"]["content"]
    return original


def test_a_giant_result_in_the_round_being_answered_is_previewed_to_fit(
    client: httpx.Client,
) -> None:
    # 120,000 characters, about 36,000 tokens, in a 16k window: a 422 before.
    text = log_text(3_000)
    sid = new_session(client, provider="gpt-4o", context_window=WINDOW, compaction=POLICY)
    ask_with_result(client, sid, text)
    answer = client.post(f"/v1/sessions/{sid}/compile", json={})
    assert answer.status_code == 200, answer.text
    body = valid(answer.json())
    assert body["tokens"]["total"] <= WINDOW
    shown = sent_result(body)
    assert shown.startswith("line 0: ") and shown.endswith(text[-40:])
    assert "/tool-calls/call_log?seq=3" in shown
    assert original_by_pointer(client, shown) == text
    steps = {s["name"]: s for s in body["steps"]}
    assert steps["token_limit"]["call_ids"] == ["call_log"]
    # ... and by the sha256 the step reported, kept with the compile.
    [omitted] = steps["token_limit"]["omitted"]
    payload = client.get(f"/v1/sessions/{sid}/payloads/{omitted['sha256']}").json()
    assert payload["value"] == text


def test_a_result_over_the_newest_cap_is_previewed_by_compact_tool_results(
    client: httpx.Client,
) -> None:
    # 40,000 characters (about 12,000 tokens) in a 128k window: sent whole before.
    text = log_text(1_000)
    spec = {"decorators": ["compact_tool_results", "token_limit"]}
    sid = new_session(client, provider="gpt-4o", compiler=spec)
    ask_with_result(client, sid, text)
    body = valid(client.post(f"/v1/sessions/{sid}/compile", json={}).json())
    shown = sent_result(body)
    assert len(shown) < len(text) // 2 and shown.startswith("line 0: ")
    assert original_by_pointer(client, shown) == text
    steps = {s["name"]: s for s in body["steps"]}
    assert steps["compact_tool_results_newest"]["call_ids"] == ["call_log"]
    # A result under the cap in the round being answered is sent whole, as before.
    small = log_text(300)
    sid = new_session(client, provider="gpt-4o", compiler=spec)
    ask_with_result(client, sid, small)
    body = valid(client.post(f"/v1/sessions/{sid}/compile", json={}).json())
    assert sent_result(body) == small


def test_a_model_that_ignores_the_budget_cannot_wedge_the_session(database_url: str) -> None:
    """A real local OpenAI-compatible summariser answering 6,000 tokens, whatever it is asked."""
    wordy = "Decisions:\n- " + " ".join(f"finding_{n} was checked." for n in range(1_500))

    def model(_: Received) -> Answer:
        return chat_completion(wordy)

    with StubServer(model) as stub:
        settings = Settings(
            database_url=database_url,
            summarizer="openai",
            summarizer_url=f"{stub.url}/v1",
            summarizer_model="m",
            summarizer_retries=0,
        )
        with LiveServer(settings) as server, httpx.Client(base_url=server.url) as client:
            # Inline (not prepared in the background): each compile's summariser request pairs
            # with the compaction it made.
            policy = {"trigger_tokens": 8_000, "summary_tokens": 1_000, "background": False}
            sid = new_session(client, provider="gpt-4o", context_window=WINDOW, compaction=policy)
            append(client, sid, [{"role": "user", "content": "Map every handler."}])
            statuses = []
            for start in range(0, 100, 20):
                append(client, sid, [m for n in range(start, start + 20) for m in tool_round(n)])
                statuses.append(client.post(f"/v1/sessions/{sid}/compile", json={}).status_code)
            records = client.get(f"/v1/sessions/{sid}/compactions").json()["items"]
    assert statuses == [200] * 5
    assert records and len(stub.requests) == len(records)  # one request per compaction
    for record, request in zip(records, stub.requests, strict=True):
        assert record["summary_tokens"] <= 1_000
        asked = request.json()["max_tokens"]
        assert record["summarizer"].startswith("ledger (fallback: openai: the summary has ")
        budget = int(record["summarizer"].rpartition(" ")[2].rstrip(")"))
        assert 900 < budget < 1_000  # the budget less the summary's header
        assert budget // 2 <= asked < budget  # less the work block, at most half of it
