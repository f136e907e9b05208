"""A session's whole context moves (issue 14): compactions with their archives, originals by call
id and by sha256, compile records and the cursor. Exported from one database and imported into
the other kind (SQLite to Postgres and back), every read endpoint answers as on the original."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from app.settings import Settings
from app.storage.migrate import upgrade
from tests.api.test_messages import openai_history
from tests.api.test_originals import SPEC, agent_history
from tests.conftest import Api, LiveServer, fresh_database, make_key, new_session, row_counts

NDJSON = "application/x-ndjson"
CALL_IDS = ("r1", "w1", "t1", "r2", "t2")


def compacted_session(client: httpx.Client) -> tuple[str, str]:
    """A session compiled (originals kept by sha256) and acknowledged (cursor, provider session),
    then tool-payload compacted, summarised, compiled again (not acknowledged). Returns its id
    and the outstanding compile's id."""
    sid = new_session(
        client,
        id=f"move-{uuid.uuid4().hex}",
        provider="gpt-4o",
        compiler=SPEC,
        metadata={"team": "a"},
        resume_key="/r",
    )
    client.post(f"/v1/sessions/{sid}/messages", json={"messages": agent_history()})
    compiled = client.post(f"/v1/sessions/{sid}/compile", json={}).json()
    ack = client.post(
        f"/v1/sessions/{sid}/cursor",
        json={
            "compile_id": compiled["compile_id"],
            "provider_session_id": "prov-1",
            "usage": {"prompt_tokens": 1234},
        },
    )
    assert ack.status_code == 200, ack.text
    steps = [SPEC["decorators"][0], "compact_tool_results"]
    body = {"kind": "tool_payloads", "steps": steps}
    done = client.post(f"/v1/sessions/{sid}/compact", json=body)
    assert done.status_code == 201, done.text
    client.post(f"/v1/sessions/{sid}/messages", json={"messages": openai_history(30)})
    done = client.post(f"/v1/sessions/{sid}/compact", json={"kind": "full"})
    assert done.status_code == 201, done.text
    later = client.post(f"/v1/sessions/{sid}/compile", json={}).json()
    return sid, later["compile_id"]


def reads(client: httpx.Client, sid: str, payloads: bool = True) -> dict[str, Any]:
    """Every read endpoint's answer about the session (status and body)."""
    base = f"/v1/sessions/{sid}"
    paths = [base, f"{base}/compactions", f"{base}/export"]
    shapes = ("canonical", "openai", "anthropic")
    paths += [f"{base}/messages?limit=1000&format={f}" for f in shapes]
    listed = client.get(f"{base}/compactions").json()["items"]
    paths += [f"{base}/compactions/{c['id']}" for c in listed]
    paths += [f"{base}/tool-calls/{c}" for c in (*CALL_IDS, "nope")]
    paths += [f"{base}/tool-calls/{c}?seq={s}" for c in CALL_IDS for s in (2, 3, 12)]
    shas = {
        f["sha256"]
        for c in CALL_IDS
        for side in ("argument_fields", "result")
        for f in _fields(client.get(f"{base}/tool-calls/{c}").json(), side)
    }
    assert shas or not payloads
    paths += [f"{base}/payloads/{sha}" for sha in sorted(shas)]
    answers = {p: _answer(client.get(p)) for p in paths}
    answers["ndjson"] = _lines(client.get(f"{base}/export", headers={"Accept": NDJSON}))
    return answers


def _fields(found: dict[str, Any], side: str) -> list[dict[str, Any]]:
    part = found.get(side) if side == "argument_fields" else (found.get("result") or {})
    fields = part if side == "argument_fields" else part.get("fields")
    return list((fields or {}).values())


def _answer(response: httpx.Response) -> tuple[int, Any]:
    return response.status_code, response.json()


def _lines(response: httpx.Response) -> list[Any]:
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith(NDJSON)
    return [json.loads(line) for line in response.text.splitlines()]


@contextmanager
def other_database(api: Api, tmp: Path, request: pytest.FixtureRequest) -> Iterator[httpx.Client]:
    """A server on a fresh database of the other kind, and a client of a tenant there."""
    kind = "postgres" if api.database_url.startswith("sqlite") else "sqlite"
    url = fresh_database(kind, tmp, request)
    upgrade(url)
    key = make_key(url, "restored")
    headers = {"Authorization": f"Bearer {key}"}
    with (
        LiveServer(Settings(database_url=url, auth="keys")) as server,
        httpx.Client(base_url=server.url, headers=headers, timeout=60) as client,
    ):
        yield client


def test_a_compacted_session_moves_whole_and_reads_the_same(
    api: Api, client: httpx.Client, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    sid, outstanding = compacted_session(client)
    original = reads(client, sid)
    document = original[f"/v1/sessions/{sid}/export"][1]
    assert document["format"] == "ctxc.session/v2"
    assert len(document["compactions"]) == 2 and document["payloads"] and document["compiles"]
    assert original[f"/v1/sessions/{sid}"][1]["cursor_seq"] is not None
    with other_database(api, tmp_path, request) as copy:
        imported = copy.post("/v1/sessions/import", json=document)
        assert imported.status_code == 201, imported.text
        assert imported.json() == original[f"/v1/sessions/{sid}"][1]
        moved = reads(copy, sid)
        for path, answer in original.items():
            assert moved[path] == answer, path
        # The streamed form imports the same (restored after a delete).
        assert copy.delete(f"/v1/sessions/{sid}").status_code == 204
        body = "".join(json.dumps(line) + "\n" for line in original["ndjson"])
        streamed = copy.post("/v1/sessions/import", content=body, headers={"Content-Type": NDJSON})
        assert streamed.status_code == 201, streamed.text
        assert reads(copy, sid) == original
        # An acknowledgement of the compile still outstanding answers as on the original.
        ack = {"compile_id": outstanding, "provider_session_id": "prov-2"}
        there = copy.post(f"/v1/sessions/{sid}/cursor", json=ack)
        here = client.post(f"/v1/sessions/{sid}/cursor", json=ack)
        assert (there.status_code, there.json()) == (here.status_code, here.json())


def test_a_copy_in_the_same_database_is_a_409_naming_the_kept_id(
    api: Api, client: httpx.Client
) -> None:
    sid, _ = compacted_session(client)
    document = client.get(f"/v1/sessions/{sid}/export").json()
    before = row_counts(api.database_url)
    with api.client(api.key_b) as other:
        answer = other.post("/v1/sessions/import", json=document)
    assert answer.status_code == 409, answer.text
    assert document["compactions"][0]["id"] in answer.json()["detail"]
    assert row_counts(api.database_url) == before


def _refused(client: httpx.Client, body: Any, path: str, ndjson: bool = False) -> str:
    if ndjson:
        content = "".join(json.dumps(line) + "\n" for line in body)
        answer = client.post(
            "/v1/sessions/import", content=content, headers={"Content-Type": NDJSON}
        )
    else:
        answer = client.post("/v1/sessions/import", json=body)
    assert answer.status_code == 422, answer.text
    paths = [e["path"] for e in answer.json()["errors"]]
    assert path in paths, paths
    message: str = answer.json()["errors"][paths.index(path)]["message"]
    return message


def test_documents_that_do_not_fit_are_refused_by_place_and_write_nothing(
    api: Api, client: httpx.Client
) -> None:
    sid, _ = compacted_session(client)
    good = client.get(f"/v1/sessions/{sid}/export").json()
    good["session"]["id"] = f"bad-{uuid.uuid4().hex}"
    lines = _lines(client.get(f"/v1/sessions/{sid}/export", headers={"Accept": NDJSON}))
    lines[0]["session"]["id"] = good["session"]["id"]
    before = row_counts(api.database_url)
    unknown = good | {"format": "ctxc.session/v9"}
    assert "unknown version" in _refused(client, unknown, "body.format")
    messages = good["messages"]
    gap = good | {"messages": messages[:3] + messages[4:]}
    assert "is missing" in _refused(client, gap, "body.messages[3]")
    swapped = good | {"messages": [messages[1], messages[0], *messages[2:]]}
    assert "must increase" in _refused(client, swapped, "body.messages[1].seq")
    payload = good["payloads"][0] | {"value": "not the original"}
    bad_sha = good | {"compactions": [], "payloads": [payload, *good["payloads"][1:]]}
    _refused(client, bad_sha, "body.payloads[0].sha256")
    last = good["session"]["last_seq"]
    summarised = good["compactions"][1]
    stray = summarised | {"archived": [summarised["archived"][0] | {"seq": last + 5}]}
    nowhere = good | {"compactions": [stray]}
    assert "references nothing" in _refused(client, nowhere, "body.compactions[0].archived[0].seq")
    # The stream names its line (the header is line 1).
    assert "unknown version" in _refused(
        client, [lines[0] | {"format": "ctxc.session/v1"}, *lines[1:]], "body[1].format", True
    )
    reordered = [lines[0], lines[2], lines[1], *lines[3:]]
    assert "must increase" in _refused(client, reordered, "body[3].seq", True)
    kept = [line for line in lines if line.get("type") != "compaction"]
    at = next(i for i, line in enumerate(kept) if line.get("type") == "payload")
    forged = [*kept[:at], kept[at] | {"value": 1}, *kept[at + 1 :]]
    _refused(client, forged, f"body[{at + 1}].sha256", True)
    archived = {a["seq"] for line in lines for a in line.get("archived", [])}
    at = [
        i
        for i, line in enumerate(lines)
        if line.get("type") == "message" and line["seq"] not in archived
    ][-2]
    cut = lines[:at] + lines[at + 1 :]
    assert "is missing" in _refused(client, cut, f"body[{at + 1}]", True)
    assert row_counts(api.database_url) == before


def test_a_v1_document_still_imports(client: httpx.Client) -> None:
    sid = new_session(client)
    client.post(f"/v1/sessions/{sid}/messages", json={"messages": openai_history(6)})
    v2 = client.get(f"/v1/sessions/{sid}/export").json()
    fields = {
        k: v
        for k, v in v2["session"].items()
        if k not in ("last_seq", "cursor_seq", "provider_session_id")
    }
    v1 = {
        "format": "ctxc.session/v1",
        "session": fields | {"id": f"v1-{uuid.uuid4().hex}"},
        "messages": v2["messages"][2:],
    }
    imported = client.post("/v1/sessions/import", json=v1)
    assert imported.status_code == 201, imported.text
    assert (imported.json()["message_count"], imported.json()["last_seq"]) == (4, 6)
    again = client.get(f"/v1/sessions/{v1['session']['id']}/export").json()
    assert again["messages"] == v1["messages"]


def test_other_content_types_are_a_415(client: httpx.Client) -> None:
    answer = client.post("/v1/sessions/import", content=b"x", headers={"Content-Type": "text/csv"})
    assert answer.status_code == 415
    assert answer.headers["content-type"].startswith("application/problem+json")
