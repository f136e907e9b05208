"""Export and import (seeds/000 serialisation) and the provider list."""

from __future__ import annotations

import uuid

import httpx

from tests.api.test_messages import openai_history
from tests.conftest import Api, new_session, row_counts


def test_export_then_import_then_export_is_equal(api: Api) -> None:
    with api.client(api.key_a) as a, api.client(api.key_b) as b:
        sid = new_session(
            a,
            id=f"x-{uuid.uuid4().hex}",
            metadata={"k": [1, {"z": None}]},
            provider="gpt-4",
            system_prompt=[{"name": "id", "text": "You are kind.", "lifecycle": "static"}],
            response_format={"type": "json_object"},
            resume_key="/r",
            context_window=9000,
            compiler={"base": "all_sections"},
        )
        a.post(f"/v1/sessions/{sid}/messages", json={"messages": openai_history(40)})
        a.post(
            f"/v1/sessions/{sid}/messages",
            json={
                "messages": [{"role": "user", "content": "n"}],
                "section": "buffer",
                "metadata": {"pinned": True},
            },
        )
        exported = a.get(f"/v1/sessions/{sid}/export").json()
        assert exported["format"] == "ctxc.session/v2"
        assert [m["seq"] for m in exported["messages"]] == list(range(1, 42))
        imported = b.post("/v1/sessions/import", json=exported)
        assert imported.status_code == 201, imported.text
        assert imported.json()["message_count"] == 41 and imported.json()["last_seq"] == 41
        assert b.get(f"/v1/sessions/{sid}/export").json() == exported
        original = a.get(f"/v1/sessions/{sid}/messages", params={"format": "openai"}).json()
        copy = b.get(f"/v1/sessions/{sid}/messages", params={"format": "openai"}).json()
        assert copy == original


def test_importing_an_existing_id_is_409_and_writes_nothing(api: Api, client: httpx.Client) -> None:
    sid = new_session(client)
    client.post(f"/v1/sessions/{sid}/messages", json={"messages": openai_history(4)})
    exported = client.get(f"/v1/sessions/{sid}/export").json()
    before = row_counts(api.database_url)
    assert client.post("/v1/sessions/import", json=exported).status_code == 409
    assert row_counts(api.database_url) == before


def test_bad_import_documents_are_422_and_write_nothing(api: Api, client: httpx.Client) -> None:
    sid = new_session(client)
    client.post(f"/v1/sessions/{sid}/messages", json={"messages": openai_history(3)})
    exported = client.get(f"/v1/sessions/{sid}/export").json()
    exported["session"]["id"] = f"new-{uuid.uuid4().hex}"
    before = row_counts(api.database_url)
    reordered = exported | {"messages": exported["messages"][::-1]}
    assert client.post("/v1/sessions/import", json=reordered).status_code == 422
    broken = exported | {"messages": [exported["messages"][0] | {"message": {"role": "x"}}]}
    response = client.post("/v1/sessions/import", json=broken)
    assert response.status_code == 422
    assert response.json()["errors"][0]["path"].startswith("body.messages[0]")
    assert client.post("/v1/sessions/import", json=exported | {"format": "v0"}).status_code == 422
    assert row_counts(api.database_url) == before


def test_export_of_another_tenants_session_is_404(api: Api) -> None:
    with api.client(api.key_a) as a, api.client(api.key_b) as b:
        sid = new_session(a)
        assert b.get(f"/v1/sessions/{sid}/export").status_code == 404


def test_providers_are_listed_with_capabilities(client: httpx.Client) -> None:
    listing = client.get("/v1/providers").json()
    profiles = {p["name"]: p for p in listing["items"]}
    assert listing["default"] == "openai"
    assert profiles["gpt-4o"]["encoding"] == "o200k_base" and profiles["gpt-4o"]["exact"]
    assert profiles["gpt-4"]["encoding"] == "cl100k_base"
    assert profiles["anthropic"]["output"] == "anthropic" and not profiles["anthropic"]["exact"]
    assert (
        profiles["claude-code"]["session_resumption"]
        and profiles["codex-cli"]["session_resumption"]
    )
    assert (
        not profiles["openrouter"]["session_resumption"]
        and profiles["ollama"]["output"] == "openai"
    )


def test_imported_times_keep_their_instant_and_offset(client: httpx.Client) -> None:
    sid = new_session(client)
    client.post(f"/v1/sessions/{sid}/messages", json={"messages": openai_history(2)})
    exported = client.get(f"/v1/sessions/{sid}/export").json()
    exported["session"] |= {
        "id": f"t-{uuid.uuid4().hex}",
        "created_at": "2026-01-02T03:04:05+05:30",
        "updated_at": "2026-01-02T03:04:06.250000-08:00",
    }
    exported["messages"][0]["created_at"] = "2026-01-02T03:04:05+05:30"
    exported["messages"][1]["created_at"] = "0001-01-01T00:00:00Z"
    imported = client.post("/v1/sessions/import", json=exported)
    assert imported.status_code == 201, imported.text
    again = client.get(f"/v1/sessions/{exported['session']['id']}/export").json()
    assert again == exported
    page = client.get(f"/v1/sessions/{exported['session']['id']}/messages").json()
    assert page["items"][0]["created_at"] == "2026-01-02T03:04:05+05:30"
    session = client.get(f"/v1/sessions/{exported['session']['id']}").json()
    assert session["updated_at"] == "2026-01-02T03:04:06.250000-08:00"


def test_a_time_the_database_cannot_hold_is_a_422_naming_it(api: Api, client: httpx.Client) -> None:
    sid = new_session(client)
    client.post(f"/v1/sessions/{sid}/messages", json={"messages": openai_history(2)})
    exported = client.get(f"/v1/sessions/{sid}/export").json()
    exported["session"]["id"] = f"t-{uuid.uuid4().hex}"
    before = row_counts(api.database_url)
    for bad, expected in (
        ("0001-01-01T00:00:00+05:30", "years 1 to 9999"),
        ("2026-01-02T03:04:05", "UTC offset"),
    ):
        document = exported | {
            "messages": [exported["messages"][0] | {"created_at": bad}, exported["messages"][1]]
        }
        response = client.post("/v1/sessions/import", json=document)
        assert response.status_code == 422, response.text
        [error] = response.json()["errors"]
        assert error["path"] == "body.messages[0].created_at" and expected in error["message"]
    assert row_counts(api.database_url) == before
