"""Error answers become the client's exceptions, with their fields; 503s and dropped
connections are retried only where resending is safe, and a bounded number of times."""

from __future__ import annotations

import sqlite3
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from ctxc_client import (
    BadRequest,
    BudgetTooSmall,
    Client,
    Conflict,
    CtxcError,
    NotFound,
    PayloadTooLarge,
    Unauthorized,
    Unavailable,
    ValidationFailed,
)
from ctxc_client.errors import problem_error

from app.settings import Settings
from app.storage.migrate import upgrade
from tests.client.conftest import connect
from tests.conftest import Api, LiveServer, free_port, make_key

HELLO = [{"role": "user", "content": "hi"}]


def raised(call: Any, *args: Any, **kwargs: Any) -> CtxcError:
    with pytest.raises(CtxcError) as caught:
        call(*args, **kwargs)
    return caught.value


def test_a_422_names_each_bad_field(ctxc: Any) -> None:
    error = raised(ctxc.create_session, compaction={"trigger_tokens": 10, "target_tokens": 20})
    assert type(error) is ValidationFailed and isinstance(error, BadRequest)
    assert (error.status, error.slug, error.title) == (422, "validation-error", "Invalid request")
    assert [e.path for e in error.errors] == ["body.compaction"]
    assert error.request_id  # from X-Request-ID, to quote in a report
    name = ctxc.create_session().id
    anthropic = [
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t", "content": "x"}]}
    ]
    error = raised(ctxc.append_messages, name, anthropic)
    assert type(error) is ValidationFailed
    assert error.errors[0].path == "body.messages[0].content[0].type"
    assert "anthropic" in error.errors[0].message
    assert ctxc.get_session(name).message_count == 0


def test_a_budget_too_small_says_what_was_needed(ctxc: Any) -> None:
    long = [{"role": "user", "content": "word " * 400}]
    error = raised(ctxc.compile, long, provider="gpt-4o", context_window=100)
    assert type(error) is BudgetTooSmall and error.status == 422
    assert error.needed is not None and error.budget is not None
    assert error.needed > error.budget


def test_unknown_and_other_tenants_sessions_are_not_found(api: Api, ctxc: Any, kind: str) -> None:
    error = raised(ctxc.get_session, "no-such-session")
    assert type(error) is NotFound and error.status == 404
    with connect(kind, api.url, api.key_b) as other:
        mine = ctxc.create_session().id
        assert type(raised(other.append_messages, mine, HELLO)) is NotFound
        assert type(raised(other.get_tool_call, mine, "call_1")) is NotFound


def test_a_taken_id_is_a_conflict(ctxc: Any) -> None:
    name = f"taken-{uuid.uuid4().hex[:8]}"
    ctxc.create_session(id=name)
    error = raised(ctxc.create_session, id=name)
    assert type(error) is Conflict and error.status == 409


def test_a_body_over_the_limit_is_payload_too_large(ctxc: Any) -> None:
    name = ctxc.create_session().id
    huge = [{"role": "user", "content": "x" * (300 * 1024)}]  # the server's limit: 256 KiB
    error = raised(ctxc.append_messages, name, huge)
    assert type(error) is PayloadTooLarge and error.status == 413


def test_a_wrong_or_missing_key_is_unauthorized(api: Api, kind: str) -> None:
    for key in ("ctxc_not-a-key", ""):
        with connect(kind, api.url, key) as ctxc:
            error = raised(ctxc.list_sessions)
            assert type(error) is Unauthorized and error.status == 401


def test_a_malformed_body_answer_is_a_bad_request(api: Api) -> None:
    """The client only sends JSON it made; the 400 it would map is a real one of the server."""
    answer = httpx.post(
        f"{api.url}/v1/sessions",
        content=b"{not json",
        headers={"Authorization": f"Bearer {api.key_a}", "Content-Type": "application/json"},
    )
    error = problem_error(answer)
    assert type(error) is BadRequest
    assert (error.status, error.slug) == (400, "malformed-json")


@pytest.fixture
def locked_sqlite(tmp_path: Path) -> Iterator[tuple[str, str, Path]]:
    """A server of its own on a SQLite file (whose writes wait 0.5 s for a lock): its URL, a
    key and the file."""
    path = tmp_path / "ctxc.db"
    url = f"sqlite+aiosqlite:///{path}"
    upgrade(url)
    key = make_key(url, f"t-{uuid.uuid4().hex[:6]}")
    settings = Settings(database_url=url, auth="keys", sqlite_busy_timeout_seconds=0.5)
    with LiveServer(settings) as server:
        yield server.url, key, path


@contextmanager
def write_lock(path: Path) -> Iterator[sqlite3.Connection]:
    """The file's write lock held by another process's connection: the server's writes get a
    503 once their busy timeout has passed."""
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        yield holder
    finally:
        if holder.in_transaction:
            holder.execute("ROLLBACK")
        holder.close()


def test_a_503_is_unavailable_with_its_retry_after(locked_sqlite: tuple[str, str, Path]) -> None:
    url, key, path = locked_sqlite
    with Client(url, api_key=key, max_retries=0) as ctxc:
        name = ctxc.create_session().id
        with write_lock(path):
            error = raised(ctxc.append_messages, name, HELLO)
        assert type(error) is Unavailable and error.status == 503
        assert error.retry_after == 2 and error.slug == "database-unavailable"
        assert ctxc.get_session(name).message_count == 0


def test_an_append_is_resent_after_a_503_and_stored_once(
    locked_sqlite: tuple[str, str, Path],
) -> None:
    """The lock is released when the 503 arrives: the resend after Retry-After succeeds."""
    url, key, path = locked_sqlite
    statuses: list[int] = []
    with Client(url, api_key=key) as plain:
        name = plain.create_session().id
    with write_lock(path) as holder:

        def release(response: httpx.Response) -> None:
            statuses.append(response.status_code)
            if response.status_code == 503 and holder.in_transaction:
                holder.execute("ROLLBACK")

        with (
            httpx.Client(event_hooks={"response": [release]}) as http,
            Client(url, api_key=key, http_client=http) as ctxc,
        ):
            appended = ctxc.append_messages(name, HELLO)
            assert statuses == [503, 201]
            assert (appended.first_seq, appended.last_seq) == (1, 1)
            assert ctxc.get_session(name).message_count == 1


def test_a_call_not_safe_to_resend_is_not_resent_after_a_503(
    locked_sqlite: tuple[str, str, Path],
) -> None:
    url, key, path = locked_sqlite
    statuses: list[int] = []
    hooks = {"response": [lambda response: statuses.append(response.status_code)]}
    with (
        httpx.Client(event_hooks=hooks) as http,
        Client(url, api_key=key, http_client=http, max_retries=3) as ctxc,
    ):
        name = ctxc.create_session().id
        with write_lock(path):
            assert type(raised(ctxc.delete_session, name)) is Unavailable
            assert type(raised(ctxc.create_session, id="made-once")) is Unavailable
        assert statuses == [201, 503, 503]
        assert [s.id for s in ctxc.iter_sessions()] == [name]


def test_a_server_that_cannot_be_reached_is_tried_a_bounded_number_of_times() -> None:
    sent: list[str] = []
    hooks = {"request": [lambda request: sent.append(request.method)]}
    url = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    with (
        httpx.Client(event_hooks=hooks) as http,
        Client(url, http_client=http, max_retries=2) as ctxc,
        pytest.raises(httpx.ConnectError),
    ):
        ctxc.compact("s", "full")  # never sent, so safe to send again whatever it does
    assert sent == ["POST"] * 3
