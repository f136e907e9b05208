"""Anthropic compile answers go into the real `anthropic` SDK's `messages.create` as they are, and
the request it sends is one the Messages API accepts (a local server checks it as the API would).
"""

from __future__ import annotations

import inspect
from typing import Any

import anthropic
import httpx
import pytest

from tests.adapters.stubs import Answer, Received, StubServer
from tests.api.test_messages import openai_history
from tests.conftest import new_session

SCHEMA = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}
# A name of our own: the SDK warns (an error here) for models it knows are deprecated.
MODEL = "ctxc-test-model"
OPENAI_FORMAT = {"type": "json_schema", "json_schema": {"name": "reply", "schema": SCHEMA}}
# What `messages.create` sends: its own parameters, less the request options.
PARAMETERS = set(inspect.signature(anthropic.resources.messages.Messages.create).parameters) - {
    "self",
    "extra_headers",
    "extra_query",
    "extra_body",
    "timeout",
}


def _refusal(received: Received) -> str | None:
    """Why the Messages API would refuse this request body (None: it would not)."""
    body = received.json()
    if unknown := set(body) - PARAMETERS:
        return f"unknown fields {sorted(unknown)}"
    if "system" in body and not isinstance(body["system"], str | list):
        return "system: must be a string or a list of text blocks"
    output_format = body.get("output_config", {}).get("format", {})
    if "output_config" in body and (
        set(output_format) != {"type", "schema"} or output_format["type"] != "json_schema"
    ):
        return "output_config.format: must be {type: json_schema, schema}"
    return None


def messages_api(received: Received) -> Answer:
    if (why := _refusal(received)) is not None:
        error = {"type": "invalid_request_error", "message": why}
        return Answer(400, {"type": "error", "error": error})
    reply = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": MODEL,
        "content": [{"type": "text", "text": '{"ok": true}'}],
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": 10, "output_tokens": 4},
    }
    return Answer(200, reply)


def sdk_fields(answer: dict[str, Any]) -> dict[str, Any]:
    """The compile answer's fields under the SDK's names (README, Compiling)."""
    fields = {"messages": answer["messages"]}
    if "system" in answer:
        fields["system"] = answer["system"]
    if answer["response_format"] is not None:
        fields["output_config"] = answer["response_format"]
    return fields


def sent(answer: dict[str, Any]) -> dict[str, Any]:
    """The body the SDK sent for ``answer`` (the local API accepted it)."""
    with StubServer(messages_api) as api:
        client = anthropic.Anthropic(base_url=api.url, api_key="test", max_retries=0)
        try:
            reply = client.messages.create(model=MODEL, max_tokens=64, **sdk_fields(answer))
        finally:
            client.close()
    assert reply.content[0].type == "text"
    [received] = api.requests
    body: dict[str, Any] = received.json()
    return body


def test_an_answer_without_a_system_prompt_has_no_system_and_the_sdk_sends_it(
    client: httpx.Client,
) -> None:
    response = client.post(
        "/v1/compile",
        json={
            "messages": openai_history(4),
            "provider": "anthropic",
            "response_format": OPENAI_FORMAT,
        },
    )
    assert response.status_code == 200, response.text
    answer = response.json()
    assert "system" not in answer
    body = sent(answer)
    assert "system" not in body and body["messages"] == answer["messages"]
    assert body["output_config"] == {"format": {"type": "json_schema", "schema": SCHEMA}}


@pytest.mark.parametrize("system", ["Be brief.", None])
def test_a_session_compile_for_anthropic_goes_through_the_sdk(
    client: httpx.Client, system: str | None
) -> None:
    fragments = [{"name": "identity", "text": system}] if system else []
    sid = new_session(
        client, provider="anthropic", response_format=OPENAI_FORMAT, system_prompt=fragments
    )
    client.post(f"/v1/sessions/{sid}/messages", json={"messages": openai_history(6)})
    response = client.post(f"/v1/sessions/{sid}/compile", json={})
    assert response.status_code == 200, response.text
    answer = response.json()
    body = sent(answer)
    assert body.get("system") == ([{"type": "text", "text": system}] if system else None)
    assert body["output_config"]["format"]["schema"] == SCHEMA


def test_an_openai_answer_has_no_system_either(client: httpx.Client) -> None:
    history = [{"role": "system", "content": "Be brief."}, *openai_history(3)]
    answer = client.post("/v1/compile", json={"messages": history}).json()
    assert "system" not in answer and answer["messages"][0] == history[0]
