"""Whatever a provider sent comes back from storage exactly, on both databases."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import HealthCheck, given, settings

from tests.conftest import Api, new_session
from tests.unit.test_anthropic_format import anthropic_documents
from tests.unit.test_openai_format import openai_documents

SETTINGS = settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


def _without_caller_metadata(messages: list[Any]) -> list[Any]:
    return [{k: v for k, v in m.items() if k != "metadata"} for m in messages]


def _serialisable(value: Any) -> bool:
    try:
        json.dumps(value, allow_nan=False)
    except ValueError:
        return False
    return True


@SETTINGS
@given(messages=openai_documents)
def test_openai_documents_round_trip_through_storage(api: Api, messages: list[Any]) -> None:
    if not messages or not _serialisable(messages):
        return
    with api.client() as client:
        sid = new_session(client)
        posted = client.post(f"/v1/sessions/{sid}/messages", json={"messages": messages})
        assert posted.status_code == 201, posted.text
        page = client.get(f"/v1/sessions/{sid}/messages", params={"format": "openai"}).json()
        assert page["messages"] == _without_caller_metadata(messages)


@SETTINGS
@given(document=anthropic_documents)
def test_anthropic_documents_round_trip_through_storage(
    api: Api, document: tuple[list[Any], Any]
) -> None:
    turns, system = document
    if not turns or not _serialisable(document):
        return
    with api.client() as client:
        sid = new_session(client)
        body = {"format": "anthropic", "messages": turns, "system": system}
        posted = client.post(f"/v1/sessions/{sid}/messages", json=body)
        assert posted.status_code == 201, posted.text
        page = client.get(f"/v1/sessions/{sid}/messages", params={"format": "anthropic"}).json()
        assert (page["system"], page["messages"]) == (system, _without_caller_metadata(turns))
