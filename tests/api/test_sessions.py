"""Session CRUD over HTTP, on both databases."""

from __future__ import annotations

import uuid

import httpx

from tests.conftest import Api, new_session, row_counts


def test_create_with_client_id_and_read_back(client: httpx.Client) -> None:
    sid = f"s-{uuid.uuid4().hex}"
    body = {
        "id": sid,
        "metadata": {"team": "infra", "n": 1},
        "system_prompt": [
            {"name": "identity", "text": "You are terse.", "lifecycle": "static"},
            {"name": "todos", "text": "- ship", "lifecycle": "dynamic"},
        ],
        "response_format": {"type": "json_object"},
        "provider": "gpt-4",
        "resume_key": "/repo",
        "context_window": 32000,
        "compiler": {"base": "current_tool_trace", "decorators": []},
    }
    created = client.post("/v1/sessions", json=body)
    assert created.status_code == 201, created.text
    got = client.get(f"/v1/sessions/{sid}").json()
    assert got == created.json()
    assert got["id"] == sid
    assert got["encoding"] == "cl100k_base"
    assert got["system_prompt"][1] == {"name": "todos", "text": "- ship", "lifecycle": "dynamic"}
    assert got["message_count"] == 0 and got["last_seq"] == 0 and got["tokens"] == 0


def test_generated_id_and_default_provider(client: httpx.Client) -> None:
    created = client.post("/v1/sessions", json={}).json()
    assert created["id"].startswith("ses_")
    assert created["provider"] == "openai"
    assert created["encoding"] == "o200k_base"


def test_duplicate_id_is_409(client: httpx.Client) -> None:
    sid = new_session(client)
    response = client.post("/v1/sessions", json={"id": sid})
    assert response.status_code == 409
    assert response.headers["content-type"] == "application/problem+json"


def test_patch_changes_only_sent_fields(client: httpx.Client) -> None:
    sid = new_session(client, metadata={"a": 1}, resume_key="/one", context_window=1000)
    response = client.patch(
        f"/v1/sessions/{sid}", json={"context_window": None, "metadata": {"b": 2}}
    )
    assert response.status_code == 200, response.text
    got = response.json()
    assert got["context_window"] is None
    assert got["metadata"] == {"b": 2}
    assert got["resume_key"] == "/one"
    assert got["updated_at"] >= got["created_at"]


def test_patch_rejects_null_for_required_fields(client: httpx.Client) -> None:
    sid = new_session(client)
    response = client.patch(f"/v1/sessions/{sid}", json={"provider": None})
    assert response.status_code == 422
    assert response.json()["errors"][0]["path"] == "body.provider"


def test_unknown_provider_is_422_listing_the_available_ones(client: httpx.Client) -> None:
    response = client.post("/v1/sessions", json={"provider": "gpt-9000"})
    assert response.status_code == 422
    problem = response.json()
    assert problem["errors"][0]["path"] == "body.provider"
    assert "gpt-4o" in problem["detail"] and "anthropic" in problem["detail"]


def test_duplicate_fragment_names_are_rejected(client: httpx.Client) -> None:
    fragments = [{"name": "x", "text": "a"}, {"name": "x", "text": "b"}]
    response = client.post("/v1/sessions", json={"system_prompt": fragments})
    assert response.status_code == 422
    assert response.json()["errors"][0]["path"] == "body.system_prompt"


def test_delete_removes_session_and_messages(api: Api, client: httpx.Client) -> None:
    sid = new_session(client)
    client.post(
        f"/v1/sessions/{sid}/messages", json={"messages": [{"role": "user", "content": "x"}]}
    )
    before = row_counts(api.database_url)
    assert client.delete(f"/v1/sessions/{sid}").status_code == 204
    after = row_counts(api.database_url)
    assert after["sessions"] == before["sessions"] - 1
    assert after["messages"] == before["messages"] - 1
    assert client.get(f"/v1/sessions/{sid}").status_code == 404
    assert client.delete(f"/v1/sessions/{sid}").status_code == 404


def test_list_pages_in_id_order(api: Api) -> None:
    # A tenant of its own, so the listing holds exactly what this test made.
    from tests.conftest import make_key

    with api.client(make_key(api.database_url, f"lister-{uuid.uuid4().hex[:6]}")) as client:
        ids = sorted(new_session(client, id=f"p{i:02d}") for i in range(7))
        page = client.get("/v1/sessions", params={"limit": 3}).json()
        seen = [s["id"] for s in page["items"]]
        while page["next_after"]:
            page = client.get(
                "/v1/sessions", params={"limit": 3, "after": page["next_after"]}
            ).json()
            seen += [s["id"] for s in page["items"]]
        assert seen == ids


def test_list_reports_message_figures(api: Api) -> None:
    from tests.conftest import make_key

    with api.client(make_key(api.database_url, f"figures-{uuid.uuid4().hex[:6]}")) as client:
        sid = new_session(client)
        message = {"messages": [{"role": "user", "content": "hi"}]}
        client.post(f"/v1/sessions/{sid}/messages", json=message)
        [listed] = client.get("/v1/sessions").json()["items"]
        assert listed["id"] == sid
        assert listed["message_count"] == 1 and listed["last_seq"] == 1 and listed["tokens"] > 0
        assert listed == client.get(f"/v1/sessions/{sid}").json()
