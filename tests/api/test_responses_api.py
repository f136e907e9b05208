"""OpenAI Responses over HTTP on both databases: append input items with their instructions, read
them back as they were posted, compile a session and a posted history to Responses, refuse a bad
item naming its field (nothing stored), and send a compiled input with the official SDK to a
server that checks it as the API does."""

from __future__ import annotations

from typing import Any

import httpx
import openai
import pytest

from app.domain.validity import responses_problems
from tests.conftest import Api, new_session, row_counts
from tests.upstream_responses import ResponsesStub

INSTRUCTIONS = "You are a careful coding agent."
ITEMS: list[dict[str, Any]] = [
    {"role": "user", "content": "Why does tests/test_sync.py fail?"},
    {
        "id": "rs_1",
        "type": "reasoning",
        "encrypted_content": "gAAAA-opaque==",
        "summary": [{"type": "summary_text", "text": "**Reading the test first**"}],
    },
    {
        "type": "function_call",
        "id": "fc_1",
        "call_id": "call_1",
        "name": "read_file",
        "arguments": '{"path":"tests/test_sync.py"}',
        "status": "completed",
    },
    {
        "type": "function_call",
        "id": "fc_2",
        "call_id": "call_2",
        "name": "read_file",
        "arguments": '{"path":"src/sync.py"}',
        "status": "completed",
    },
    {"type": "function_call_output", "call_id": "call_1", "output": "def test_sync(): ..."},
    {
        "type": "function_call_output",
        "call_id": "call_2",
        "output": [{"type": "input_text", "text": "def sync(): ..."}],
    },
    {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": "It races on the lock.", "annotations": []}],
    },
    {"role": "user", "content": "Fix it."},
]


def checked(answer: dict[str, Any]) -> dict[str, Any]:
    assert answer["format"] == "responses"
    assert "system" not in answer
    assert responses_problems(answer.get("instructions"), answer["messages"]) == []
    return answer


def test_input_items_read_back_as_posted(client: httpx.Client) -> None:
    sid = new_session(client, provider="openai-responses")
    body = {"format": "responses", "instructions": INSTRUCTIONS, "messages": ITEMS}
    appended = client.post(f"/v1/sessions/{sid}/messages", json=body)
    assert appended.status_code == 201, appended.text
    # The instructions, the user turn, one assistant turn (reasoning and two calls), two tool
    # results, the answer (its own turn after the results), the next user turn.
    assert appended.json()["last_seq"] == 7
    page = client.get(f"/v1/sessions/{sid}/messages", params={"format": "responses"}).json()
    assert page["format"] == "responses"
    assert (page["instructions"], page["messages"]) == (INSTRUCTIONS, ITEMS)
    assert page["seqs"] == [2, 3, 3, 3, 4, 5, 6, 7]
    canonical = client.get(f"/v1/sessions/{sid}/messages").json()["items"]
    assert [m["message"]["role"] for m in canonical] == [
        "system",
        "user",
        "assistant",
        "tool",
        "tool",
        "assistant",
        "user",
    ]
    # The same history in the other shapes: best effort, reasoning left out of both.
    chat = client.get(f"/v1/sessions/{sid}/messages", params={"format": "openai"}).json()
    assert [m["role"] for m in chat["messages"]][:3] == ["system", "user", "assistant"]
    original = client.get(f"/v1/sessions/{sid}/tool-calls/call_2", params={"format": "responses"})
    assert original.status_code == 200, original.text
    assert original.json()["call"] == ITEMS[3]
    assert original.json()["result"] == ITEMS[5]


def test_a_session_compiles_to_responses(client: httpx.Client) -> None:
    schema = {"type": "object", "properties": {"fix": {"type": "string"}}, "required": ["fix"]}
    response_format = {
        "type": "json_schema",
        "json_schema": {"name": "fix", "schema": schema, "strict": True},
    }
    sid = new_session(
        client,
        provider="gpt-5",
        profile={"output": "responses"},
        response_format=response_format,
        system_prompt=[{"name": "rules", "text": "Keep the API.", "lifecycle": "static"}],
    )
    body = {"format": "responses", "instructions": INSTRUCTIONS, "messages": ITEMS}
    assert client.post(f"/v1/sessions/{sid}/messages", json=body).status_code == 201
    answer = client.post(f"/v1/sessions/{sid}/compile", json={})
    assert answer.status_code == 200, answer.text
    compiled = checked(answer.json())
    assert compiled["provider"] == "gpt-5"
    assert compiled["instructions"] == f"Keep the API.\n{INSTRUCTIONS}"
    assert compiled["messages"] == ITEMS
    assert compiled["warnings"] == []
    assert compiled["response_format"] == {
        "format": {"type": "json_schema", "name": "fix", "schema": schema, "strict": True}
    }
    # Without the session's own profile, the model is sent as Chat Completions.
    assert client.patch(f"/v1/sessions/{sid}", json={"profile": None}).status_code == 200
    chat = client.post(f"/v1/sessions/{sid}/compile", json={}).json()
    assert chat["format"] == "openai" and "instructions" not in chat
    assert chat["messages"][1] == {"role": "system", "content": INSTRUCTIONS}


@pytest.mark.parametrize("posted", ["responses", "openai", "anthropic"])
def test_a_posted_history_compiles_to_responses(client: httpx.Client, posted: str) -> None:
    histories: dict[str, dict[str, Any]] = {
        "responses": {"instructions": INSTRUCTIONS, "messages": ITEMS},
        "openai": {
            "messages": [
                {"role": "system", "content": INSTRUCTIONS},
                {"role": "user", "content": "ls"},
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": "c1",
                            "type": "function",
                            "function": {"name": "ls", "arguments": "{}"},
                        },
                        {
                            "id": "c2",
                            "type": "function",
                            "function": {"name": "pwd", "arguments": "{}"},
                        },
                    ],
                },
                {"role": "tool", "tool_call_id": "c1", "content": "a.py"},
            ]
        },
        "anthropic": {
            "system": INSTRUCTIONS,
            "messages": [
                {"role": "user", "content": "ls"},
                {
                    "role": "assistant",
                    "content": [
                        {"type": "thinking", "thinking": "Listing.", "signature": "sig"},
                        {"type": "tool_use", "id": "toolu_1", "name": "ls", "input": {}},
                    ],
                },
                {
                    "role": "user",
                    "content": [
                        {"type": "tool_result", "tool_use_id": "toolu_1", "content": "a.py"}
                    ],
                },
            ],
        },
    }
    body = {"format": posted, "provider": "openai-responses", **histories[posted]}
    answer = client.post("/v1/compile", json=body)
    assert answer.status_code == 200, answer.text
    compiled = checked(answer.json())
    assert compiled["instructions"] == INSTRUCTIONS
    if posted == "responses":
        assert compiled["messages"] == ITEMS
    if posted == "openai":  # the call without a result is dropped, with its warning
        assert [i["call_id"] for i in compiled["messages"] if "call_id" in i] == ["c1", "c1"]
        assert compiled["warnings"] == [
            "dropped tool call 'c2' (pwd) that has no result (message 2)"
        ]


def test_a_bad_item_is_a_422_naming_its_field_and_nothing_is_stored(
    api: Api, client: httpx.Client
) -> None:
    sid = new_session(client, provider="openai-responses")
    before = row_counts(api.database_url)
    bad = [
        ITEMS[0],
        {"type": "function_call", "name": "f", "arguments": "{}"},
        {"role": "tool", "tool_call_id": "c", "content": "x"},
    ]
    refused = client.post(
        f"/v1/sessions/{sid}/messages", json={"format": "responses", "messages": bad}
    )
    assert refused.status_code == 422, refused.text
    errors = refused.json()["errors"]
    assert [e["path"] for e in errors] == ["body.messages[1].call_id", "body.messages[2].role"]
    assert '"format": "openai"' in errors[1]["message"]
    for body, path in [
        ({"format": "openai", "instructions": "x", "messages": [ITEMS[0]]}, "body.instructions"),
        ({"format": "responses", "system": "x", "messages": [ITEMS[0]]}, "body.system"),
        (
            {"format": "responses", "instructions": ["x"], "messages": [ITEMS[0]]},
            "body.instructions",
        ),
    ]:
        answer = client.post(f"/v1/sessions/{sid}/messages", json=body)
        assert answer.status_code == 422, answer.text
        assert answer.json()["errors"][0]["path"] == path
        posted = client.post("/v1/compile", json=body)
        assert posted.status_code == 422, posted.text
        assert posted.json()["errors"][0]["path"] == path
    assert row_counts(api.database_url) == before
    compiled = client.post("/v1/compile", json={"format": "responses", "messages": bad[:2]})
    assert compiled.json()["errors"][0]["path"] == "body.messages[1].call_id"


def test_the_sdk_sends_a_compiled_input_the_api_accepts(client: httpx.Client) -> None:
    sid = new_session(client, provider="openai-responses")
    history = [*ITEMS[:3], {"role": "user", "content": "Never mind, just summarise."}]
    body = {"format": "responses", "instructions": INSTRUCTIONS, "messages": history}
    assert client.post(f"/v1/sessions/{sid}/messages", json=body).status_code == 201
    compiled = checked(client.post(f"/v1/sessions/{sid}/compile", json={}).json())
    # The unanswered call and the reasoning that led to it are not sent.
    assert compiled["messages"] == [history[0], history[3]]
    with ResponsesStub() as stub:
        sdk = openai.OpenAI(base_url=stub.base_url, api_key="sk-test", max_retries=0)
        reply = sdk.responses.create(
            model="gpt-5", instructions=compiled["instructions"], input=compiled["messages"]
        )
        assert reply.output_text == "I read 2 input items."
        assert stub.requests[-1]["input"] == compiled["messages"]
        # The stub refuses what the API refuses: the history as it was stored.
        with pytest.raises(openai.BadRequestError, match="No tool output found"):
            sdk.responses.create(model="gpt-5", instructions=INSTRUCTIONS, input=history)  # type: ignore[arg-type]
    # The model's answer goes back in, in the shape it came in.
    answer = [item.model_dump(exclude_none=True) for item in reply.output]
    appended = client.post(
        f"/v1/sessions/{sid}/messages", json={"format": "responses", "messages": answer}
    )
    assert appended.status_code == 201, appended.text
    page = client.get(
        f"/v1/sessions/{sid}/messages", params={"format": "responses", "after_seq": 4}
    )
    assert page.json()["messages"] == answer
