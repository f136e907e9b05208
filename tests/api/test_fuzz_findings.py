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
