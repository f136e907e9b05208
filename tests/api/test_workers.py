"""`ctxc serve --workers 2` on each database: both worker processes serve, and what each keeps
in memory stays correct across them (a revoked key, events, the answer cache). A test cannot
pick a worker, so it opens connections until it holds one to each: ``/metrics`` says which
process (``ctxc_process_id``) serves a connection, and every request on that connection goes to
the same process."""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import httpx
import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from app.services.tenancy import keys
from app.storage.db import create_engine, create_sessionmaker
from app.storage.migrate import upgrade
from tests.api.sse import compactable_turns, stream
from tests.conftest import METRICS_TOKEN, Api, free_port, fresh_database, new_session
from tests.processes import ctxc_command, ctxc_env, serving

KEY_CACHE_SECONDS = 1.0  # the revocation bound of the workers under test
PID = re.compile(r"^ctxc_process_id (\S+)$", re.MULTILINE)


@dataclass(frozen=True)
class Workers:
    url: str
    database_url: str
    env: dict[str, str]


@pytest.fixture(scope="module")
def workers(api: Api, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Workers]:
    """Two workers of one `ctxc serve` in keys mode on the database of ``api``: as it runs by
    default (one per usable core) on a machine of two cores or more, else by ``CTXC_WORKERS``."""
    url = f"http://127.0.0.1:{free_port()}"
    cores = len(os.sched_getaffinity(0))
    env = ctxc_env(
        CTXC_DATABASE_URL=api.database_url,
        CTXC_AUTH="keys",
        CTXC_LOG_LEVEL="warning",
        CTXC_METRICS_TOKEN=METRICS_TOKEN,
        CTXC_KEY_CACHE_SECONDS=str(KEY_CACHE_SECONDS),
        CTXC_WORKERS="2",
    )
    if cores >= 2:
        del env["CTXC_WORKERS"]
    log = tmp_path_factory.mktemp("workers") / "serve.log"
    with (
        log.open("wb") as out,
        serving(
            ctxc_command("serve", "--port", url.rsplit(":", 1)[1]),
            url,
            log=log.read_text,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        ),
    ):
        yield Workers(url, api.database_url, env)


def pid_of(client: httpx.Client) -> int:
    """The process serving ``client``'s (one) connection."""
    scraped = client.get("/metrics", headers={"Authorization": f"Bearer {METRICS_TOKEN}"})
    assert scraped.status_code == 200, scraped.text
    found = PID.search(scraped.text)
    assert found is not None, scraped.text
    return int(float(found.group(1)))


@contextmanager
def one_per_worker(url: str, key: str, count: int = 2) -> Iterator[dict[int, httpx.Client]]:
    """A client (one kept-alive connection) to each of ``count`` distinct workers, by pid."""
    with ExitStack() as stack:
        found: dict[int, httpx.Client] = {}
        for _ in range(400):
            client = httpx.Client(
                base_url=url,
                headers={"Authorization": f"Bearer {key}"},
                timeout=30,
                limits=httpx.Limits(max_connections=1, keepalive_expiry=60),
            )
            pid = pid_of(client)
            if pid in found:
                client.close()
                continue
            found[pid] = client
            stack.callback(client.close)
            if len(found) == count:
                break
        assert len(found) == count, f"only workers {sorted(found)} answered 400 connections"
        yield found


def ctxc(env: dict[str, str], *args: str) -> str:
    done = subprocess.run(ctxc_command(*args), env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_both_workers_serve_requests_of_one_session(workers: Workers, api: Api) -> None:
    with one_per_worker(workers.url, api.key_a) as clients:
        one, two = clients.values()
        sid = new_session(one)
        for n, client in enumerate((one, two, one, two)):
            appended = client.post(
                f"/v1/sessions/{sid}/messages",
                json={"messages": [{"role": "user", "content": f"turn {n}"}]},
            )
            assert appended.status_code == 201, appended.text
            assert appended.json()["first_seq"] == n + 1
        for client in (one, two):
            read = client.get(f"/v1/sessions/{sid}/messages").json()
            assert [m["seq"] for m in read["items"]] == [1, 2, 3, 4]


def test_a_revoked_key_is_refused_by_every_worker_within_the_key_cache_bound(
    workers: Workers,
) -> None:
    key = ctxc(workers.env, "keys", "create", "--tenant", "revoked-across-workers")
    with one_per_worker(workers.url, key) as clients:
        for client in clients.values():  # each worker verifies the key and remembers it
            assert client.get("/v1/sessions").status_code == 200
        ctxc(workers.env, "keys", "revoke", key[:12])
        time.sleep(KEY_CACHE_SECONDS + 0.2)  # the documented bound, from the revocation
        for pid, client in clients.items():
            refused = client.get("/v1/sessions")
            assert refused.status_code == 401, (pid, refused.text)
            assert pid_of(client) == pid  # still the same worker: it refused, not another


def test_a_subscriber_on_one_worker_sees_a_compaction_made_through_the_other(
    workers: Workers, api: Api
) -> None:
    with one_per_worker(workers.url, api.key_a) as clients:
        listener, writer = clients.values()
        sid = new_session(writer, provider="gpt-4o")
        turns = compactable_turns()
        writer.post(f"/v1/sessions/{sid}/messages", json={"messages": turns}).raise_for_status()
        with stream(listener, sid) as events:  # on the listener's connection, so its worker
            body = {"kind": "session", "policy": {"target_tokens": 10, "trigger_tokens": 20}}
            done = writer.post(f"/v1/sessions/{sid}/compact", json=body)
            assert done.status_code == 201, done.text
            start, end = events.read(2)
        assert (start.event, end.event) == ("context_compaction_start", "context_compaction_end")
        assert end.data["compaction_id"] == done.json()["id"]


def test_a_remembered_answer_is_the_same_from_either_worker(workers: Workers, api: Api) -> None:
    body = {
        "messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hi"}]
    }
    with one_per_worker(workers.url, api.key_a) as clients:
        answers = [
            client.post("/v1/compile", json=body).json()
            for client in clients.values()
            for _ in "ab"
        ]
    assert len({a.pop("compile_id") for a in answers}) == 4  # each answer has its own id
    assert all(a == answers[0] for a in answers)


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_workers_starting_together_on_a_new_database_share_one_local_tenant(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """Every worker makes sure the `local` tenant exists at start-up, at the same moment: each
    gets the one tenant, none fails (a unique violation, or a stale SQLite snapshot)."""
    url = fresh_database(kind, tmp_path, request)
    upgrade(url)

    async def run() -> list[str]:
        engines = [create_engine(url) for _ in range(4)]
        try:

            async def start(engine: AsyncEngine) -> str:
                async with create_sessionmaker(engine)() as db:
                    return await keys.local_tenant(db, datetime.now(UTC))

            return await asyncio.gather(*(start(engine) for engine in engines))
        finally:
            for engine in engines:
                await engine.dispose()

    tenants = asyncio.run(run())
    assert len(set(tenants)) == 1
