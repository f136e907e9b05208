"""Tool payload compaction over HTTP: the steps in a compile, the stored history untouched, and
every original a compile took out retrievable by call id and by sha256, on both databases."""

from __future__ import annotations

import hashlib
import json
import sqlite3
import urllib.parse
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx

from app.settings import Settings
from app.storage.migrate import upgrade
from tests.api.test_bulk_digest import counted
from tests.api.test_compile import valid
from tests.api.test_kept_tails import restore
from tests.conftest import Api, LiveServer, make_key, new_session, row_counts

FILE_V1 = "".join(f"def f{n}(x):\n    return x * {n}  # version one\n" for n in range(120))
FILE_V2 = FILE_V1.replace("version one", "version two")
LOG = "\n".join(f"{n:05d} INFO worker {n % 7} step {n} took {n % 89} ms" for n in range(1_500))
SPEC = {
    "decorators": [
        {
            "name": "tool_compaction",
            "params": {
                "toolIdentifierFields": {"read_file": ["path"]},
                "dedupeIdenticalResults": True,
            },
        },
        "compact_tool_results",
        "token_limit",
    ]
}


def call(call_id: str, name: str, **args: Any) -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": call_id,
                "type": "function",
                "function": {"name": name, "arguments": json.dumps(args)},
            }
        ],
    }


def result(call_id: str, text: str) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call_id, "content": text}


def agent_history() -> list[dict[str, Any]]:
    return [
        {"role": "user", "content": "Fix the failing test in app.py"},
        call("r1", "read_file", path="app.py"),
        result("r1", FILE_V1),
        call("w1", "write_file", path="app.py", content=FILE_V2),
        result("w1", json.dumps({"status": "ok", "bytes": len(FILE_V2)})),
        call("t1", "run_tests"),
        result("t1", LOG),
        call("r2", "read_file", path="app.py"),
        result("r2", FILE_V2),
        {"role": "user", "content": "Run the tests again"},
        call("t2", "run_tests"),
        result("t2", LOG),
        {"role": "assistant", "content": "All green."},
        {"role": "user", "content": "Thanks, what changed?"},
    ]


def stored_session(client: httpx.Client, **fields: Any) -> str:
    sid = new_session(client, provider="gpt-4o", **fields)
    posted = client.post(f"/v1/sessions/{sid}/messages", json={"messages": agent_history()})
    assert posted.status_code == 201, posted.text
    return sid


def compile_session(client: httpx.Client, sid: str, **body: Any) -> dict[str, Any]:
    response = client.post(f"/v1/sessions/{sid}/compile", json=body)
    assert response.status_code == 200, response.text
    return valid(response.json())


def by_call(messages: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Each tool call id's arguments and result, as sent."""
    out: dict[str, dict[str, Any]] = {}
    for m in messages:
        for c in m.get("tool_calls") or []:
            out.setdefault(c["id"], {})["arguments"] = json.loads(c["function"]["arguments"])
        if m["role"] == "tool":
            out.setdefault(m["tool_call_id"], {})["result"] = m["content"]
    return out


def test_a_session_compile_compacts_old_payloads_and_reports_each_step(
    client: httpx.Client,
) -> None:
    sid = stored_session(client, compiler=SPEC)
    answer = compile_session(client, sid)
    steps = {s["name"]: s for s in answer["steps"]}
    assert list(steps) == ["tool_compaction", "dedupe_identical_results", "compact_tool_results"]
    sent = by_call(answer["messages"])
    # r1 is the older read of app.py: its result is the placeholder; r2 stays whole.
    assert sent["r1"]["result"] == (
        "[tool_compaction] Tool result compacted for tool=read_file, callId=r1. "
        "Large fields omitted."
    )
    assert sent["r2"]["result"] == FILE_V2
    # run_tests has no identifier fields: t1 is an older occurrence of the tool, t2 the newest.
    assert sent["t1"]["result"].startswith("[tool_compaction]")
    assert sent["t2"]["result"].startswith("00000 INFO")  # previewed, not compacted
    assert "/tool-calls/t2?seq=12" in sent["t2"]["result"]
    assert len(sent["t2"]["result"]) < len(LOG)
    assert steps["tool_compaction"]["call_ids"] == ["r1", "t1"]
    assert steps["compact_tool_results"]["call_ids"] == ["t2"]
    assert all(s["tokens_saved"] >= 0 for s in answer["steps"])
    assert steps["tool_compaction"]["tokens_saved"] > 1_000
    plain = compile_session(client, sid, compiler={"decorators": ["token_limit"]})
    saved = sum(s["tokens_saved"] for s in answer["steps"])
    assert plain["tokens"]["total"] - answer["tokens"]["total"] == saved
    # The stored history is untouched.
    stored = client.get(f"/v1/sessions/{sid}/messages", params={"format": "openai"}).json()
    assert stored["messages"] == agent_history()


def test_every_compacted_field_comes_back_exactly(client: httpx.Client) -> None:
    sid = stored_session(client, compiler=SPEC)
    answer = compile_session(client, sid)
    originals = {c["tool_call_id"]: c for c in agent_history() if c["role"] == "tool"}
    checked = 0
    for step in answer["steps"]:
        for call_id in step["call_ids"]:
            found = client.get(f"/v1/sessions/{sid}/tool-calls/{call_id}")
            assert found.status_code == 200, found.text
            body = found.json()
            assert body["result"]["content"] == originals[call_id]["content"]
            # Each of these results is one text field, taken out whole by its step.
            field = body["result"]["fields"]["content"]
            payload = client.get(f"/v1/sessions/{sid}/payloads/{field['sha256']}")
            assert payload.status_code == 200, payload.text
            assert payload.json() == {**field, "value": originals[call_id]["content"]}
            checked += 1
    assert checked == 3  # r1 and t1 compacted, t2 previewed


def tool_field_sha(client: httpx.Client, sid: str, text: str) -> str:
    for call_id in ("r1", "t1", "t2"):
        body = client.get(f"/v1/sessions/{sid}/tool-calls/{call_id}").json()
        if body["result"]["content"] == text:
            sha: str = body["result"]["fields"]["content"]["sha256"]
            return sha
    raise AssertionError("not found")


def test_compacted_arguments_name_the_hash_of_their_original(
    api: Api, client: httpx.Client
) -> None:
    sid = new_session(client, provider="gpt-4o")
    history = [
        {"role": "user", "content": "write it twice"},
        call("w1", "write_file", path="a.py", content=FILE_V1),
        result("w1", "ok"),
        call("w2", "write_file", path="a.py", content=FILE_V2),
        result("w2", "ok"),
        {"role": "user", "content": "done?"},
    ]
    client.post(f"/v1/sessions/{sid}/messages", json={"messages": history}).raise_for_status()
    spec = {
        "decorators": [
            {
                "name": "tool_compaction",
                "params": {"toolIdentifierFields": {"write_file": ["path"]}},
            }
        ]
    }
    answer = compile_session(client, sid, compiler=spec)
    args = by_call(answer["messages"])["w1"]["arguments"]
    assert args["path"] == "a.py" and args["content"] == "[omitted]"
    omitted = args["_tool_compaction"]["omittedFields"]["content"]
    payload = client.get(f"/v1/sessions/{sid}/payloads/{omitted['sha256']}").json()
    assert payload == {"sha256": omitted["sha256"], "bytes": len(FILE_V1), "value": FILE_V1}
    found = client.get(f"/v1/sessions/{sid}/tool-calls/w1").json()
    assert found["arguments"] == {"path": "a.py", "content": FILE_V1}
    assert found["argument_fields"]["content"]["sha256"] == omitted["sha256"]
    # A second compile finds the payload kept already and stores nothing twice.
    before = row_counts(api.database_url)["payloads"]
    compile_session(client, sid, compiler=spec)
    assert row_counts(api.database_url)["payloads"] == before


def test_every_field_a_compile_reports_comes_back_by_its_hash(client: httpx.Client) -> None:
    sid = stored_session(client, compiler=SPEC)
    answer = compile_session(client, sid)
    omitted = [o for step in answer["steps"] for o in step["omitted"]]
    assert {(o["call_id"], o["side"], o["field"]) for o in omitted} == {
        ("r1", "result", "content"),
        ("t1", "result", "content"),
        ("t2", "result", "content"),
    }
    for o in omitted:
        call = client.get(f"/v1/sessions/{sid}/tool-calls/{o['call_id']}").json()
        original = call["result"]["content"] if o["side"] == "result" else None
        if o["side"] == "arguments":
            original = call["arguments"][o["field"]]
        payload = client.get(f"/v1/sessions/{sid}/payloads/{o['sha256']}").json()
        assert payload == {"sha256": o["sha256"], "bytes": o["bytes"], "value": original}
        assert call["result"]["seq"] == o["seq"]


def test_call_ids_with_slashes_and_odd_characters(client: httpx.Client) -> None:
    sid = new_session(client, provider="gpt-4o")
    odd = "toolu/01 ü?#x"
    history = [{"role": "user", "content": "go"}, call(odd, "run"), result(odd, "done")]
    client.post(f"/v1/sessions/{sid}/messages", json={"messages": history}).raise_for_status()
    quoted = urllib.parse.quote(odd, safe="")
    found = client.get(f"/v1/sessions/{sid}/tool-calls/{quoted}")
    assert found.status_code == 200, found.text
    assert found.json()["call_id"] == odd and found.json()["result"]["content"] == "done"
    assert client.get(f"/v1/sessions/{sid}/tool-calls/a%00b").status_code == 422


def test_concurrent_compiles_keep_each_payload_once(api: Api, client: httpx.Client) -> None:
    # Two step orders insert the same payloads: they must not deadlock or fail (Postgres).
    other = {"decorators": ["compact_tool_results", *SPEC["decorators"][:1], "token_limit"]}
    sids = [stored_session(client) for _ in range(4)]

    def compile_one(n: int) -> int:
        with api.client() as c:
            body = {"compiler": SPEC if n % 2 else other}
            return c.post(f"/v1/sessions/{sids[n % 4]}/compile", json=body).status_code

    with ThreadPoolExecutor(8) as pool:
        assert list(pool.map(compile_one, range(16))) == [200] * 16
    for sid in sids:
        sha = tool_field_sha(client, sid, FILE_V1)
        assert client.get(f"/v1/sessions/{sid}/payloads/{sha}").status_code == 200


def test_repeated_call_ids_are_found_per_assistant_turn(client: httpx.Client) -> None:
    sid = new_session(client, provider="gpt-4o")
    history = [
        {"role": "user", "content": "twice"},
        call("call_0", "read_file", path="a.py"),
        result("call_0", "first"),
        call("call_0", "read_file", path="b.py"),
        result("call_0", "second"),
    ]
    client.post(f"/v1/sessions/{sid}/messages", json={"messages": history}).raise_for_status()
    newest = client.get(f"/v1/sessions/{sid}/tool-calls/call_0").json()
    assert newest["seq"] == 4 and newest["turns"] == [2, 4]
    assert newest["arguments"] == {"path": "b.py"} and newest["result"]["content"] == "second"
    older = client.get(f"/v1/sessions/{sid}/tool-calls/call_0", params={"seq": 3}).json()
    digest = {"bytes": 5, "sha256": hashlib.sha256(b'"first"').hexdigest()}
    assert older["seq"] == 2 and older["result"] == {
        "seq": 3,
        "content": "first",
        "is_error": None,
        "fields": {"content": digest},
    }
    missing = client.get(f"/v1/sessions/{sid}/tool-calls/call_0", params={"seq": 1})
    assert missing.status_code == 404


def test_originals_are_per_tenant_and_bad_keys_are_clear(api: Api, client: httpx.Client) -> None:
    sid = stored_session(client, compiler=SPEC)
    compile_session(client, sid)
    sha = tool_field_sha(client, sid, FILE_V1)
    with api.client(api.key_b) as other:
        assert other.get(f"/v1/sessions/{sid}/tool-calls/r1").status_code == 404
        assert other.get(f"/v1/sessions/{sid}/payloads/{sha}").status_code == 404
    assert client.get(f"/v1/sessions/{sid}/tool-calls/nope").status_code == 404
    assert client.get(f"/v1/sessions/{sid}/payloads/{'0' * 64}").status_code == 404
    bad = client.get(f"/v1/sessions/{sid}/payloads/XYZ")
    assert bad.status_code == 422
    assert bad.json()["errors"][0]["path"] == "path.sha256"


def test_a_stateless_compile_reports_its_steps(client: httpx.Client) -> None:
    response = client.post(
        "/v1/compile",
        json={"messages": agent_history(), "provider": "gpt-4o", "compiler": SPEC},
    )
    answer = valid(response.json())
    assert answer["steps"][0]["name"] == "tool_compaction"
    t2 = by_call(answer["messages"])["t2"]["result"]
    assert "it is in the posted history" in t2


def test_bad_compaction_parameters_are_a_422_and_store_nothing(
    api: Api, client: httpx.Client
) -> None:
    spec = {"decorators": [{"name": "tool_compaction", "params": {"inputTrimBytes": "100"}}]}
    before = row_counts(api.database_url)
    created = client.post("/v1/sessions", json={"compiler": spec})
    assert created.status_code == 422
    path = created.json()["errors"][0]["path"]
    assert path == "body.compiler.decorators[0].params.inputTrimBytes"
    assert row_counts(api.database_url) == before
    sid = stored_session(client)
    changed = client.patch(f"/v1/sessions/{sid}", json={"compiler": spec})
    assert changed.status_code == 422
    assert client.get(f"/v1/sessions/{sid}").json()["compiler"] is None
    per_request = client.post(f"/v1/sessions/{sid}/compile", json={"compiler": spec})
    assert per_request.status_code == 422
    assert per_request.json()["errors"][0]["path"].endswith("params.inputTrimBytes")


def test_tool_payload_steps_persisted_keep_every_original(client: httpx.Client) -> None:
    sid = stored_session(client)
    before = client.get(f"/v1/sessions/{sid}/messages", params={"limit": 100}).json()["items"]
    # Compiled before: the messages it parsed are kept, and must not outlive the rewrite.
    warm = valid(client.post(f"/v1/sessions/{sid}/compile", json={"compiler": {}}).json())
    steps = [SPEC["decorators"][0], "compact_tool_results"]
    done = client.post(
        f"/v1/sessions/{sid}/compact", json={"kind": "tool_payloads", "steps": steps}
    )
    assert done.status_code == 201, done.text
    record = done.json()
    assert (record["kind"], record["reason"], record["summary_seq"]) == (
        "tool_payloads",
        "tool_payloads",
        None,
    )
    detail = client.get(f"/v1/sessions/{sid}/compactions/{record['id']}").json()
    touched = [a["seq"] for a in detail["archived"]]
    assert touched == [3, 7, 12]  # r1's and t1's results compacted, t2's previewed
    by_seq = {m["seq"]: m for m in before}
    assert [a["message"] for a in detail["archived"]] == [by_seq[s]["message"] for s in touched]
    page = client.get(f"/v1/sessions/{sid}/messages", params={"limit": 100}).json()
    after = {m["seq"]: m for m in page["items"]}
    assert after[3]["message"]["content"][0]["content"].startswith("[tool_compaction]")
    assert after[3]["tokens"] < by_seq[3]["tokens"]
    assert record["tokens_before"] - record["tokens_after"] == sum(
        by_seq[s]["tokens"] - after[s]["tokens"] for s in touched
    )
    # The originals: by call id (from the archive) and by hash.
    found = client.get(f"/v1/sessions/{sid}/tool-calls/r1").json()
    assert found["result"]["content"] == FILE_V1
    sha = found["result"]["fields"]["content"]["sha256"]
    assert client.get(f"/v1/sessions/{sid}/payloads/{sha}").json()["value"] == FILE_V1
    compiled = valid(client.post(f"/v1/sessions/{sid}/compile", json={"compiler": {}}).json())
    rewritten = after[3]["message"]["content"][0]["content"]
    assert rewritten in str(compiled) and rewritten not in str(warm)
    again = client.post(f"/v1/sessions/{sid}/compact", json={"kind": "tool_payloads"})
    assert again.status_code == 409  # compacted already
    # Summarised afterwards, the original is still the one first stored.
    client.post(f"/v1/sessions/{sid}/compact", json={"kind": "full"}).raise_for_status()
    assert client.get(f"/v1/sessions/{sid}/tool-calls/r1").json()["result"]["content"] == FILE_V1


def test_persisted_steps_are_checked(client: httpx.Client) -> None:
    sid = stored_session(client)
    for steps, path in (
        (["token_limit"], "body.steps[0].name"),
        (
            [{"name": "tool_compaction", "params": {"inputTrimBytes": -1}}],
            "body.steps[0].params.inputTrimBytes",
        ),
        ([], "body.steps"),
    ):
        bad = client.post(
            f"/v1/sessions/{sid}/compact", json={"kind": "tool_payloads", "steps": steps}
        )
        assert bad.status_code == 422, bad.text
        assert bad.json()["errors"][0]["path"] == path


def test_a_compile_asks_only_about_originals_its_session_is_not_known_to_keep(
    client: httpx.Client,
) -> None:
    """A compile sending the previews the one before sent does not ask the database about
    their originals in a statement of their own (the server runs in this process: its statements
    are counted); another session with the same originals keeps its own."""
    sids = [stored_session(client, compiler=SPEC) for _ in range(2)]
    with counted("SELECT payloads.sha256") as asked:
        first = compile_session(client, sids[0])
        again = compile_session(client, sids[0])
    shas = {o["sha256"] for step in first["steps"] for o in step["omitted"]}
    assert shas == {o["sha256"] for step in again["steps"] for o in step["omitted"]} != set()
    assert len(asked) == 1
    compile_session(client, sids[1])
    for sid in sids:
        for sha in shas:
            assert client.get(f"/v1/sessions/{sid}/payloads/{sha}").status_code == 200


def test_originals_a_restore_took_away_are_kept_again(tmp_path: Path) -> None:
    """A database put back as an older copy was, in place while the server runs, loses the
    originals a compile kept since: the next compile sending them finds them missing (the check
    made with its record) and keeps them again."""
    path = tmp_path / "ctxc.db"
    url = f"sqlite+aiosqlite:///{path}"
    upgrade(url)
    key = make_key(url, f"t-{uuid.uuid4().hex[:6]}")
    headers = {"Authorization": f"Bearer {key}"}
    server = LiveServer(Settings(database_url=url, auth="keys"))
    with server, httpx.Client(base_url=server.url, headers=headers) as client:
        sid = stored_session(client, compiler=SPEC)
        with sqlite3.connect(path) as source, sqlite3.connect(tmp_path / "older.db") as copy:
            source.backup(copy)
        shas = {o["sha256"] for s in compile_session(client, sid)["steps"] for o in s["omitted"]}
        restore(path, tmp_path / "older.db")
        assert shas and all(payload(client, sid, sha) == 404 for sha in shas)
        compile_session(client, sid)
        assert all(payload(client, sid, sha) == 200 for sha in shas)


def payload(client: httpx.Client, sid: str, sha: str) -> int:
    return client.get(f"/v1/sessions/{sid}/payloads/{sha}").status_code
