"""The compaction lease (issue 19): one summariser call per compaction, however many compiles
race on however many replicas; a compaction whose process is killed mid-summary is closed as
abandoned, never left started. Real `ctxc serve` processes, a real webhook summariser."""

from __future__ import annotations

import os
import signal
import threading
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, suppress
from typing import Any

import httpx
import pytest

from tests.api.sse import stream
from tests.api.test_compaction import POLICY, work_history
from tests.api.webhook_summarizer import serve, serve_env, webhook
from tests.conftest import Api, new_session

COMPILES = 8
ROUNDS = 3


def _more(round_: int) -> list[dict[str, Any]]:
    """History enough to be over the trigger again."""
    return [
        m
        for n in range(8)
        for m in (
            {
                "role": "user",
                "content": f"Round {round_}: look at src/r{round_}/part_{n}.py. "
                + "Check it. " * 30,
            },
            {
                "role": "assistant",
                "content": f"It defines handler_{round_}_{n}. " + "It is fine. " * 30,
            },
        )
    ]


@pytest.mark.slow
def test_concurrent_compiles_on_replicas_call_the_summariser_once_per_compaction(
    api: Api,
) -> None:
    postgres = api.database_url.startswith("postgresql")
    with webhook(delay=0.3) as hook, ExitStack() as stack:
        env = serve_env(api.database_url, hook, lease_seconds=30)
        urls = [stack.enter_context(serve(env))[0] for _ in range(2 if postgres else 1)]
        headers = {"Authorization": f"Bearer {api.key_a}"}
        clients = [
            stack.enter_context(httpx.Client(base_url=u, headers=headers, timeout=60)) for u in urls
        ]
        sid = new_session(clients[0], provider="gpt-4o", compaction=POLICY)
        answers: list[int] = []
        for round_ in range(ROUNDS):
            history = work_history(12) if round_ == 0 else _more(round_)
            posted = clients[0].post(f"/v1/sessions/{sid}/messages", json={"messages": history})
            assert posted.status_code == 201, posted.text
            with ThreadPoolExecutor(COMPILES) as pool:
                compiles = [
                    pool.submit(
                        clients[n % len(clients)].post, f"/v1/sessions/{sid}/compile", json={}
                    )
                    for n in range(COMPILES)
                ]
                answers += [c.result().status_code for c in compiles]
        compactions = clients[0].get(f"/v1/sessions/{sid}/compactions").json()["items"]
    assert answers == [200] * COMPILES * ROUNDS
    assert len(compactions) >= ROUNDS  # each round's history went over the trigger
    assert hook.calls == len(compactions)


@pytest.mark.slow
def test_a_compaction_killed_mid_summary_is_ended_as_abandoned(api: Api) -> None:
    with webhook(delay=0) as hook:
        hook.hold.set()  # the first summary never comes back
        env = serve_env(api.database_url, hook, lease_seconds=2)
        headers = {"Authorization": f"Bearer {api.key_a}"}
        with serve(env) as (url, process), httpx.Client(base_url=url, headers=headers) as one:
            sid = new_session(one, provider="gpt-4o", compaction=POLICY)
            history = {"messages": work_history(12)}
            one.post(f"/v1/sessions/{sid}/messages", json=history).raise_for_status()
            body = {"kind": "session"}
            call = threading.Thread(target=_compact_ignoring_errors, args=(url, headers, sid, body))
            call.start()
            assert hook.called.wait(30), "the summariser was never called"
            os.kill(process.pid, signal.SIGKILL)
            process.wait()
            call.join(timeout=30)
        hook.hold.clear()
        with (
            serve(env) as (url, _),
            httpx.Client(base_url=url, headers=headers, timeout=60) as two,
            stream(two, sid, after=0) as events,
        ):
            start, end = events.read(2)
            assert (start.event, end.event) == (
                "context_compaction_start",
                "context_compaction_end",
            )
            assert end.data["outcome"] == "abandoned"
            assert end.data["start_event_id"] == start.id
            assert end.data["compaction_id"] is None
            # The lease was taken over: the next compaction runs, with one summariser call.
            done = two.post(f"/v1/sessions/{sid}/compact", json=body)
            assert done.status_code == 201, done.text
            began, finished = events.read(2)
            assert began.event == "context_compaction_start"
            assert finished.data["outcome"] == "compacted"
            assert finished.data["compaction_id"] == done.json()["id"]
    assert hook.calls == 2


def _compact_ignoring_errors(url: str, headers: dict[str, str], sid: str, body: Any) -> None:
    with suppress(httpx.TransportError):  # the server is killed under it
        httpx.post(f"{url}/v1/sessions/{sid}/compact", json=body, headers=headers, timeout=60)
