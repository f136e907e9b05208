"""The service as a process: health, readiness, metrics, auth modes, start-up refusals, restarts."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import fastapi.routing
import httpx
import pytest
from fastapi.routing import APIRoute
from sqlalchemy.engine import make_url
from starlette.testclient import TestClient

from app.adapters.summarizers.resilient import Resilient
from app.api.routes import compilation
from app.main import ROUTERS, create_app
from app.settings import Settings
from app.storage.migrate import upgrade
from tests.conftest import (
    Api,
    LiveServer,
    admin,
    free_port,
    fresh_database,
    make_key,
    new_session,
    scrape,
)
from tests.processes import serving

CTXC = [sys.executable, "-m", "app.cli"]


def test_health_and_readiness(api: Api) -> None:
    with httpx.Client(base_url=api.url) as anonymous:
        assert anonymous.get("/healthz").json() == {"status": "ok"}
        assert anonymous.get("/readyz").json() == {"status": "ready"}


def test_metrics_count_requests_by_route_and_tokens(client: httpx.Client) -> None:
    sid = new_session(client)
    client.post(
        f"/v1/sessions/{sid}/messages", json={"messages": [{"role": "user", "content": "hi"}]}
    )
    text = scrape(client).text
    assert (
        'ctxc_http_requests_total{method="POST",route="/v1/sessions/{session_id}/messages",status="201"}'
        in text
    )
    assert "ctxc_http_request_duration_seconds_bucket" in text
    assert 'ctxc_tokens_counted_total{encoding="o200k_base"}' in text


def test_unknown_route_is_a_problem(client: httpx.Client) -> None:
    response = client.get("/v1/nothing-here")
    assert response.status_code == 404
    assert response.headers["content-type"] == "application/problem+json"
    assert response.json()["status"] == 404


def test_local_mode_serves_keyless_loopback_callers_as_tenant_local(
    database_url: str, tmp_path: Path
) -> None:
    key = make_key(database_url, f"keyed-{uuid.uuid4().hex[:6]}")
    with LiveServer(Settings(database_url=database_url, auth="local")) as server:
        with httpx.Client(base_url=server.url) as anonymous:
            sid = new_session(anonymous)
            assert anonymous.get(f"/v1/sessions/{sid}").status_code == 200
        with httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {key}"}) as keyed:
            assert keyed.get(f"/v1/sessions/{sid}").status_code == 404  # another tenant
        with httpx.Client(base_url=server.url, headers={"Authorization": "Bearer bad"}) as bad:
            assert bad.get("/v1/sessions").status_code == 401


def _env(database_url: str, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CTXC_")}
    return env | {"CTXC_DATABASE_URL": database_url} | extra


def test_serve_refuses_local_mode_on_a_public_address(tmp_path: Path) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'x.db'}"
    result = subprocess.run(
        [*CTXC, "serve", "--host", "0.0.0.0"],
        env=_env(url),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2
    assert "CTXC_AUTH=keys" in result.stderr


def test_serve_refuses_an_incomplete_summarizer_configuration(tmp_path: Path) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'x.db'}"
    env = _env(url, CTXC_SUMMARIZER="openai", CTXC_SUMMARIZER_API_KEY="sk-hidden")
    result = subprocess.run([*CTXC, "serve"], env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode == 2
    assert "ctxc: configuration error: " in result.stderr
    assert "CTXC_SUMMARIZER=openai needs CTXC_SUMMARIZER_URL" in result.stderr
    assert "sk-hidden" not in result.stderr


def test_the_lifespan_builds_the_configured_summarizer(database_url: str) -> None:
    settings = Settings(
        database_url=database_url,
        summarizer="webhook",
        summarizer_url="http://127.0.0.1:9/hook",
        summarizer_webhook_secret="s",
    )
    with TestClient(create_app(settings)) as client:
        summarizer = client.app_state["ctxc"].summarizer.default
        assert client.get("/readyz").status_code == 200
    assert isinstance(summarizer, Resilient)
    assert summarizer.name == "webhook"


def test_start_up_finds_where_each_endpoint_is_defined(
    database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """FastAPI looks up an endpoint's source line on the first request to it (`inspect` reads
    its module): start-up does it for every endpoint, under the key requests look it up by, so
    no request of a fresh server pays it."""
    if not hasattr(fastapi.routing, "_endpoint_context_cache"):
        pytest.skip("this FastAPI keeps no endpoint contexts")
    found: dict[int, object] = {}
    monkeypatch.setattr(fastapi.routing, "_endpoint_context_cache", found)
    app = create_app(Settings(database_url=database_url))
    with TestClient(app, client=("127.0.0.1", 50000)) as client:  # local mode: loopback
        primed = dict(found)
        assert client.get("/healthz").status_code == 200
        posted = {"messages": [{"role": "user", "content": "hi"}]}
        assert client.post("/v1/compile", json=posted).status_code == 200
        assert found == primed  # the requests found their endpoints' contexts
    endpoints = [r.endpoint for m in ROUTERS for r in m.router.routes if isinstance(r, APIRoute)]
    assert compilation.compile_posted in endpoints
    assert {id(e) for e in endpoints} <= set(primed)


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_serve_refuses_an_unmigrated_database(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    url = fresh_database(kind, tmp_path, request)
    result = subprocess.run(
        [*CTXC, "serve", "--port", str(free_port())],
        env=_env(url),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode != 0
    assert "run `ctxc migrate`" in result.stderr


@contextmanager
def serve(url: str) -> Iterator[str]:
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    with serving(
        [*CTXC, "serve", "--port", str(port)],
        base,
        env=_env(url, CTXC_AUTH="keys"),
        stdout=subprocess.DEVNULL,
    ):
        yield base


def test_connections_the_database_closed_are_replaced_not_answered_500(
    tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    url = fresh_database("postgres", tmp_path, request)
    upgrade(url)
    key = make_key(url, "acme")
    headers = {"Authorization": f"Bearer {key}"}
    settings = Settings(database_url=url, auth="keys", key_cache_seconds=0)
    with LiveServer(settings) as server, httpx.Client(base_url=server.url, headers=headers) as c:
        sid = new_session(c)
        # The pool's idle connections end as in a database restart (this waits until they have).
        admin(
            "SELECT pg_terminate_backend(pid, 10000) FROM pg_stat_activity"
            f" WHERE datname = '{make_url(url).database}' AND pid <> pg_backend_pid()"
        )
        assert [c.get(f"/v1/sessions/{sid}").status_code for _ in range(3)] == [200] * 3


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_data_survives_a_server_restart(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    url = fresh_database(kind, tmp_path, request)
    migrate = subprocess.run(
        [*CTXC, "migrate"], env=_env(url), capture_output=True, text=True, timeout=120
    )
    assert migrate.returncode == 0, migrate.stderr
    created = subprocess.run(
        [*CTXC, "keys", "create", "--tenant", "acme"],
        env=_env(url),
        capture_output=True,
        text=True,
        timeout=60,
    )
    key = created.stdout.strip()
    headers = {"Authorization": f"Bearer {key}"}
    history = [{"role": "user", "content": "remember me"}, {"role": "assistant", "content": "ok"}]
    with serve(url) as base, httpx.Client(base_url=base, headers=headers) as client:
        sid = new_session(client, id="durable")
        client.post(f"/v1/sessions/{sid}/messages", json={"messages": history})
    with serve(url) as base:
        page = httpx.get(
            f"{base}/v1/sessions/durable/messages", params={"format": "openai"}, headers=headers
        )
        assert page.json()["messages"] == history


def test_keys_cli_create_list_revoke(tmp_path: Path) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'keys.db'}"
    upgrade(url)

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*CTXC, "keys", *args], env=_env(url), capture_output=True, text=True, timeout=60
        )

    key = run("create", "--tenant", "acme", "--label", "ci").stdout.strip()
    assert key.startswith("ctxc_") and len(key) > 40
    listing = run("list").stdout
    assert "acme" in listing and key[:12] in listing and key not in listing
    key_id = listing.split("\t")[0]
    assert "revoked" in run("revoke", key_id).stdout
    assert "revoked" in run("list").stdout
    assert run("revoke", "no-such-key").returncode == 1
    reserved = run("create", "--tenant", "local")
    assert reserved.returncode == 1 and "reserved" in reserved.stderr
    with LiveServer(Settings(database_url=url, auth="keys")) as server:
        response = httpx.get(
            f"{server.url}/v1/sessions", headers={"Authorization": f"Bearer {key}"}
        )
        assert response.status_code == 401
