"""Appending and reading messages over HTTP, on both databases."""

from __future__ import annotations

import json
import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest

from tests.conftest import Api, new_session, row_counts

# Compact multi-key JSON (no raw string kept: key order must survive storage), pretty JSON,
# unicode, nesting and text that is not JSON at all.
ARGUMENT_FORMS = [
    lambda i: json.dumps({"path": f"f{i}.py", "offset": i, "limit": 50}, separators=(",", ":")),
    lambda i: json.dumps({"zeta": 1, "alpha": [i, {"b": None, "a": True}]}, indent=2),
    lambda i: json.dumps({"query": f"résumé ✓ {i}", "k": 1.5e-7}, ensure_ascii=False),
    lambda i: f"not json {{{i}",
]


def openai_history(n: int) -> list[dict[str, Any]]:
    """A varied OpenAI-shaped history of ``n`` messages (tool rounds, null content, unicode)."""
    out: list[dict[str, Any]] = []
    i = 0
    while len(out) < n:
        kind = i % 4
        if kind == 0:
            out.append({"role": "user", "content": f"step {i}: résumé ✓ {'x' * (i % 50)}"})
        elif kind == 1:
            out.append(
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": f"call_{i}",
                            "type": "function",
                            "function": {
                                "name": "read_file",
                                "arguments": ARGUMENT_FORMS[i % len(ARGUMENT_FORMS)](i),
                            },
                        }
                    ],
                }
            )
        elif kind == 2:
            out.append(
                {
                    "role": "tool",
                    "tool_call_id": f"call_{i - 1}",
                    "content": "def f():\n    pass\n" * (i % 7),
                }
            )
        else:
            out.append({"role": "assistant", "content": [{"type": "text", "text": f"done {i}"}]})
        i += 1
    return out[:n]


def append(client: httpx.Client, sid: str, messages: list[Any], **extra: Any) -> httpx.Response:
    return client.post(f"/v1/sessions/{sid}/messages", json={"messages": messages, **extra})


def test_append_and_page_back_1000_messages_unchanged(client: httpx.Client) -> None:
    sid = new_session(client)
    history = openai_history(1000)
    for start in range(0, 1000, 250):
        response = append(client, sid, history[start : start + 250])
        assert response.status_code == 201, response.text
        assert response.json()["first_seq"] == start + 1
    got: list[dict[str, Any]] = []
    seqs: list[int] = []
    after = 0
    while True:
        page = client.get(
            f"/v1/sessions/{sid}/messages",
            params={"format": "openai", "after_seq": after, "limit": 300},
        ).json()
        got += page["messages"]
        seqs += page["seqs"]
        if page["next_after_seq"] is None:
            break
        after = page["next_after_seq"]
    assert got == history
    assert seqs == list(range(1, 1001))


def test_every_message_gets_its_count_stored(client: httpx.Client) -> None:
    sid = new_session(client)
    answer = append(client, sid, openai_history(8)).json()
    page = client.get(f"/v1/sessions/{sid}/messages").json()
    assert [i["tokens"] for i in page["items"]] == [m["tokens"] for m in answer["messages"]]
    assert answer["tokens"] == sum(m["tokens"] for m in answer["messages"])
    assert client.get(f"/v1/sessions/{sid}").json()["tokens"] == answer["tokens"]


def test_anthropic_in_canonical_and_openai_out(client: httpx.Client) -> None:
    sid = new_session(client, provider="anthropic")
    turns = [
        {"role": "user", "content": "list files"},
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": "use ls", "signature": "sig"},
                {"type": "tool_use", "id": "tu_1", "name": "ls", "input": {"dir": "."}},
                {"type": "tool_use", "id": "tu_2", "name": "ls", "input": {"dir": "src"}},
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "tu_1", "content": "a.py"},
                {
                    "type": "tool_result",
                    "tool_use_id": "tu_2",
                    "content": "b.py",
                    "is_error": False,
                },
                {"type": "text", "text": "and?"},
            ],
        },
    ]
    response = append(client, sid, turns, format="anthropic", system="Be brief.")
    assert response.status_code == 201, response.text
    assert response.json()["last_seq"] == 4  # the system prompt is a message too
    anthropic = client.get(f"/v1/sessions/{sid}/messages", params={"format": "anthropic"}).json()
    assert anthropic["system"] == "Be brief."
    assert anthropic["messages"] == turns
    assert anthropic["seqs"] == [2, 3, 4]
    openai = client.get(f"/v1/sessions/{sid}/messages", params={"format": "openai"}).json()
    roles = [m["role"] for m in openai["messages"]]
    assert roles == ["system", "user", "assistant", "tool", "tool", "user"]
    assert openai["seqs"] == [1, 2, 3, 4, 4, 4]
    canonical = client.get(f"/v1/sessions/{sid}/messages").json()["items"]
    assert canonical[2]["message"]["content"][0]["type"] == "reasoning"


def test_sections_and_filtering(client: httpx.Client) -> None:
    sid = new_session(client)
    append(client, sid, [{"role": "user", "content": "a"}])
    append(client, sid, [{"role": "user", "content": "note"}], section="buffer")
    append(client, sid, [{"role": "user", "content": "b"}])
    buffer = client.get(f"/v1/sessions/{sid}/messages", params={"section": "buffer"}).json()
    assert [(i["seq"], i["section"]) for i in buffer["items"]] == [(2, "buffer")]
    everything = client.get(f"/v1/sessions/{sid}/messages").json()
    assert [i["seq"] for i in everything["items"]] == [1, 2, 3]


def test_batch_metadata_merges_under_message_metadata(client: httpx.Client) -> None:
    sid = new_session(client)
    messages = [
        {"role": "assistant", "content": "x", "metadata": {"pinned": True, "execution_id": "mine"}},
        {"role": "assistant", "content": "y"},
    ]
    append(client, sid, messages, metadata={"is_trace": True, "execution_id": "e1"})
    items = client.get(f"/v1/sessions/{sid}/messages").json()["items"]
    assert items[0]["message"]["metadata"] == {
        "is_trace": True,
        "execution_id": "mine",
        "pinned": True,
    }
    assert items[1]["message"]["metadata"] == {"is_trace": True, "execution_id": "e1"}


def test_canonical_messages_round_trip(client: httpx.Client) -> None:
    sid = new_session(client)
    message = {
        "role": "assistant",
        "content": [
            {"type": "text", "text": "calling", "metadata": {}},
            {
                "type": "tool_call",
                "id": "c1",
                "name": "run",
                "arguments": "not json {",
                "metadata": {},
            },
        ],
        "metadata": {"pinned": True},
    }
    assert append(client, sid, [message], format="canonical").status_code == 201
    item = client.get(f"/v1/sessions/{sid}/messages").json()["items"][0]
    assert item["message"] == message


def test_idempotent_retry_writes_nothing(api: Api, client: httpx.Client) -> None:
    sid = new_session(client)
    body = {"messages": [{"role": "user", "content": "once"}]}
    headers = {"Idempotency-Key": f"k-{uuid.uuid4()}"}
    first = client.post(f"/v1/sessions/{sid}/messages", json=body, headers=headers)
    assert first.status_code == 201
    before = row_counts(api.database_url)
    again = client.post(f"/v1/sessions/{sid}/messages", json=body, headers=headers)
    assert again.status_code == 201
    assert again.json() == first.json()
    assert row_counts(api.database_url) == before


def test_idempotency_key_with_another_body_is_409(api: Api, client: httpx.Client) -> None:
    sid = new_session(client)
    headers = {"Idempotency-Key": f"k-{uuid.uuid4()}"}
    client.post(
        f"/v1/sessions/{sid}/messages",
        json={"messages": [{"role": "user", "content": "a"}]},
        headers=headers,
    )
    before = row_counts(api.database_url)
    other = client.post(
        f"/v1/sessions/{sid}/messages",
        json={"messages": [{"role": "user", "content": "b"}]},
        headers=headers,
    )
    assert other.status_code == 409
    assert other.json()["title"] == "Conflict"
    assert row_counts(api.database_url) == before


def test_idempotency_keys_belong_to_their_tenant(api: Api) -> None:
    key = f"k-{uuid.uuid4()}"
    with api.client(api.key_a) as a, api.client(api.key_b) as b:
        sid_a, sid_b = new_session(a), new_session(b)
        body = {"messages": [{"role": "user", "content": "a"}]}
        assert (
            a.post(
                f"/v1/sessions/{sid_a}/messages", json=body, headers={"Idempotency-Key": key}
            ).status_code
            == 201
        )
        assert (
            b.post(
                f"/v1/sessions/{sid_b}/messages", json=body, headers={"Idempotency-Key": key}
            ).status_code
            == 201
        )


def test_concurrent_appends_get_gap_free_seqs(api: Api) -> None:
    with api.client() as client:
        sid = new_session(client)

    def post(i: int) -> list[int]:
        with api.client() as c:
            r = append(c, sid, [{"role": "user", "content": f"{i}-{j}"} for j in range(3)])
            assert r.status_code == 201, r.text
            return [m["seq"] for m in r.json()["messages"]]

    with ThreadPoolExecutor(8) as pool:
        batches = list(pool.map(post, range(24)))
    assert sorted(s for b in batches for s in b) == list(range(1, 73))
    assert all(b == list(range(b[0], b[0] + 3)) for b in batches)  # a batch is consecutive


def test_concurrent_retries_of_one_key_write_once(api: Api) -> None:
    with api.client() as client:
        sid = new_session(client)
    headers = {"Idempotency-Key": f"k-{uuid.uuid4()}"}
    body = {"messages": [{"role": "user", "content": "race"}]}

    def post(_: int) -> dict[str, Any]:
        with api.client() as c:
            r = c.post(f"/v1/sessions/{sid}/messages", json=body, headers=headers)
            assert r.status_code == 201, r.text
            return r.json()

    with ThreadPoolExecutor(6) as pool:
        answers = list(pool.map(post, range(6)))
    assert all(a == answers[0] for a in answers)
    with api.client() as client:
        assert client.get(f"/v1/sessions/{sid}").json()["message_count"] == 1


def test_unknown_session_is_404(client: httpx.Client) -> None:
    response = append(client, "no-such-session", [{"role": "user", "content": "x"}])
    assert response.status_code == 404
    assert client.get("/v1/sessions/no-such-session/messages").status_code == 404


@pytest.mark.parametrize(
    ("body", "path"),
    [
        ({"messages": [{"role": "wizard", "content": "x"}]}, "body.messages[0].role"),
        (
            {"messages": [{"role": "user", "content": "ok"}, {"role": "user", "content": 5}]},
            "body.messages[1].content",
        ),
        ({"messages": [{"role": "tool", "content": "x"}]}, "body.messages[0].tool_call_id"),
        ({"messages": [{"role": "user", "content": "x"}], "colour": "red"}, "body.colour"),
        ({"messages": []}, "body.messages"),
        (
            {"messages": [{"role": "user", "content": "x"}], "section": "bad section"},
            "body.section",
        ),
        ({"messages": [{"role": "user", "content": "x"}], "format": "xml"}, "body.format"),
        ({"messages": [{"role": "user", "content": "x"}], "system": "s"}, "body.system"),
        (
            {"format": "anthropic", "messages": [{"role": "developer", "content": "x"}]},
            "body.messages[0].role",
        ),
        (
            {"format": "canonical", "messages": [{"role": "user", "content": [{"type": "image"}]}]},
            "body.messages[0].content[0].image",
        ),
    ],
)
def test_bad_bodies_are_422_naming_the_field_and_write_nothing(
    api: Api, client: httpx.Client, body: dict[str, Any], path: str
) -> None:
    sid = new_session(client)
    before = row_counts(api.database_url)
    response = (
        append(client, sid, **body)
        if "messages" not in body
        else client.post(f"/v1/sessions/{sid}/messages", json=body)
    )
    assert response.status_code == 422, response.text
    assert response.headers["content-type"] == "application/problem+json"
    paths = [e["path"] for e in response.json()["errors"]]
    assert any(p.startswith(path) for p in paths), paths
    assert row_counts(api.database_url) == before


def test_malformed_json_is_400(api: Api, client: httpx.Client) -> None:
    sid = new_session(client)
    before = row_counts(api.database_url)
    response = client.post(
        f"/v1/sessions/{sid}/messages",
        content=b'{"messages": [',
        headers={"content-type": "application/json"},
    )
    assert response.status_code == 400
    assert response.json()["title"] == "Malformed JSON"
    assert row_counts(api.database_url) == before


def test_oversize_body_is_413_and_writes_nothing(api: Api, client: httpx.Client) -> None:
    sid = new_session(client)
    before = row_counts(api.database_url)
    big = {"messages": [{"role": "user", "content": "x" * (300 * 1024)}]}
    response = client.post(f"/v1/sessions/{sid}/messages", json=big)
    assert response.status_code == 413
    assert response.json()["status"] == 413
    assert row_counts(api.database_url) == before


def test_oversize_streamed_body_without_length_is_413(api: Api, client: httpx.Client) -> None:
    sid = new_session(client)
    before = row_counts(api.database_url)

    def chunks() -> Any:
        yield b'{"messages": [{"role": "user", "content": "'
        for _ in range(40):
            yield b"y" * 10_000
        yield b'"}]}'

    response = client.post(
        f"/v1/sessions/{sid}/messages",
        content=chunks(),
        headers={"content-type": "application/json"},
    )
    assert response.status_code == 413
    assert row_counts(api.database_url) == before
