"""`ctxc export` / `ctxc import`: a tenant backed up and restored (one file or a folder), a bad
file refused by line with nothing written, and a 100,000-message session moved in a stream."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import httpx
import pytest

from bench.transfer import long_session
from tests.api.test_messages import openai_history
from tests.api.test_transfer_complete import NDJSON, compacted_session, reads
from tests.conftest import Api, make_key, row_counts

CTXC = [sys.executable, "-m", "app.cli"]


def ctxc(*args: str, url: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CTXC_")}
    env["CTXC_DATABASE_URL"] = url
    return subprocess.run(
        [*CTXC, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=300
    )


def tenant_client(api: Api) -> tuple[str, httpx.Client]:
    name = f"backup-{uuid.uuid4().hex[:8]}"
    key = make_key(api.database_url, name)
    return name, api.client(key)


@pytest.mark.parametrize("to_folder", [False, True])
def test_a_tenant_is_backed_up_and_restored(api: Api, tmp_path: Path, to_folder: bool) -> None:
    name, client = tenant_client(api)
    with client:
        compacted, _ = compacted_session(client)
        plain = client.post("/v1/sessions", json={"metadata": {"n": 1}}).json()["id"]
        client.post(f"/v1/sessions/{plain}/messages", json={"messages": openai_history(5)})
        before = {sid: reads(client, sid, sid == compacted) for sid in (compacted, plain)}
        target = tmp_path / "backup"
        if to_folder:
            target.mkdir()
        done = ctxc(
            "export",
            "--tenant",
            name,
            "--all",
            "-o",
            str(target),
            url=api.database_url,
            cwd=tmp_path,
        )
        assert done.returncode == 0, done.stderr
        if to_folder:
            assert sorted(p.name for p in target.iterdir()) == sorted(
                f"{sid}.ndjson" for sid in (compacted, plain)
            )
        for sid in before:
            assert client.delete(f"/v1/sessions/{sid}").status_code == 204
        done = ctxc("import", str(target), "--tenant", name, url=api.database_url, cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        assert "imported 2 session(s)" in done.stderr
        assert {sid: reads(client, sid, sid == compacted) for sid in before} == before


def test_one_session_exports_to_stdout_and_a_bad_file_writes_nothing(
    api: Api, tmp_path: Path
) -> None:
    name, client = tenant_client(api)
    with client:
        sid = client.post("/v1/sessions", json={}).json()["id"]
        client.post(f"/v1/sessions/{sid}/messages", json={"messages": openai_history(6)})
        over_http = client.get(f"/v1/sessions/{sid}/export", headers={"Accept": NDJSON}).text
    done = ctxc("export", sid, "--tenant", name, url=api.database_url, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout == over_http
    lines = done.stdout.splitlines()
    lines[0] = lines[0].replace(sid, f"copy-{uuid.uuid4().hex}")
    second = json.loads(lines[3]) | {"seq": 1}
    bad = tmp_path / "bad.ndjson"
    bad.write_text("\n".join([*lines[:3], json.dumps(second), *lines[4:]]) + "\n")
    counts = row_counts(api.database_url)
    refused = ctxc("import", str(bad), "--tenant", name, url=api.database_url, cwd=tmp_path)
    assert refused.returncode == 1
    assert refused.stderr.strip() == (
        f"ctxc: {bad} line 4: seq: seq 1 after seq 2: seqs must increase"
    )
    assert row_counts(api.database_url) == counts
    missing = ctxc("export", "nope", "--tenant", name, url=api.database_url, cwd=tmp_path)
    assert missing.returncode == 1 and "nope" in missing.stderr


@pytest.mark.slow
def test_a_100k_message_session_streams_out_and_back(api: Api, tmp_path: Path) -> None:
    name, client = tenant_client(api)
    started = time.monotonic()
    sid = asyncio.run(long_session(api.database_url, name, 100_000, openai_history(5_000)))
    built = time.monotonic()
    file = tmp_path / "long.ndjson"
    headers = {"Accept": NDJSON}
    with client, client.stream("GET", f"/v1/sessions/{sid}/export", headers=headers) as answer:
        assert answer.status_code == 200
        with file.open("wb") as out:
            for chunk in answer.iter_bytes():
                out.write(chunk)
        original = client.get(f"/v1/sessions/{sid}").json()
    exported = time.monotonic()
    with file.open() as lines:
        assert sum(1 for _ in lines) == 100_001
    other = f"restored-{uuid.uuid4().hex[:8]}"
    done = ctxc("import", str(file), "--tenant", other, url=api.database_url, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    imported = time.monotonic()
    with api.client(make_key(api.database_url, other)) as copy:
        there = copy.get(f"/v1/sessions/{sid}").json()
        assert there == original and there["message_count"] == 100_000
        again = copy.get(f"/v1/sessions/{sid}/export", headers=headers).text
        assert again == file.read_text()
    print(
        f"built {built - started:.1f}s, exported {exported - built:.1f}s, "
        f"imported {imported - exported:.1f}s"
    )
