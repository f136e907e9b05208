"""A batch whose messages do not fit its declared format is a 422 naming the part and the format
to send, and stores nothing (before, Anthropic blocks sent as OpenAI were stored opaque and then
vanished from every compile)."""

from __future__ import annotations

from typing import Any

import httpx

from tests.conftest import Api, new_session, row_counts

TOOL_USE = {"type": "tool_use", "id": "toolu_1", "name": "ls", "input": {"path": "."}}
ANTHROPIC_BATCH = [
    {"role": "user", "content": "List the files."},
    {"role": "assistant", "content": [{"type": "text", "text": "Listing."}, TOOL_USE]},
    {
        "role": "user",
        "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "a.txt"}],
    },
]
OPENAI_CALL = {
    "role": "assistant",
    "content": None,
    "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "ls", "arguments": "{}"}}],
}


def errors(response: httpx.Response) -> list[dict[str, str]]:
    assert response.status_code == 422, response.text
    assert response.headers["content-type"] == "application/problem+json"
    found: list[dict[str, str]] = response.json()["errors"]
    return found


def test_anthropic_blocks_appended_as_openai_are_refused_and_nothing_is_stored(
    api: Api, client: httpx.Client
) -> None:
    sid = new_session(client, provider="anthropic")
    before = row_counts(api.database_url)
    refused = client.post(f"/v1/sessions/{sid}/messages", json={"messages": ANTHROPIC_BATCH})
    assert [e["path"] for e in errors(refused)] == [
        "body.messages[1].content[1].type",
        "body.messages[2].content[0].type",
    ]
    assert 'looks like Anthropic; send "format": "anthropic"' in refused.json()["detail"]
    assert row_counts(api.database_url) == before
    assert client.get(f"/v1/sessions/{sid}").json()["message_count"] == 0


def test_the_same_batch_with_its_format_reaches_the_compile(client: httpx.Client) -> None:
    sid = new_session(client, provider="anthropic")
    body = {"format": "anthropic", "messages": ANTHROPIC_BATCH}
    assert client.post(f"/v1/sessions/{sid}/messages", json=body).status_code == 201
    answer = client.post(f"/v1/sessions/{sid}/compile", json={}).json()
    blocks = [b for m in answer["messages"] if isinstance(m["content"], list) for b in m["content"]]
    assert TOOL_USE in blocks and answer["warnings"] == []


def test_openai_tool_calls_appended_as_anthropic_are_refused(client: httpx.Client) -> None:
    sid = new_session(client)
    body = {"format": "anthropic", "messages": [{"role": "user", "content": "ls"}, OPENAI_CALL]}
    [error] = errors(client.post(f"/v1/sessions/{sid}/messages", json=body))
    assert error["path"] == "body.messages[1].tool_calls"
    assert 'send "format": "openai"' in error["message"]


def test_a_canonical_opaque_part_holding_a_known_block_is_refused(client: httpx.Client) -> None:
    sid = new_session(client)
    part = {"type": "opaque", "provider": "openai", "data": TOOL_USE}
    body = {"format": "canonical", "messages": [{"role": "assistant", "content": [part]}]}
    [error] = errors(client.post(f"/v1/sessions/{sid}/messages", json=body))
    assert error["path"] == "body.messages[0].content[0].data.type"


def test_posted_compiles_and_counts_refuse_the_wrong_format_too(client: httpx.Client) -> None:
    for path in ("/v1/compile", "/v1/tokens/count"):
        [first, second] = errors(client.post(path, json={"messages": ANTHROPIC_BATCH}))
        assert first["path"] == "body.messages[1].content[1].type"
        assert second["path"] == "body.messages[2].content[0].type"
        body: dict[str, Any] = {"format": "anthropic", "messages": [OPENAI_CALL]}
        assert errors(client.post(path, json=body))[0]["path"] == "body.messages[0].tool_calls"
    ephemeral = {"messages": [{"role": "user", "content": "hi"}], "ephemeral": ANTHROPIC_BATCH[1:2]}
    [error] = errors(client.post("/v1/compile", json=ephemeral))
    assert error["path"] == "body.ephemeral[0].content[1].type"


def test_block_types_no_format_knows_are_still_kept_opaque(client: httpx.Client) -> None:
    sid = new_session(client)
    part = {"type": "future_part", "x": 1}
    body = {"messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}, part]}]}
    assert client.post(f"/v1/sessions/{sid}/messages", json=body).status_code == 201
    [item] = client.get(f"/v1/sessions/{sid}/messages").json()["items"]
    assert item["message"]["content"][1] == {
        "type": "opaque",
        "provider": "openai",
        "data": part,
        "metadata": {},
    }
