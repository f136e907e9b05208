"""The OpenAPI document tells the truth: real answers of a live server match what it documents
for their route and status (media type and schema), and it declares the auth the routes need."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from jsonschema import Draft202012Validator

from tests.api.test_messages import openai_history
from tests.conftest import Api, new_session, scrape

PROBLEM = "application/problem+json"


@pytest.fixture(scope="module")
def document(api: Api) -> dict[str, Any]:
    with httpx.Client(base_url=api.url) as client:
        spec: dict[str, Any] = client.get("/openapi.json").json()
        return spec


def check(document: dict[str, Any], path: str, method: str, response: httpx.Response) -> None:
    """``response`` has the media type and fits the schema documented for it."""
    operation = document["paths"][path][method]
    answer = operation["responses"][str(response.status_code)]
    media = response.headers["content-type"].split(";")[0]
    [documented] = [m for m in answer["content"] if m.split(";")[0] == media]
    schema = {**answer["content"][documented]["schema"], "components": document["components"]}
    if media.endswith("json"):
        errors = list(Draft202012Validator(schema).iter_errors(response.json()))
        assert errors == [], (path, response.status_code, [e.message for e in errors])


def test_every_v1_operation_declares_the_bearer_scheme(document: dict[str, Any]) -> None:
    scheme = document["components"]["securitySchemes"]["bearer"]
    assert (scheme["type"], scheme["scheme"]) == ("http", "bearer")
    for path, item in document["paths"].items():
        for method, operation in item.items():
            if path.startswith("/v1/"):
                assert operation["security"] == [{"bearer": []}], (method, path)
                assert "401" in operation["responses"], (method, path)
            else:  # health, readiness and metrics need no key
                assert "security" not in operation, (method, path)
    assert "security" not in document


def test_every_error_is_documented_as_a_problem(document: dict[str, Any]) -> None:
    assert "HTTPValidationError" not in str(document)
    for path, item in document["paths"].items():
        for method, operation in item.items():
            for status, answer in operation["responses"].items():
                if status.startswith("4"):
                    assert answer["content"] == {
                        PROBLEM: {"schema": {"$ref": "#/components/schemas/Problem"}}
                    }, (method, path, status)


def test_real_error_answers_match_the_document(
    api: Api, client: httpx.Client, document: dict[str, Any]
) -> None:
    sid = new_session(client)
    answers = [
        ("/v1/sessions", "post", client.post("/v1/sessions", json={"metadata": 3})),
        ("/v1/sessions/{session_id}", "get", client.get("/v1/sessions/missing")),
        ("/v1/sessions/{session_id}", "delete", client.delete("/v1/sessions/missing")),
        ("/v1/providers", "get", httpx.get(f"{api.url}/v1/providers")),
        ("/v1/compile", "post", client.post("/v1/compile", content=b"{not json")),
        ("/v1/compile", "post", client.post("/v1/compile", json={"messages": [{"role": 1}]})),
        (
            "/v1/sessions/{session_id}/messages",
            "post",
            client.post(f"/v1/sessions/{sid}/messages", json={"messages": [{"role": "nobody"}]}),
        ),
        (
            "/v1/sessions/{session_id}/compile",
            "post",
            client.post(f"/v1/sessions/{sid}/compile", json={"context_window": "big"}),
        ),
        (
            "/v1/sessions",
            "post",
            client.post(
                "/v1/sessions",
                content=b"x" * (300 * 1024),
                headers={"content-type": "application/json"},
            ),
        ),
    ]
    statuses = set()
    for path, method, response in answers:
        assert response.status_code >= 400 and response.headers["content-type"] == PROBLEM
        check(document, path, method, response)
        statuses.add(response.status_code)
    assert statuses == {400, 401, 404, 413, 422}
    invalid = answers[0][2].json()
    assert invalid["errors"][0]["path"] == "body.metadata"


def test_real_successes_and_health_match_the_document(
    api: Api, client: httpx.Client, document: dict[str, Any]
) -> None:
    history = [{"role": "system", "content": "Be brief."}, *openai_history(5)]
    for provider in ("gpt-4o", "anthropic"):
        answer = client.post("/v1/compile", json={"messages": history, "provider": provider})
        check(document, "/v1/compile", "post", answer)
    for path in ("/healthz", "/readyz"):
        check(document, path, "get", httpx.get(api.url + path))
    check(document, "/metrics", "get", scrape(client))
