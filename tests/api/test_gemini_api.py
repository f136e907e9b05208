"""The Gemini shape over HTTP: append, read back, originals, compile (session and stateless)."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from app.domain.validity import gemini_problems
from tests.api.test_compaction import POLICY
from tests.api.test_messages import append, openai_history
from tests.api.test_openapi_answers import check
from tests.conftest import Api, new_session, row_counts
from tests.unit.test_gemini_format import FLIGHT, LIGHTS, LIGHTS_SYSTEM, WITH_IDS


def valid(response: httpx.Response) -> dict[str, Any]:
    assert response.status_code == 200, response.text
    answer: dict[str, Any] = response.json()
    assert answer["format"] == "gemini"
    assert gemini_problems(answer.get("system"), answer["messages"]) == []
    return answer


def test_gemini_in_and_every_shape_out(client: httpx.Client) -> None:
    sid = new_session(client, provider="gemini-2.5-flash")
    response = append(client, sid, LIGHTS, format="gemini", system=LIGHTS_SYSTEM)
    assert response.status_code == 201, response.text
    assert response.json()["last_seq"] == 4  # the system instruction is a message too
    page = client.get(f"/v1/sessions/{sid}/messages", params={"format": "gemini"}).json()
    assert page["format"] == "gemini"
    assert page["system"] == LIGHTS_SYSTEM
    assert page["messages"] == LIGHTS
    assert page["seqs"] == [2, 3, 4]
    openai = client.get(f"/v1/sessions/{sid}/messages", params={"format": "openai"}).json()
    assert [m["role"] for m in openai["messages"]] == ["system", "user", "assistant", "tool"]
    assert openai["messages"][3]["tool_call_id"] == "set_light_values_0"
    canonical = client.get(f"/v1/sessions/{sid}/messages").json()["items"]
    assert canonical[2]["message"]["content"][0]["type"] == "tool_call"


def test_contents_appended_one_by_one_compile_back_unchanged(client: httpx.Client) -> None:
    sid = new_session(client, provider="gemini")
    for content in FLIGHT:  # a call and its response in separate batches still pair
        assert append(client, sid, [content], format="gemini").status_code == 201
    answer = valid(client.post(f"/v1/sessions/{sid}/compile", json={}))
    assert answer["messages"] == FLIGHT
    assert answer["warnings"] == []
    assert "system" not in answer
    tokens = answer["tokens"]
    assert tokens["context_window"] == 1_048_576 and tokens["exact"] is False


def test_a_session_compile_sends_the_system_instruction_and_native_response_format(
    client: httpx.Client,
) -> None:
    schema = {"type": "object", "properties": {"ok": {"type": "boolean"}}}
    sid = new_session(
        client,
        provider="gemini-2.5-pro",
        system_prompt=[{"name": "rules", "text": "Answer in JSON."}],
        response_format={"type": "json_schema", "json_schema": {"name": "r", "schema": schema}},
    )
    append(client, sid, openai_history(9))
    answer = valid(client.post(f"/v1/sessions/{sid}/compile", json={}))
    assert answer["system"] == {"parts": [{"text": "Answer in JSON."}]}
    assert answer["messages"][0]["role"] == "user"
    assert answer["response_format"] == {
        "responseMimeType": "application/json",
        "responseJsonSchema": schema,
    }


@pytest.mark.parametrize("posted_as", ["openai", "gemini"])
def test_a_stateless_history_compiles_to_gemini(
    api: Api, client: httpx.Client, posted_as: str
) -> None:
    body: dict[str, Any] = {"provider": "gemini", "format": posted_as}
    if posted_as == "gemini":
        body |= {"messages": WITH_IDS, "system": {"parts": [{"text": "Be brief."}]}}
    else:
        body |= {"messages": [{"role": "system", "content": "Be brief."}, *openai_history(12)]}
    before = row_counts(api.database_url)
    answer = valid(client.post("/v1/compile", json=body))
    assert row_counts(api.database_url) == before
    assert answer["system"] == {"parts": [{"text": "Be brief."}]}
    if posted_as == "gemini":
        assert answer["messages"] == WITH_IDS


def test_a_tool_calls_originals_read_in_the_gemini_shape(client: httpx.Client) -> None:
    sid = new_session(client)
    append(client, sid, FLIGHT, format="gemini")
    found = client.get(f"/v1/sessions/{sid}/tool-calls/book_taxi_0", params={"format": "gemini"})
    assert found.status_code == 200, found.text
    shaped = found.json()
    assert shaped["format"] == "gemini"
    assert shaped["call"] == FLIGHT[3]["parts"][0]["functionCall"]
    assert shaped["result"] == FLIGHT[4]["parts"][0]["functionResponse"]


@pytest.mark.parametrize(
    ("body", "path"),
    [
        (
            {"messages": [{"role": "user", "parts": [{"text": "a", "inlineData": {}}]}]},
            "body.messages[0].parts[0]",
        ),
        (
            {"messages": [{"role": "model", "parts": [{"function_call": {"name": "f"}}]}]},
            "body.messages[0].parts[0].function_call",
        ),
        ({"messages": [{"role": "assistant", "content": "hi"}]}, "body.messages[0].role"),
        (
            {
                "messages": [
                    {"role": "user", "parts": [{"text": "ok"}]},
                    {"role": "model", "parts": [{"functionResponse": {"name": "f"}}]},
                ]
            },
            "body.messages[1].content[0]",
        ),
        (
            {"messages": [{"role": "user", "parts": [{"text": "ok"}]}], "system": ["x"]},
            "body.system",
        ),
        (
            {
                "messages": [{"role": "user", "parts": [{"text": "ok"}]}],
                "system": {"parts": [{"functionCall": {"name": "f"}}]},
            },
            "body.system.parts[0]",
        ),
    ],
)
def test_bad_gemini_bodies_are_422_naming_the_field_and_write_nothing(
    api: Api, client: httpx.Client, body: dict[str, Any], path: str
) -> None:
    sid = new_session(client)
    before = row_counts(api.database_url)
    response = client.post(f"/v1/sessions/{sid}/messages", json={"format": "gemini", **body})
    assert response.status_code == 422, response.text
    assert response.headers["content-type"] == "application/problem+json"
    paths = [e["path"] for e in response.json()["errors"]]
    assert any(p.startswith(path) for p in paths), paths
    assert row_counts(api.database_url) == before


def test_the_gemini_profile_and_models_are_listed(client: httpx.Client) -> None:
    providers = client.get("/v1/providers").json()
    listed = providers if isinstance(providers, list) else providers.get("items", providers)
    assert any(p["name"] == "gemini" and p["output"] == "gemini" for p in listed)
    models = client.get("/v1/models").json()
    rows = models if isinstance(models, list) else models.get("items", models)
    pro = next(m for m in rows if m["name"] == "gemini-2.5-pro")
    assert pro["context_window"] == 1_048_576


def gemini_history(rounds: int) -> list[dict[str, Any]]:
    """A coding session in Gemini contents: each round reads two files in parallel calls
    (without ids, signed as Gemini signs the first), answered in one user turn."""
    out: list[dict[str, Any]] = [
        {"role": "user", "parts": [{"text": "Fix the flaky test in tests/test_sync.py."}]}
    ]
    for n in range(rounds):
        body = "\n".join(f"def handler_{n}_{k}(event):\n    return event" for k in range(12))
        out += [
            {
                "role": "model",
                "parts": [
                    {"text": f"Module {n} next.", "thought": True},
                    {
                        "functionCall": {"name": "read_file", "args": {"path": f"src/m_{n}.py"}},
                        "thoughtSignature": f"sig{n}",
                    },
                    {"functionCall": {"name": "read_file", "args": {"path": f"tests/t_{n}.py"}}},
                ],
            },
            {
                "role": "user",
                "parts": [
                    {"functionResponse": {"name": "read_file", "response": {"output": body}}},
                    {
                        "functionResponse": {
                            "name": "read_file",
                            "response": {"error": "No such file."},
                        }
                    },
                ],
            },
        ]
    return [
        *out,
        {"role": "model", "parts": [{"text": "I read them all."}]},
        {"role": "user", "parts": [{"text": "Now fix it."}]},
    ]


def test_an_archive_reads_back_in_the_gemini_shape_it_was_posted_in(client: httpx.Client) -> None:
    sid = new_session(client, provider="gemini", compaction=POLICY)
    history = gemini_history(8)
    sent = append(client, sid, history, format="gemini")
    assert sent.status_code == 201, sent.text
    done = client.post(f"/v1/sessions/{sid}/compact", json={"kind": "full"})
    assert done.status_code == 201, done.text
    url = f"/v1/sessions/{sid}/compactions/{done.json()['id']}"
    shaped = client.get(url, params={"format": "gemini"})
    assert shaped.status_code == 200, shaped.text
    check(
        client.get("/openapi.json").json(),
        "/v1/sessions/{session_id}/compactions/{compaction_id}",
        "get",
        shaped,
    )
    canonical = client.get(url).json()
    document = shaped.json()["archived"]
    assert document["format"] == "gemini"
    assert document["messages"] == history[canonical["seq_from"] - 1 : canonical["seq_to"]]
    assert (
        valid(client.post(f"/v1/sessions/{sid}/compile", json={}))["messages"][0]["role"] == "user"
    )


def test_gemini_contents_are_counted(client: httpx.Client) -> None:
    body = {"format": "gemini", "messages": FLIGHT, "provider": "gemini"}
    bare = client.post("/v1/tokens/count", json=body)
    assert bare.status_code == 200, bare.text
    with_system = client.post("/v1/tokens/count", json={**body, "system": LIGHTS_SYSTEM})
    assert with_system.status_code == 200, with_system.text
    assert len(bare.json()["messages"]) == len(FLIGHT)
    assert len(with_system.json()["messages"]) == len(FLIGHT) + 1  # the system instruction
    assert with_system.json()["total"] > bare.json()["total"] > 0
