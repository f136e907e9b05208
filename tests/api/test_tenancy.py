"""Tenants: keys map to tenants; no tenant can read or detect another's sessions."""

from __future__ import annotations

import uuid
from typing import Any

import httpx
import pytest

from tests.conftest import Api, new_session, row_counts

MESSAGE = {"messages": [{"role": "user", "content": "secret"}]}

# Every route that takes a session id, with every verb it answers.
SESSION_ROUTES: list[tuple[str, str, dict[str, Any] | None]] = [
    ("GET", "/v1/sessions/{sid}", None),
    ("PATCH", "/v1/sessions/{sid}", {"metadata": {"stolen": True}}),
    ("DELETE", "/v1/sessions/{sid}", None),
    ("POST", "/v1/sessions/{sid}/messages", MESSAGE),
    ("GET", "/v1/sessions/{sid}/messages", None),
    ("GET", "/v1/sessions/{sid}/export", None),
]


def _problem_without_id(response: httpx.Response, sid: str) -> tuple[int, str, dict[str, Any]]:
    body = response.json()
    body["detail"] = body["detail"].replace(sid, "<id>")
    return response.status_code, response.headers["content-type"], body


@pytest.mark.parametrize(("method", "template", "body"), SESSION_ROUTES)
def test_other_tenants_session_is_404_exactly_as_a_missing_one(
    api: Api, method: str, template: str, body: dict[str, Any] | None
) -> None:
    with api.client(api.key_a) as a, api.client(api.key_b) as b:
        theirs = new_session(a)
        a.post(f"/v1/sessions/{theirs}/messages", json=MESSAGE)
        missing = f"missing-{uuid.uuid4().hex}"
        before = row_counts(api.database_url)
        probe = b.request(method, template.format(sid=theirs), json=body)
        absent = b.request(method, template.format(sid=missing), json=body)
        assert probe.status_code == 404
        assert _problem_without_id(probe, theirs) == _problem_without_id(absent, missing)
        assert row_counts(api.database_url) == before
        assert a.get(f"/v1/sessions/{theirs}").json()["metadata"] == {}


def test_tenants_may_use_the_same_session_id(api: Api) -> None:
    sid = f"same-{uuid.uuid4().hex}"
    with api.client(api.key_a) as a, api.client(api.key_b) as b:
        assert a.post("/v1/sessions", json={"id": sid, "metadata": {"who": "a"}}).status_code == 201
        assert b.post("/v1/sessions", json={"id": sid, "metadata": {"who": "b"}}).status_code == 201
        b.post(f"/v1/sessions/{sid}/messages", json=MESSAGE)
        assert a.get(f"/v1/sessions/{sid}").json()["metadata"] == {"who": "a"}
        assert a.get(f"/v1/sessions/{sid}").json()["message_count"] == 0
        assert b.get(f"/v1/sessions/{sid}").json()["message_count"] == 1


def test_listing_shows_only_own_sessions(api: Api) -> None:
    with api.client(api.key_a) as a, api.client(api.key_b) as b:
        mine = new_session(a, id=f"a-only-{uuid.uuid4().hex}")
        ids: list[str] = []
        page: dict[str, Any] = {"next_after": None}
        while True:
            params = {"limit": 500} | ({"after": page["next_after"]} if page["next_after"] else {})
            page = b.get("/v1/sessions", params=params).json()
            ids += [s["id"] for s in page["items"]]
            if not page["next_after"]:
                break
        assert mine not in ids


@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"Authorization": "Bearer nope"},
        {"Authorization": "Basic abc"},
        {"Authorization": "Bearer"},
    ],
)
def test_requests_without_a_valid_key_are_401(api: Api, headers: dict[str, str]) -> None:
    with httpx.Client(base_url=api.url, headers=headers) as anonymous:
        for method, path in [
            ("GET", "/v1/sessions"),
            ("POST", "/v1/sessions"),
            ("POST", "/v1/tokens/count"),
        ]:
            response = anonymous.request(method, path, json={})
            assert response.status_code == 401
            assert response.headers["www-authenticate"] == "Bearer"
            assert response.headers["content-type"] == "application/problem+json"
