"""POST /v1/tokens/count."""

from __future__ import annotations

import httpx

from tests.conftest import new_session

HISTORY = [
    {"role": "system", "content": "You are terse."},
    {"role": "user", "content": "What is 2+2?", "name": "bob"},
    {"role": "assistant", "content": "4"},
]


def test_counts_per_message_and_total_exactly_for_openai(client: httpx.Client) -> None:
    answer = client.post(
        "/v1/tokens/count", json={"messages": HISTORY, "provider": "gpt-4o"}
    ).json()
    assert answer["encoding"] == "o200k_base" and answer["exact"] is True and answer["note"] is None
    assert len(answer["messages"]) == 3
    assert answer["total"] == sum(answer["messages"]) + answer["reply_priming"]


def test_anthropic_counts_are_marked_estimates(client: httpx.Client) -> None:
    body = {
        "format": "anthropic",
        "system": "Be brief.",
        "messages": [{"role": "user", "content": "hi"}],
        "provider": "anthropic",
    }
    answer = client.post("/v1/tokens/count", json=body).json()
    assert answer["exact"] is False
    assert "estimate" in answer["note"]
    assert len(answer["messages"]) == 2  # the system prompt counts as a message


def test_images_and_tool_calls_make_the_count_approximate(client: httpx.Client) -> None:
    image = {
        "role": "user",
        "content": [{"type": "image_url", "image_url": {"url": "http://x/a.png"}}],
    }
    call = {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}
        ],
    }
    for message in (image, call):
        answer = client.post(
            "/v1/tokens/count", json={"messages": [message], "provider": "gpt-4o"}
        ).json()
        assert answer["exact"] is False and "approximate" in answer["note"]


def test_encoding_override_and_tools(client: httpx.Client) -> None:
    tools = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]
    cl = client.post(
        "/v1/tokens/count", json={"messages": HISTORY, "encoding": "cl100k_base", "tools": tools}
    ).json()
    assert cl["encoding"] == "cl100k_base" and cl["exact"] is False and cl["tools"] > 0
    assert "counted with cl100k_base, not openai's own o200k_base" in cl["note"]
    assert cl["total"] == sum(cl["messages"]) + cl["reply_priming"] + cl["tools"]
    legacy = client.post("/v1/tokens/count", json={"messages": HISTORY, "provider": "gpt-4"}).json()
    assert legacy["encoding"] == "cl100k_base" and legacy["exact"] is True
    assert legacy["messages"] == cl["messages"]


def test_counts_match_what_append_stores(client: httpx.Client) -> None:
    sid = new_session(client)
    stored = client.post(f"/v1/sessions/{sid}/messages", json={"messages": HISTORY}).json()
    counted = client.post("/v1/tokens/count", json={"messages": HISTORY}).json()
    assert [m["tokens"] for m in stored["messages"]] == counted["messages"]


def test_bad_input_is_422(client: httpx.Client) -> None:
    bad = client.post("/v1/tokens/count", json={"messages": [{"role": "user"}, {"content": "x"}]})
    assert bad.status_code == 422
    assert bad.json()["errors"][0]["path"].startswith("body.messages[1]")
    unknown = client.post("/v1/tokens/count", json={"messages": [], "provider": "nope"})
    assert unknown.status_code == 422 and unknown.json()["errors"][0]["path"] == "body.provider"
