"""Event ids are never reused, on either database, also after a session is deleted and created
again under the same id: a client reconnecting with Last-Event-ID misses nothing (issue 19)."""

from __future__ import annotations

import httpx

from tests.api.sse import compaction, emit_events, stream
from tests.conftest import Api, new_session


def test_a_session_created_again_under_its_id_gets_new_event_ids(
    api: Api, client: httpx.Client
) -> None:
    sid = new_session(client)
    first = emit_events(
        api.database_url, sid, [("context_compaction_start", compaction(n)) for n in range(2)]
    )
    assert client.delete(f"/v1/sessions/{sid}").status_code == 204
    assert new_session(client, id=sid) == sid
    again = emit_events(
        api.database_url, sid, [("context_compaction_start", compaction(n)) for n in range(2)]
    )
    assert min(again) > max(first)
    # A client that saw the old session's last event misses none of the new session's.
    with stream(client, sid, headers={"Last-Event-ID": str(max(first))}) as events:
        assert [e.id for e in events.read(2)] == again
