"""Two replicas on one Postgres: a subscriber on either sees every event, whichever process
committed it (LISTEN/NOTIFY). The replicas are real `ctxc serve` processes."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from tests.api.sse import compactable_turns, emit_one, stream
from tests.conftest import Api, free_port, new_session
from tests.processes import replica


@pytest.fixture(scope="module")
def replicas(api: Api) -> Iterator[tuple[httpx.Client, httpx.Client]]:
    """Clients of two replicas on the Postgres database of ``api``."""
    if not api.database_url.startswith("postgresql"):
        pytest.skip("replicas share a Postgres database")
    headers = {"Authorization": f"Bearer {api.key_a}"}
    with (
        replica(api.database_url, free_port()) as first,
        replica(api.database_url, free_port()) as second,
        httpx.Client(base_url=first, headers=headers, timeout=60) as one,
        httpx.Client(base_url=second, headers=headers, timeout=60) as two,
    ):
        yield one, two


def test_a_subscriber_on_one_replica_receives_what_another_committed(
    api: Api, replicas: tuple[httpx.Client, httpx.Client]
) -> None:
    one, two = replicas
    sid = new_session(one)  # created through the first replica
    with stream(two, sid) as on_two, stream(one, sid) as on_one:
        # Committed by a third party, the way compaction in either replica commits.
        ids = [emit_one(api.database_url, sid, n) for n in range(3)]
        assert [e.id for e in on_two.read(3)] == ids
        assert [e.id for e in on_one.read(3)] == ids


def test_last_event_id_replays_on_any_replica(
    api: Api, replicas: tuple[httpx.Client, httpx.Client]
) -> None:
    one, two = replicas
    sid = new_session(one)
    with stream(one, sid) as on_one:
        ids = [emit_one(api.database_url, sid, n) for n in range(4)]
        seen = on_one.read(2)  # then the subscriber goes away, having seen two
    with stream(two, sid, headers={"Last-Event-ID": str(seen[-1].id)}) as on_two:
        assert [e.id for e in on_two.read(2)] == ids[2:]


def test_a_compaction_through_one_replica_reaches_a_subscriber_on_the_other(
    replicas: tuple[httpx.Client, httpx.Client],
) -> None:
    one, two = replicas
    sid = new_session(one, provider="gpt-4o")
    turns = compactable_turns()
    one.post(f"/v1/sessions/{sid}/messages", json={"messages": turns}).raise_for_status()
    with stream(two, sid) as on_two:
        body = {"kind": "session", "policy": {"target_tokens": 10, "trigger_tokens": 20}}
        done = one.post(f"/v1/sessions/{sid}/compact", json=body)
        assert done.status_code == 201, done.text
        start, end = on_two.read(2)
    assert (start.event, end.event) == ("context_compaction_start", "context_compaction_end")
    assert end.data["compaction_id"] == done.json()["id"]
