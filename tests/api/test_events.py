"""The event stream (`GET /v1/sessions/{id}/events`) on both databases: events emitted the way
compaction emits them reach connected subscribers in order, `Last-Event-ID` replays exactly
what was missed, a rollback announces nothing, and tenancy holds."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack

import httpx
import pytest

from app.services.sessions.events import COMPACTION, COMPACTION_END, COMPACTION_START
from app.settings import Settings
from tests.api.sse import compaction, emit_events, emit_one, stream
from tests.conftest import Api, LiveServer, new_session


@pytest.fixture
def sid(client: httpx.Client) -> str:
    return new_session(client)


def test_events_reach_a_connected_subscriber_in_order(
    api: Api, client: httpx.Client, sid: str
) -> None:
    reactive = {**compaction(2, "micro"), "messages_before": 40, "messages_after": 31}
    with stream(client, sid) as events:
        first = emit_events(
            api.database_url,
            sid,
            [(COMPACTION_START, compaction(1)), (COMPACTION_END, compaction(1))],
        )
        second = emit_events(api.database_url, sid, [(COMPACTION, reactive)])
        got = events.read(3)
    assert [e.id for e in got] == first + second
    assert first[0] < first[1] < second[0]
    assert [e.event for e in got] == [COMPACTION_START, COMPACTION_END, COMPACTION]
    assert got[0].data == compaction(1)
    assert got[2].data == reactive


def test_last_event_id_replays_exactly_the_missed_events(
    api: Api, client: httpx.Client, sid: str
) -> None:
    ids = [emit_one(api.database_url, sid, n) for n in range(5)]
    with stream(client, sid, headers={"Last-Event-ID": str(ids[1])}) as events:
        assert [e.id for e in events.read(3)] == ids[2:]
        live = emit_one(api.database_url, sid, 5)
        [event] = events.read(1)
    assert event.id == live
    assert event.data == compaction(5)


def test_after_parameter_replays_and_the_header_wins_over_it(
    api: Api, client: httpx.Client, sid: str
) -> None:
    ids = [emit_one(api.database_url, sid, n) for n in range(3)]
    with stream(client, sid, after=0) as events:
        assert [e.id for e in events.read(3)] == ids
    with stream(client, sid, headers={"Last-Event-ID": str(ids[1])}, after=0) as events:
        assert [e.id for e in events.read(1)] == ids[2:]


def test_without_last_event_id_the_stream_starts_with_the_next_event(
    api: Api, client: httpx.Client, sid: str
) -> None:
    emit_one(api.database_url, sid, 0)
    with stream(client, sid) as events:
        new = emit_one(api.database_url, sid, 1)
        assert [e.id for e in events.read(1)] == [new]


def test_a_rolled_back_event_is_never_announced_nor_stored(
    api: Api, client: httpx.Client, sid: str
) -> None:
    with stream(client, sid) as events:
        emit_events(api.database_url, sid, [(COMPACTION_START, compaction(1))], commit=False)
        kept = emit_one(api.database_url, sid, 2)
        [event] = events.read(1)
    assert (event.id, event.data) == (kept, compaction(2))
    with stream(client, sid, after=0) as events:
        assert [e.id for e in events.read(1)] == [kept]  # and nothing stored before it


def test_events_of_one_session_never_reach_another(
    api: Api, client: httpx.Client, sid: str
) -> None:
    other = new_session(client)
    with stream(client, sid) as events:
        emit_one(api.database_url, other, 1)
        mine = emit_one(api.database_url, sid, 2)
        assert [e.id for e in events.read(1)] == [mine]


def test_other_tenants_session_is_404(api: Api, sid: str) -> None:
    emit_one(api.database_url, sid, 1)
    with api.client(api.key_b) as other:
        for params in ({}, {"after": 0}):
            response = other.get(f"/v1/sessions/{sid}/events", params=params)
            assert response.status_code == 404
            assert response.headers["content-type"] == "application/problem+json"
            assert response.json() == other.get("/v1/sessions/nope/events").json() | {
                "detail": f"session {sid!r} not found"
            }


def test_the_stream_needs_a_key(api: Api, sid: str) -> None:
    response = httpx.get(f"{api.url}/v1/sessions/{sid}/events")
    assert response.status_code == 401
    assert response.headers["www-authenticate"] == "Bearer"


@pytest.mark.parametrize(
    ("headers", "params", "path"),
    [
        ({"Last-Event-ID": "abc"}, {}, "header.last-event-id"),
        ({"Last-Event-ID": "-1"}, {}, "header.last-event-id"),
        ({}, {"after": "1.5"}, "query.after"),
        ({}, {"after": str(2**63)}, "query.after"),
    ],
)
def test_a_bad_last_event_id_is_a_422_naming_it(
    client: httpx.Client, sid: str, headers: dict[str, str], params: dict[str, str], path: str
) -> None:
    response = client.get(f"/v1/sessions/{sid}/events", headers=headers, params=params)
    assert response.status_code == 422
    assert response.headers["content-type"] == "application/problem+json"
    assert [e["path"] for e in response.json()["errors"]] == [path]


@pytest.fixture
def tuned(api: Api) -> Iterator[Api]:
    """A server of its own on the same database: heartbeats every 50 ms, wake-up queues of 1,
    a Postgres pool of 1 (+1 overflow) connection."""
    settings = Settings(
        database_url=api.database_url,
        auth="keys",
        sse_heartbeat_seconds=0.05,
        sse_queue_size=1,
        db_pool_size=1,
    )
    with LiveServer(settings) as server:
        yield Api(server.url, api.database_url, api.key_a, api.key_b)


def test_heartbeats_keep_an_idle_stream_alive(tuned: Api) -> None:
    with tuned.client() as client, stream(client, new_session(client)) as events:
        assert events.comment() == ": ping"
        assert events.comment() == ": ping"


def test_a_subscriber_whose_queue_overflows_still_gets_every_event(tuned: Api) -> None:
    """One transaction announces 50 events at once into a queue of one wake-up; every event
    still arrives, in order, because the stream reads them from the database."""
    with tuned.client() as client:
        sid = new_session(client)
        with stream(client, sid) as events:
            burst = [(COMPACTION_START, compaction(n)) for n in range(50)]
            ids = emit_events(tuned.database_url, sid, burst)
            ids += [emit_one(tuned.database_url, sid, n) for n in range(50, 60)]
            got = events.read(60)
    assert [e.id for e in got] == ids
    assert [e.data["tokens_before"] for e in got] == [90_000 + n for n in range(60)]


def test_open_streams_hold_no_database_connection(tuned: Api) -> None:
    """More streams than the pool has connections (2 on Postgres, 15 on SQLite) all follow,
    and ordinary requests still get through: a stream uses a connection only to read."""
    with tuned.client() as client, ExitStack() as stack:
        sid = new_session(client)
        streams = [stack.enter_context(stream(client, sid)) for _ in range(16)]
        assert client.get(f"/v1/sessions/{sid}").status_code == 200
        new = emit_one(tuned.database_url, sid, 1)
        assert {e.id for s in streams for e in s.read(1)} == {new}
