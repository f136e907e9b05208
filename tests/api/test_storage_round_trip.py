"""Whatever a provider sent comes back from storage exactly, on both databases."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import HealthCheck, given, settings

from app.domain.errors import DomainError
from app.domain.formats.convert import Format, parse_messages
from app.domain.limits import json_problems
from tests.conftest import Api, new_session
from tests.unit.test_anthropic_format import anthropic_documents
from tests.unit.test_anthropic_format import read_back as anthropic_read_back
from tests.unit.test_openai_format import openai_documents
from tests.unit.test_openai_format import read_back as openai_read_back

SETTINGS = settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


def _storable(fmt: Format, messages: list[Any], system: Any = None) -> bool:
    """What the service accepts: the property is about those (the rest is a 422, tested apart)."""
    try:
        json.dumps([messages, system], allow_nan=False)
        parse_messages(fmt, messages, system)
    except (ValueError, DomainError):
        return False
    return bool(messages) and not json_problems([messages, system])


@SETTINGS
@given(messages=openai_documents)
def test_openai_documents_round_trip_through_storage(api: Api, messages: list[Any]) -> None:
    if not _storable("openai", messages):
        return
    with api.client() as client:
        sid = new_session(client)
        posted = client.post(f"/v1/sessions/{sid}/messages", json={"messages": messages})
        assert posted.status_code == 201, posted.text
        page = client.get(f"/v1/sessions/{sid}/messages", params={"format": "openai"}).json()
        assert page["messages"] == openai_read_back(messages)


@SETTINGS
@given(document=anthropic_documents)
def test_anthropic_documents_round_trip_through_storage(
    api: Api, document: tuple[list[Any], Any]
) -> None:
    turns, system = document
    if not _storable("anthropic", turns, system):
        return
    with api.client() as client:
        sid = new_session(client)
        body = {"format": "anthropic", "messages": turns, "system": system}
        posted = client.post(f"/v1/sessions/{sid}/messages", json=body)
        assert posted.status_code == 201, posted.text
        page = client.get(f"/v1/sessions/{sid}/messages", params={"format": "anthropic"}).json()
        assert (page["system"], page["messages"]) == anthropic_read_back(turns, system)
