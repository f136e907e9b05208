"""The event stream as an iterator: replay then live, typed; resumed across a server restart
with `Last-Event-ID`, so no event is lost or repeated; errors that reconnecting cannot mend
are raised at once, and reconnecting is bounded."""

from __future__ import annotations

import threading
from contextlib import ExitStack
from typing import Any

import httpx
import pytest
from ctxc_client import Client, EventStreamLost, NotFound
from ctxc_client.errors import Unavailable
from ctxc_client.sse import Reconnects, SseParser

from app.services.sessions.events import COMPACTION, COMPACTION_END
from tests.api.sse import compaction, emit_events, emit_one
from tests.client.conftest import connect
from tests.conftest import Api, free_port
from tests.processes import replica


def test_events_are_replayed_then_followed_live(api: Api, ctxc: Any) -> None:
    name = ctxc.create_session().id
    stored = emit_events(api.database_url, name, [(COMPACTION, compaction(1, "micro"))])
    events = ctxc.events(name, last_event_id=0)
    [replayed] = [next(events)]
    end = {**compaction(2), "outcome": "compacted"}
    live = emit_events(api.database_url, name, [(COMPACTION_END, end)])
    [followed] = [next(events)]
    events.close()
    assert [replayed.id, followed.id] == stored + live
    assert (replayed.type, replayed.data.kind, replayed.data.tokens_before) == (
        COMPACTION,
        "micro",
        90_001,
    )
    assert followed.type == COMPACTION_END and followed.data.outcome == "compacted"
    assert followed.data.model_extra == {}  # every field the server sent is a typed one


def test_an_unknown_session_is_not_found_without_reconnecting(ctxc: Any) -> None:
    with pytest.raises(NotFound):
        next(ctxc.events("no-such-session", last_event_id=0))


def test_reconnecting_gives_up_after_its_limit_with_the_last_id() -> None:
    url = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    with Client(url) as ctxc, pytest.raises(EventStreamLost) as lost:
        next(ctxc.events("s", last_event_id=41, max_reconnects=2, reconnect_wait=0.01))
    assert lost.value.last_event_id == 41
    assert isinstance(lost.value.__cause__, httpx.ConnectError)


def restart(
    first: ExitStack,
    database_url: str,
    port: int,
    name: str,
    emitted: list[int],
    read: threading.Event,
) -> None:
    """Stop the first server, store three events, start a second on the same port, store two
    more; keep it serving until the reader is done."""
    first.close()  # SIGTERM: the open stream ends
    emitted.extend(emit_one(database_url, name, n) for n in range(3, 6))
    with replica(database_url, port):
        emitted.extend(emit_one(database_url, name, n) for n in range(6, 8))
        read.wait(timeout=120)


def test_events_resume_across_a_server_restart(api: Api, kind: str) -> None:
    """Three events read from a `ctxc serve` that is then stopped; three more stored while
    it is down and two once it is back on the same port: the iterator yields the eight, once
    each, in order."""
    if (kind == "async") != api.database_url.startswith("sqlite"):
        pytest.skip(
            "one client kind per database: two `ctxc serve` starts each, and the "
            "reconnection is the client's own, the same on either"
        )
    port = free_port()
    read = threading.Event()
    with ExitStack() as first:
        url = first.enter_context(replica(api.database_url, port))
        with connect(kind, url, api.key_a) as ctxc:
            name = ctxc.create_session().id
            emitted = [emit_one(api.database_url, name, n) for n in range(3)]
            events = ctxc.events(name, last_event_id=0, reconnect_wait=0.2, max_reconnects=20)
            got = [next(events) for _ in range(3)]
            args = (first, api.database_url, port, name, emitted, read)
            thread = threading.Thread(target=restart, args=args)
            thread.start()
            try:
                got += [next(events) for _ in range(5)]
            finally:
                read.set()
                thread.join()
            events.close()
    assert [e.id for e in got] == emitted
    assert [e.data.tokens_before for e in got] == [90_000 + n for n in range(8)]


def lines(parser: SseParser, text: str) -> list[Any]:
    return [e for line in text.split("\n") for e in [parser.feed(line)] if e is not None]


def test_the_parser_reads_fields_comments_and_multi_line_data() -> None:
    parser = SseParser()
    text = ': ping\nid: 7\nevent: compaction\ndata: {"kind":\ndata: "micro"}\n\n'
    [event] = lines(parser, text + "id: 8\n\n" + 'data: {"kind": "x"}\n\n')
    assert (event.id, event.type, event.data.kind) == (7, "compaction", "micro")
    assert parser.retry_ms is None
    assert lines(parser, ": database unavailable\nretry: 2000\n\n") == []
    assert parser.retry_ms == 2000


def test_the_servers_retry_hint_sets_the_wait_and_a_live_connection_resets_the_count() -> None:
    policy = Reconnects(limit=2, base=0.5, last_event_id=None)
    hinted = SseParser(retry_ms=2000)
    assert policy.wait(None, hinted) == 2.0
    assert policy.wait(httpx.ReadError("dropped"), SseParser()) == 1.0  # the 2nd in a row
    with pytest.raises(EventStreamLost):
        policy.wait(None, SseParser())
    policy.alive()
    policy.seen(lines(SseParser(), "id: 5\ndata: {}\n\n")[0])
    assert policy.headers() == {"Last-Event-ID": "5"}
    unavailable = Unavailable(503, "urn:ctxc:problem:database-unavailable", "", "", retry_after=3)
    assert policy.wait(unavailable, SseParser()) == 3.0
