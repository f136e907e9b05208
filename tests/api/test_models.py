"""Model names wherever a provider is accepted, GET /v1/models and CTXC_MODELS, live."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from pydantic import ValidationError

from app.cli import main
from app.settings import Settings
from tests.conftest import Api, LiveServer, make_key, new_session, row_counts

HISTORY = [
    {"role": "system", "content": "You are terse."},
    {"role": "user", "content": "What is 2+2?"},
    {"role": "assistant", "content": "4"},
]
DECLARED = {
    "llama-3.1-70b": {"provider": "ollama", "context_window": 131_072},
    "ft:gpt-4o-mini:acme": {"provider": "gpt-4o-mini", "description": "Our tuned model."},
}


@pytest.fixture(scope="module")
def declared(database_url: str) -> Iterator[Api]:
    """A server with models declared in CTXC_MODELS, on each database."""
    settings = Settings(database_url=database_url, auth="keys", models=json.dumps(DECLARED))
    key = make_key(database_url, f"tenant-m-{uuid.uuid4().hex[:6]}")
    with LiveServer(settings) as server:
        yield Api(server.url, database_url, key, key)


def compile_session(client: httpx.Client, sid: str, **body: Any) -> dict[str, Any]:
    response = client.post(f"/v1/sessions/{sid}/compile", json=body)
    assert response.status_code == 200, response.text
    answer: dict[str, Any] = response.json()
    return answer


def append(client: httpx.Client, sid: str, messages: list[Any], **body: Any) -> None:
    response = client.post(f"/v1/sessions/{sid}/messages", json={"messages": messages, **body})
    assert response.status_code == 201, response.text


@pytest.mark.parametrize(
    ("provider", "output", "window", "encoding"),
    [
        ("claude-sonnet-4-5-20250929", "anthropic", 200_000, "o200k_base"),
        ("claude-opus-4-1", "anthropic", 200_000, "o200k_base"),
        ("gpt-4.1-2025-04-14", "openai", 1_047_576, "o200k_base"),
        ("gpt-4o-mini", "openai", 128_000, "o200k_base"),
        ("gpt-3.5-turbo-0125", "openai", 16_385, "cl100k_base"),
    ],
)
def test_a_session_of_a_model_compiles_for_its_provider_with_its_window(
    client: httpx.Client, provider: str, output: str, window: int, encoding: str
) -> None:
    sid = new_session(client, provider=provider)
    session = client.get(f"/v1/sessions/{sid}").json()
    assert (session["provider"], session["encoding"]) == (provider, encoding)
    append(client, sid, HISTORY)
    answer = compile_session(client, sid)
    assert answer["provider"] == provider and answer["format"] == output
    assert answer["tokens"]["context_window"] == window


def test_an_unknown_model_is_a_422_naming_the_field_and_how_to_declare_it(
    api: Api, client: httpx.Client
) -> None:
    before = row_counts(api.database_url)
    response = client.post("/v1/sessions", json={"provider": "claude-sonnet-9"})
    assert response.status_code == 422
    assert response.headers["content-type"] == "application/problem+json"
    [error] = response.json()["errors"]
    assert error["path"] == "body.provider"
    assert "'claude-sonnet-9'" in error["message"] and "CTXC_MODELS" in error["message"]
    assert "context_window" in error["message"]
    assert row_counts(api.database_url) == before


def test_a_session_can_change_to_a_model_and_not_to_an_unknown_one(client: httpx.Client) -> None:
    sid = new_session(client)
    refused = client.patch(f"/v1/sessions/{sid}", json={"provider": "gpt-9"})
    assert refused.status_code == 422
    assert refused.json()["errors"][0]["path"] == "body.provider"
    assert client.get(f"/v1/sessions/{sid}").json()["provider"] == "openai"
    changed = client.patch(f"/v1/sessions/{sid}", json={"provider": "claude-haiku-4-5-20251001"})
    assert changed.status_code == 200 and changed.json()["provider"] == "claude-haiku-4-5-20251001"


def test_posted_compiles_and_counts_take_model_names(client: httpx.Client) -> None:
    answer = client.post("/v1/compile", json={"messages": HISTORY, "provider": "o3-2025-04-16"})
    assert answer.status_code == 200, answer.text
    assert answer.json()["tokens"]["context_window"] == 200_000
    counted = client.post("/v1/tokens/count", json={"messages": HISTORY, "provider": "gpt-4.1"})
    assert counted.json()["provider"] == "gpt-4.1" and counted.json()["exact"] is True
    estimate = client.post(
        "/v1/tokens/count", json={"messages": HISTORY, "provider": "claude-opus-4-1"}
    ).json()
    assert estimate["exact"] is False and "not public" in estimate["note"]
    for path in ("/v1/compile", "/v1/tokens/count"):
        refused = client.post(path, json={"messages": HISTORY, "provider": "gpt-4.1-nope"})
        assert refused.status_code == 422
        assert refused.json()["errors"][0]["path"] == "body.provider"


def test_an_import_takes_a_model_name_and_refuses_an_unknown_one(client: httpx.Client) -> None:
    sid = new_session(client, provider="claude-sonnet-4-5")
    append(client, sid, HISTORY)
    document = client.get(f"/v1/sessions/{sid}/export").json()
    client.delete(f"/v1/sessions/{sid}")
    unknown = json.loads(json.dumps(document))
    unknown["session"]["provider"] = "claude-sonnet-9"
    refused = client.post("/v1/sessions/import", json=unknown)
    assert refused.status_code == 422
    assert refused.json()["errors"][0]["path"] == "body.session.provider"
    assert client.get(f"/v1/sessions/{sid}").status_code == 404
    imported = client.post("/v1/sessions/import", json=document)
    assert imported.status_code == 201 and imported.json()["provider"] == "claude-sonnet-4-5"


def test_the_models_are_listed_with_their_profiles_and_windows(client: httpx.Client) -> None:
    response = client.get("/v1/models")
    assert response.status_code == 200
    models = {m["name"]: m for m in response.json()["items"]}
    assert models["claude-sonnet-4-5"] | {"description": ""} == {
        "name": "claude-sonnet-4-5",
        "provider": "anthropic",
        "output": "anthropic",
        "encoding": "o200k_base",
        "exact": False,
        "context_window": 200_000,
        "declared": False,
        "description": "",
    }
    assert models["gpt-4.1"]["context_window"] == 1_047_576
    assert models["gpt-4"]["encoding"] == "cl100k_base"
    assert not any(m["declared"] for m in models.values())


def test_declared_models_are_listed_and_resolve(declared: Api) -> None:
    with declared.client() as client:
        models = {m["name"]: m for m in client.get("/v1/models").json()["items"]}
        assert models["llama-3.1-70b"]["declared"] is True
        assert models["ft:gpt-4o-mini:acme"]["description"] == "Our tuned model."
        sid = new_session(client, provider="llama-3.1-70b")
        append(client, sid, HISTORY)
        answer = compile_session(client, sid)
        assert answer["tokens"]["context_window"] == 131_072 and answer["format"] == "openai"
        counted = client.post(
            "/v1/tokens/count", json={"messages": HISTORY, "provider": "ft:gpt-4o-mini:acme"}
        ).json()
        assert counted["exact"] is True and counted["encoding"] == "o200k_base"


def test_a_session_whose_declared_model_is_gone_says_how_to_mend_it(
    declared: Api, database_url: str
) -> None:
    with declared.client() as client:
        sid = new_session(client, provider="llama-3.1-70b")
    # The same database served without the declaration.
    with LiveServer(Settings(database_url=database_url, auth="keys")) as server:
        headers = {"Authorization": f"Bearer {declared.key_a}"}
        with httpx.Client(base_url=server.url, headers=headers, timeout=60) as client:
            # Still read and listed (its figures in o200k_base), so it can be mended or moved.
            assert client.get(f"/v1/sessions/{sid}").status_code == 200
            listed = client.get("/v1/sessions", params={"limit": 500}).json()["items"]
            assert sid in [s["id"] for s in listed]
            gone = client.post(f"/v1/sessions/{sid}/compile", json={})
            assert gone.status_code == 409
            assert "llama-3.1-70b" in gone.json()["detail"]
            assert "CTXC_MODELS" in gone.json()["detail"]
            assert (
                client.patch(f"/v1/sessions/{sid}", json={"context_window": 9}).status_code == 409
            )
            mended = client.patch(f"/v1/sessions/{sid}", json={"provider": "ollama"})
            assert mended.status_code == 200 and mended.json()["provider"] == "ollama"


def test_models_may_be_declared_in_a_file(tmp_path: Path) -> None:
    path = tmp_path / "models.json"
    path.write_text(json.dumps(DECLARED))
    catalog = Settings(models=str(path)).catalog
    assert catalog.resolve("llama-3.1-70b").context_window == 131_072


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ('{"m": {"provider": "nope"}}', "CTXC_MODELS['m']: provider 'nope' is neither"),
        (
            '{"m": {"provider": "openai", "context_window": 0}}',
            "CTXC_MODELS['m']['context_window']: Input should be greater than or equal to 1",
        ),
        ('{"m": {"provider": "openai", "window": 8}}', "CTXC_MODELS['m']['window']: Extra inputs"),
        ('{"m": ', "CTXC_MODELS is not valid JSON"),
        ("[]", "CTXC_MODELS: Input should be a valid dictionary"),
        ("/no/such/models.json", "CTXC_MODELS is neither a JSON object nor a readable file"),
    ],
)
def test_an_invalid_model_configuration_is_refused_at_start_up(value: str, problem: str) -> None:
    with pytest.raises(ValidationError) as caught:
        Settings(models=value)
    [error] = caught.value.errors()
    assert error["msg"].startswith("Value error, " + problem)


def test_the_command_line_stops_on_an_invalid_model_configuration(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("CTXC_MODELS", '{"m": {"provider": "nope"}}')
    assert main(["migrate"]) == 2
    assert "CTXC_MODELS['m']: provider 'nope'" in capsys.readouterr().err
    monkeypatch.setenv("CTXC_MODELS", "{}")
    monkeypatch.setenv("CTXC_DEFAULT_PROVIDER", "gpt-9")
    assert main(["migrate"]) == 2
    assert "CTXC_DEFAULT_PROVIDER 'gpt-9'" in capsys.readouterr().err
