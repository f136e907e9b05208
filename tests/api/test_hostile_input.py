"""Inputs that either database could mangle or choke on: a clear 4xx and nothing written."""

from __future__ import annotations

import json
import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest

from tests.conftest import Api, new_session, row_counts, scrape


def post_raw(client: httpx.Client, path: str, text: str) -> httpx.Response:
    """Post JSON text as is (json.dumps would refuse lone surrogates or emit Infinity)."""
    return client.post(path, content=text.encode(), headers={"content-type": "application/json"})


def nested(depth: int) -> Any:
    value: Any = "leaf"
    for _ in range(depth):
        value = {"k": value}
    return value


@pytest.mark.parametrize(
    ("body", "path"),
    [
        ('{"messages": [{"role": "user", "content": "a\\ud800b"}]}', "body.messages[0].content"),
        (
            '{"messages": [{"role": "user", "content": "x", "metadata": {"k\\udfff": 1}}]}',
            "body.messages[0].metadata",
        ),
        (
            '{"messages": [{"role": "user", "content": "x"}], "metadata": {"n": 1e400}}',
            "body.metadata.n",
        ),
        (
            json.dumps({"messages": [{"role": "user", "content": "x", "metadata": nested(80)}]}),
            "body.messages[0].metadata",
        ),
        (
            json.dumps({"messages": [{"role": "user", "content": "x", "name": "n" * 300}]}),
            "body.messages[0].name",
        ),
        (
            json.dumps({"messages": [{"role": "user", "content": "x", "name": "a\u0000b"}]}),
            "body.messages[0].name",
        ),
        (
            json.dumps(
                {
                    "messages": [
                        {
                            "role": "assistant",
                            "content": None,
                            "tool_calls": [
                                {
                                    "id": "c" * 600,
                                    "type": "function",
                                    "function": {"name": "f", "arguments": "{}"},
                                }
                            ],
                        }
                    ]
                }
            ),
            "body.messages[0].content[0].id",
        ),
        (
            json.dumps(
                {
                    "format": "canonical",
                    "messages": [
                        {
                            "role": "user",
                            "content": [
                                {"type": "tool_call", "id": "c", "name": "f", "arguments": {}}
                            ],
                        }
                    ],
                }
            ),
            "body.messages[0].content[0]",
        ),
        (
            json.dumps({"format": "canonical", "messages": [{"role": "tool", "content": []}]}),
            "body.messages[0].content",
        ),
    ],
)
def test_unstorable_messages_are_422_and_write_nothing(
    api: Api, client: httpx.Client, body: str, path: str
) -> None:
    sid = new_session(client)
    before = row_counts(api.database_url)
    response = post_raw(client, f"/v1/sessions/{sid}/messages", body)
    assert response.status_code == 422, response.text
    assert any(e["path"].startswith(path) for e in response.json()["errors"]), response.json()
    assert row_counts(api.database_url) == before


@pytest.mark.parametrize(
    "body",
    [
        '{"metadata": {"k": "\\ud800"}}',
        '{"resume_key": "a\\u0000b"}',
        '{"system_prompt": [{"name": "x", "text": "\\udc00"}]}',
        json.dumps({"metadata": nested(100)}),
        '{"metadata": {"x": -1e999}}',
    ],
)
def test_unstorable_session_fields_are_422_and_write_nothing(
    api: Api, client: httpx.Client, body: str
) -> None:
    before = row_counts(api.database_url)
    assert post_raw(client, "/v1/sessions", body).status_code == 422
    sid = new_session(client)
    assert (
        client.patch(
            f"/v1/sessions/{sid}",
            content=body.encode(),
            headers={"content-type": "application/json"},
        ).status_code
        == 422
    )
    assert row_counts(api.database_url)["sessions"] == before["sessions"] + 1


def test_session_bodies_reject_malformed_json_and_unknown_fields(client: httpx.Client) -> None:
    assert post_raw(client, "/v1/sessions", '{"id": ').status_code == 400
    unknown = client.post("/v1/sessions", json={"colour": "red"})
    assert unknown.status_code == 422 and unknown.json()["errors"][0]["path"] == "body.colour"
    wrong = client.post("/v1/sessions", json={"context_window": "big"})
    assert wrong.status_code == 422 and wrong.json()["errors"][0]["path"] == "body.context_window"


def test_nul_in_message_text_is_kept_exactly(client: httpx.Client) -> None:
    sid = new_session(client)
    message = {"role": "tool", "tool_call_id": "c1", "content": "bin\u0000ary \u0001 output"}
    assert (
        client.post(f"/v1/sessions/{sid}/messages", json={"messages": [message]}).status_code == 201
    )
    page = client.get(f"/v1/sessions/{sid}/messages", params={"format": "openai"}).json()
    assert page["messages"] == [message]


def test_every_bad_message_is_named_not_only_the_first(client: httpx.Client) -> None:
    sid = new_session(client)
    body = {
        "messages": [
            {"role": "wizard"},
            {"role": "user", "content": "ok"},
            {"role": "user", "content": 5},
        ]
    }
    paths = [
        e["path"] for e in client.post(f"/v1/sessions/{sid}/messages", json=body).json()["errors"]
    ]
    assert paths == ["body.messages[0].role", "body.messages[2].content"]


@pytest.mark.parametrize(
    ("path", "status"),
    [
        ("/v1/sessions/a%00b", 404),
        ("/v1/sessions/a%00b/messages", 404),
        ("/v1/sessions/" + "x" * 300, 404),
        ("/v1/sessions?after=a%00", 422),
        ("/v1/sessions/s/messages?after_seq=9223372036854775808", 422),
        ("/v1/sessions/s/messages?limit=0", 422),
    ],
)
def test_odd_urls_are_4xx(client: httpx.Client, path: str, status: int) -> None:
    assert client.get(path).status_code == status


def test_patch_and_delete_racing_never_fail_with_500(api: Api) -> None:
    def race(i: int) -> list[int]:
        with api.client() as c:
            sid = new_session(c, id=f"race-{uuid.uuid4().hex}")
            calls = [
                lambda: c.patch(f"/v1/sessions/{sid}", json={"metadata": {"i": i}}),
                lambda: c.delete(f"/v1/sessions/{sid}"),
                lambda: c.delete(f"/v1/sessions/{sid}"),
                lambda: c.post(
                    f"/v1/sessions/{sid}/messages",
                    json={"messages": [{"role": "user", "content": "x"}]},
                ),
                lambda: c.get(f"/v1/sessions/{sid}/messages"),
            ]
            with ThreadPoolExecutor(len(calls)) as pool:
                return [f.status_code for f in pool.map(lambda call: call(), calls)]

    statuses = [s for i in range(15) for s in race(i)]
    assert set(statuses) <= {200, 201, 204, 404}, statuses


def test_a_retry_after_the_session_was_deleted_is_404(client: httpx.Client) -> None:
    sid = new_session(client)
    body, headers = (
        {"messages": [{"role": "user", "content": "x"}]},
        {"Idempotency-Key": f"k-{uuid.uuid4()}"},
    )
    assert (
        client.post(f"/v1/sessions/{sid}/messages", json=body, headers=headers).status_code == 201
    )
    client.delete(f"/v1/sessions/{sid}")
    assert (
        client.post(f"/v1/sessions/{sid}/messages", json=body, headers=headers).status_code == 404
    )
    new_session(client, id=sid)
    again = client.post(f"/v1/sessions/{sid}/messages", json=body, headers=headers)
    assert again.status_code == 201  # the key went with the old session
    assert client.get(f"/v1/sessions/{sid}").json()["message_count"] == 1


def test_replays_do_not_count_tokens_again(client: httpx.Client) -> None:
    sid = new_session(client)
    body, headers = (
        {"messages": [{"role": "user", "content": "x"}]},
        {"Idempotency-Key": f"k-{uuid.uuid4()}"},
    )

    def counted() -> float:
        for line in scrape(client).text.splitlines():
            if line.startswith('ctxc_tokens_counted_total{encoding="o200k_base"}'):
                return float(line.split()[-1])
        return 0.0

    client.post(f"/v1/sessions/{sid}/messages", json=body, headers=headers)
    before = counted()
    client.post(f"/v1/sessions/{sid}/messages", json=body, headers=headers)
    assert counted() == before


def test_a_wrong_method_is_405_with_allow_and_a_problem(client: httpx.Client) -> None:
    response = client.put("/v1/sessions")
    assert response.status_code == 405
    assert set(response.headers["allow"].replace(" ", "").split(",")) == {"GET", "POST"}
    assert response.headers["content-type"].startswith("application/problem+json")
