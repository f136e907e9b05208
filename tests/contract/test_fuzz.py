"""Fuzzing from the contract: every operation of the checked-in OpenAPI document, driven by
schemathesis (positive and negative data) against a live keys-mode server on each database.
No answer is a server error, and every answer is documented: its status, media type and schema.
"""

from __future__ import annotations

import os
import uuid
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import hypothesis
import pytest
import schemathesis
from hypothesis import HealthCheck
from hypothesis import strategies as st
from schemathesis.checks import not_a_server_error
from schemathesis.core.parameters import ParameterLocation
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    negative_data_rejection,
    response_schema_conformance,
    status_code_conformance,
)

from tests.api.test_originals import agent_history
from tests.conftest import METRICS_TOKEN, Api, make_key, new_session
from tests.contract.fuzz_bodies import bodies

DOCUMENT = Path(__file__).resolve().parents[2] / "openapi" / "openapi.json"
# A refusal is any documented 4xx: a fuzzed body past the server's size limit is a 413.
CONFIG = schemathesis.Config.from_dict(
    {"checks": {"negative_data_rejection": {"expected-statuses": [400, 401, 404, 409, 413, 422]}}}
)
SCHEMA = schemathesis.openapi.from_path(DOCUMENT, config=CONFIG)
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
    negative_data_rejection,
]
# An endless stream: fuzzed only on ids that are not a live session (404 or 422).
STREAMS = {"/v1/sessions/{session_id}/events"}
TIMEOUT_S = 30
# More examples per operation for a longer local run (then not derandomized).
EXAMPLES = int(os.environ.get("CTXC_FUZZ_EXAMPLES", "0"))
# What each database's run answered: (kind, method, path, status) -> requests.
ANSWERS: Counter[tuple[str, str, str, int]] = Counter()
STATUSES: Counter[tuple[str, str, int]] = Counter()


@dataclass(frozen=True)
class Target:
    """What fuzzed cases aim at besides made-up ids and bodies: a stored session of the fuzzing
    tenant with tool calls (its ids and payload hashes, a compaction) and its export."""

    api: Api
    kind: str
    session_id: str
    call_ids: tuple[str, ...]
    sha256s: tuple[str, ...]
    compaction_ids: tuple[str, ...]
    export: dict[str, Any]


def _report(kind: str) -> str:
    answers = {k[1:]: n for k, n in ANSWERS.items() if k[0] == kind}
    operations = {(method, path) for method, path, _ in answers}
    total = sum(answers.values())
    errors = sum(n for (_, _, status), n in answers.items() if status >= 500)
    ok = sum(n for (_, _, status), n in answers.items() if status < 300)
    return (
        f"fuzz[{kind}]: {len(operations)} operations, {total} requests, {ok} answered 2xx, "
        f"{errors} server errors"
    )


@pytest.fixture(scope="module")
def target(api: Api) -> Iterator[Target]:
    kind = "postgres" if api.database_url.startswith("postgresql") else "sqlite"
    # A tenant of its own: what the fuzzer creates, changes and deletes no other test sees.
    key = make_key(api.database_url, f"tenant-fuzz-{uuid.uuid4().hex[:6]}")
    KEYS.update(tenant=key, metrics=METRICS_TOKEN)
    with api.client(key) as client:
        sid = new_session(client, provider="gpt-4o")
        posted = client.post(f"/v1/sessions/{sid}/messages", json={"messages": agent_history()})
        assert posted.status_code == 201, posted.text
        done = client.post(f"/v1/sessions/{sid}/compact", json={"kind": "tool_payloads"})
        assert done.status_code == 201, done.text
        compactions = client.get(f"/v1/sessions/{sid}/compactions").json()["items"]
        shas: list[str] = []
        for call_id in ("r1", "t1", "t2"):
            found = client.get(f"/v1/sessions/{sid}/tool-calls/{call_id}").json()
            shas += [f["sha256"] for f in found["result"].get("fields", {}).values()]
        export = client.get(f"/v1/sessions/{sid}/export").json()
    call_ids = ("r1", "t1", "t2", "w1")
    yield Target(api, kind, sid, call_ids, tuple(shas), tuple(c["id"] for c in compactions), export)
    print(f"\n{_report(kind)}")


# The keys of the server under test (set by the `target` fixture, read by `Keys`).
KEYS: dict[str, str] = {}


@SCHEMA.auth(refresh_interval=None, retry_on=[])
class Keys:
    """The fuzzing tenant's key on every case whose credentials are not the part being negated
    (those go without, or with a made-up one, and must get a 401); the scraper's on /metrics."""

    def get(self, case: schemathesis.Case, _: schemathesis.AuthContext) -> str:
        return KEYS["metrics" if case.path == "/metrics" else "tenant"]

    def set(self, case: schemathesis.Case, key: str, _: schemathesis.AuthContext) -> None:
        case.headers = {**(case.headers or {}), "Authorization": f"Bearer {key}"}


def _negative(case: schemathesis.Case, where: ParameterLocation) -> bool:
    component = case.meta.components.get(where) if case.meta else None
    return component is not None and component.mode.is_negative


def aim(case: schemathesis.Case, target: Target, data: st.DataObject) -> None:
    """Point some cases at the stored session and its ids, and give some an accepted-looking
    body; negated parts stay as schemathesis made them."""
    strategy = bodies(f"{case.method} {case.path}", target.export)
    negated = _negative(case, ParameterLocation.BODY)
    if strategy is not None and not negated and data.draw(st.booleans(), label="made body"):
        case.body = data.draw(strategy, label="body")
    path = case.path_parameters or {}
    if "session_id" not in path or case.path in STREAMS:
        return
    if _negative(case, ParameterLocation.PATH) or not data.draw(st.booleans(), label="real"):
        return
    if case.method == "DELETE" and case.path == "/v1/sessions/{session_id}":
        with target.api.client(KEYS["tenant"]) as client:  # a session of its own to delete
            path["session_id"] = new_session(client)
        return
    path["session_id"] = target.session_id
    pools = {
        "call_id": target.call_ids,
        "sha256": target.sha256s,
        "compaction_id": target.compaction_ids,
    }
    for name, pool in pools.items():
        if name in path and pool and data.draw(st.booleans(), label=f"real {name}"):
            path[name] = data.draw(st.sampled_from(pool), label=name)


@SCHEMA.parametrize()
@SCHEMA.given(data=st.data())
@hypothesis.settings(
    max_examples=EXAMPLES or 40,
    deadline=None,
    derandomize=not EXAMPLES,
    database=None,
    suppress_health_check=list(HealthCheck),
)
def test_every_answer_is_documented(
    case: schemathesis.Case, data: st.DataObject, target: Target
) -> None:
    aim(case, target, data)
    response = case.call(base_url=target.api.url, timeout=TIMEOUT_S)
    ANSWERS[(target.kind, case.method, case.path, response.status_code)] += 1
    case.validate_response(response, checks=CHECKS)
