"""What fuzzing from the contract (tests/contract/test_fuzz.py) found, each pinned down on its
own: answers that were server errors, or that the OpenAPI document did not describe."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import new_session

DOCUMENT = Path(__file__).resolve().parents[2] / "openapi" / "openapi.json"
PROBLEM = "application/problem+json"


def operations() -> list[tuple[str, str, dict[str, Any]]]:
    spec = json.loads(DOCUMENT.read_text())
    return [(m, p, op) for p, item in spec["paths"].items() for m, op in item.items()]


def test_every_operation_with_a_body_documents_its_refusals() -> None:
    """A body can be malformed (400), too large (413) or invalid (422) on any route."""
    missing = [
        (method, path, status)
        for method, path, operation in operations()
        if "requestBody" in operation
        for status in ("400", "413", "422")
        if status not in operation["responses"]
    ]
    assert missing == []


@pytest.mark.parametrize("body", [b"\xff\xfe{", b'{"metadata": "\xe9"}'])
def test_a_body_that_is_not_utf8_is_malformed_json(client: httpx.Client, body: bytes) -> None:
    sid = new_session(client)
    for method, path in [
        ("POST", "/v1/sessions"),
        ("PATCH", f"/v1/sessions/{sid}"),
        ("POST", f"/v1/sessions/{sid}/compact"),
        ("POST", f"/v1/sessions/{sid}/cursor"),
    ]:
        answer = client.request(
            method, path, content=body, headers={"content-type": "application/json"}
        )
        assert answer.status_code == 400, (method, path, answer.text)
        assert answer.headers["content-type"] == PROBLEM
        assert answer.json()["type"] == "urn:ctxc:problem:malformed-json", answer.text


@pytest.mark.parametrize(
    ("body", "path"),
    [
        ({"profile": {"session_resumption": 1}}, "body.profile.session_resumption"),
        ({"profile": {"prompt_cache": "yes"}}, "body.profile.prompt_cache"),
        ({"context_window": True}, "body.context_window"),
        ({"context_window": "8000"}, "body.context_window"),
        ({"profile": {"context_window": "8000"}}, "body.profile.context_window"),
    ],
)
def test_a_value_of_another_type_than_documented_is_refused(
    client: httpx.Client, body: dict[str, Any], path: str
) -> None:
    """`1` is not `true` and `"8000"` is not an integer: the document says so, and so does
    the server (nothing is converted, nothing is stored)."""
    created = client.post("/v1/sessions", json=body)
    assert created.status_code == 422, created.text
    assert path in [e["path"] for e in created.json()["errors"]], created.text
    sid = new_session(client)
    changed = client.patch(f"/v1/sessions/{sid}", json=body)
    assert changed.status_code == 422, changed.text
    assert client.get(f"/v1/sessions/{sid}").json()["profile"] is None


def test_usage_counts_must_be_integers(client: httpx.Client) -> None:
    sid = new_session(client)
    answer = client.post(
        f"/v1/sessions/{sid}/cursor",
        json={"compile_id": "c", "usage": {"prompt_tokens": "12"}},
    )
    assert answer.status_code == 422, answer.text
    assert answer.json()["errors"][0]["path"] == "body.usage.prompt_tokens"


def test_a_compile_id_with_nul_is_a_422_not_a_server_error(client: httpx.Client) -> None:
    """Postgres text cannot hold NUL: looking such an id up failed with a 500 there."""
    sid = new_session(client)
    answer = client.post(f"/v1/sessions/{sid}/cursor", json={"compile_id": "a\x00b"})
    assert answer.status_code == 422, answer.text
    assert answer.json()["errors"][0]["path"] == "body.compile_id"
