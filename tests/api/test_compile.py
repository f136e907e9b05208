"""POST /v1/compile and POST /v1/sessions/{id}/compile, both output shapes, both databases.

Every compile output here goes through the provider validators (DESIGN.md section 4).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from app.domain.validity import request_problems
from tests.api.test_messages import openai_history
from tests.conftest import Api, new_session, row_counts, scrape

TRANSCRIPTS = Path(__file__).resolve().parents[3] / "shared" / "transcripts"


def valid(answer: dict[str, Any]) -> dict[str, Any]:
    """The answer, after checking the provider would accept its messages."""
    head = answer.get("instructions") if answer["format"] == "responses" else answer.get("system")
    assert request_problems(answer["format"], head, answer["messages"]) == []
    return answer


def compile_posted(client: httpx.Client, **body: Any) -> dict[str, Any]:
    response = client.post("/v1/compile", json=body)
    assert response.status_code == 200, response.text
    return valid(response.json())


def test_stateless_compile_returns_the_history_and_stores_nothing(
    api: Api, client: httpx.Client
) -> None:
    history = openai_history(12)
    before = row_counts(api.database_url)
    answer = compile_posted(client, messages=history, provider="gpt-4o")
    assert row_counts(api.database_url) == before
    assert answer["messages"] == history
    assert answer["format"] == "openai" and "system" not in answer and answer["compile_id"]
    tokens = answer["tokens"]
    assert tokens["encoding"] == "o200k_base" and tokens["context_window"] == 128_000
    assert tokens["total"] == sum(tokens["sections"].values()) + 3
    assert tokens["budget_used_pct"] == round(100 * tokens["total"] / 128_000, 2)
    assert answer["seq_range"] == [1, 12] and answer["left_out"] == []


def test_anthropic_output_from_openai_input(client: httpx.Client) -> None:
    history = [{"role": "system", "content": "Be brief."}, *openai_history(9)]
    answer = compile_posted(client, messages=history, provider="anthropic")
    assert answer["format"] == "anthropic"
    assert answer["system"] == [{"type": "text", "text": "Be brief."}]
    assert answer["messages"][0]["role"] == "user"
    assert answer["tokens"]["exact"] is False


def test_invalid_stored_shapes_compile_to_valid_output_with_warnings(client: httpx.Client) -> None:
    messy = [
        {"role": "tool", "tool_call_id": "ghost", "content": "orphan result"},
        {"role": "user", "content": "go"},
        {
            "role": "assistant",
            "content": " ",
            "tool_calls": [
                {"id": "dup", "type": "function", "function": {"name": "a", "arguments": "{}"}},
                {"id": "dup", "type": "function", "function": {"name": "b", "arguments": "{}"}},
            ],
        },
        {"role": "tool", "tool_call_id": "dup", "content": "r1"},
        {"role": "user", "content": "again"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "pending", "type": "function", "function": {"name": "c", "arguments": "{}"}}
            ],
        },
    ]
    for provider in ("gpt-4o", "anthropic"):
        answer = compile_posted(client, messages=messy, provider=provider)
        text = " ".join(answer["warnings"])
        assert "ghost" in text and "pending" in text and "dup" in text


def test_token_limit_leaves_out_old_rounds_and_says_so(client: httpx.Client) -> None:
    history = openai_history(200)
    answer = compile_posted(
        client,
        messages=history,
        context_window=3_000,
        compiler={"decorators": [{"name": "token_limit", "params": {"reserve": 500}}]},
    )
    assert answer["tokens"]["total"] <= 3_000 - 500
    [left] = answer["left_out"]
    assert left["reason"] == "token_limit" and left["count"] > 0
    assert left["seq_ranges"][0][0] == 2  # the opening task (seq 1) is kept
    assert answer["messages"][0] == history[0]
    assert answer["seq_range"][1] == 200
    assert answer["messages"][-1] == history[-1]


def test_a_budget_smaller_than_the_newest_round_is_a_422_with_figures(client: httpx.Client) -> None:
    history = [{"role": "user", "content": "word " * 3000}]
    response = client.post("/v1/compile", json={"messages": history, "context_window": 3500})
    assert response.status_code == 422
    problem = response.json()
    assert problem["title"] == "Budget too small" and problem["needed"] > problem["budget"]
    # The default reserve of a small window is a quarter of it; the message says so.
    assert problem["budget"] == 3500 - 875
    assert (
        "the context window, 3500, minus token_limit's reserve by default, 875"
        in (problem["detail"])
    )


def test_a_reserve_larger_than_the_window_is_a_422_naming_it(client: httpx.Client) -> None:
    history = [{"role": "user", "content": "hi"}]
    limit = {"name": "token_limit", "params": {"reserve": 4096}}
    response = client.post(
        "/v1/compile",
        json={"messages": history, "context_window": 3594, "compiler": {"decorators": [limit]}},
    )
    assert response.status_code == 422
    [error] = response.json()["errors"]
    assert error["path"] == "body.compiler" and "reserve (4096 tokens)" in error["message"]


def test_unknown_compiler_names_list_the_available_ones(client: httpx.Client) -> None:
    response = client.post("/v1/compile", json={"messages": [], "compiler": {"base": "magic"}})
    assert response.status_code == 422
    error = response.json()["errors"][0]
    assert error["path"] == "body.compiler.base.name" and "current_tool_trace" in error["message"]
    bad = client.post(
        "/v1/compile",
        json={
            "messages": [],
            "compiler": {"decorators": [{"name": "window", "params": {"rounds": "three"}}]},
        },
    )
    assert bad.status_code == 422
    assert bad.json()["errors"][0]["path"].startswith("body.compiler.decorators[0].params")


def test_ephemeral_messages_are_injected_and_never_stored(api: Api, client: httpx.Client) -> None:
    sid = new_session(client)
    client.post(
        f"/v1/sessions/{sid}/messages", json={"messages": [{"role": "user", "content": "q"}]}
    )
    before = row_counts(api.database_url)
    doc = {"role": "user", "content": "Retrieved: the answer is 42"}
    answer = client.post(
        f"/v1/sessions/{sid}/compile",
        json={"ephemeral": [doc], "compiler": {"decorators": ["inject", "token_limit"]}},
    ).json()
    valid(answer)
    assert (
        answer["messages"][0] == {"role": "user", "content": "Retrieved: the answer is 42\n\nq"}
        or answer["messages"][0]["content"] == doc["content"]
    )
    after = row_counts(api.database_url)
    assert after["messages"] == before["messages"] and after["compiles"] == before["compiles"] + 1


def test_session_compile_uses_fragments_trace_filter_and_records_the_compile(
    api: Api, client: httpx.Client
) -> None:
    sid = new_session(
        client,
        provider="gpt-4.1",
        response_format={"type": "json_object"},
        system_prompt=[
            {"name": "identity", "text": "You are ctxc's test agent."},
            {"name": "todos", "text": "- pass", "lifecycle": "dynamic"},
        ],
    )
    client.post(
        f"/v1/sessions/{sid}/messages", json={"messages": [{"role": "user", "content": "start"}]}
    )
    for execution in ("old", "new"):
        client.post(
            f"/v1/sessions/{sid}/messages",
            json={
                "messages": [{"role": "assistant", "content": f"thinking in {execution}"}],
                "metadata": {"is_trace": True, "execution_id": execution},
            },
        )
    before = row_counts(api.database_url)["compiles"]
    answer = valid(client.post(f"/v1/sessions/{sid}/compile", json={"execution_id": "new"}).json())
    contents = [m["content"] for m in answer["messages"]]
    assert contents[0] == "You are ctxc's test agent.\n- pass"
    assert "thinking in new" in contents and "thinking in old" not in contents
    assert answer["response_format"] == {"type": "json_object"}
    assert answer["tokens"]["sections"]["system_prompt"] > 0
    [trace] = answer["left_out"]
    assert trace == {"reason": "trace", "count": 1, "seq_ranges": [[2, 2]]}
    assert row_counts(api.database_url)["compiles"] == before + 1
    none = valid(client.post(f"/v1/sessions/{sid}/compile", json={}).json())
    assert all("thinking" not in str(m["content"]) for m in none["messages"])


def test_session_compile_for_anthropic_uses_the_native_response_format(
    client: httpx.Client,
) -> None:
    schema = {"type": "object", "properties": {"ok": {"type": "boolean"}}}
    sid = new_session(
        client,
        provider="anthropic",
        response_format={"type": "json_schema", "json_schema": {"name": "r", "schema": schema}},
    )
    client.post(f"/v1/sessions/{sid}/messages", json={"messages": openai_history(6)})
    answer = valid(client.post(f"/v1/sessions/{sid}/compile", json={}).json())
    assert answer["response_format"] == {"format": {"type": "json_schema", "schema": schema}}


def test_selected_sections_in_the_given_order(client: httpx.Client) -> None:
    sid = new_session(client)
    client.post(
        f"/v1/sessions/{sid}/messages", json={"messages": [{"role": "user", "content": "main"}]}
    )
    client.post(
        f"/v1/sessions/{sid}/messages",
        json={"section": "summary", "messages": [{"role": "user", "content": "sum"}]},
    )
    client.post(
        f"/v1/sessions/{sid}/messages",
        json={"section": "notes", "messages": [{"role": "user", "content": "note"}]},
    )
    spec = {
        "base": {
            "name": "selected_sections",
            "params": {"sections": ["notes", "missing", "messages"]},
        }
    }
    answer = valid(client.post(f"/v1/sessions/{sid}/compile", json={"compiler": spec}).json())
    assert [m["content"] for m in answer["messages"]] == ["note", "main"]
    default = valid(client.post(f"/v1/sessions/{sid}/compile", json={}).json())
    assert [m["content"] for m in default["messages"]] == ["sum", "main"]


def test_compiling_another_tenants_session_is_404(api: Api) -> None:
    with api.client(api.key_a) as a, api.client(api.key_b) as b:
        sid = new_session(a)
        assert b.post(f"/v1/sessions/{sid}/compile", json={}).status_code == 404


def test_an_empty_history_has_nothing_to_send(client: httpx.Client) -> None:
    response = client.post("/v1/compile", json={"messages": []})
    assert response.status_code == 422 and response.json()["title"] == "Nothing to send"


def remembered(client: httpx.Client) -> float:
    """How many stateless compiles were answered from memory (the service's metric)."""
    text = scrape(client).text
    line = 'ctxc_stateless_compiles_total{answer="remembered"} '
    found = [row for row in text.splitlines() if row.startswith(line)]
    return float(found[0].removeprefix(line)) if found else 0.0


def test_a_repeated_request_is_answered_from_memory_with_a_new_compile_id(
    client: httpx.Client,
) -> None:
    limit = {"name": "token_limit", "params": {"reserve": 0}}
    body = {
        "messages": openai_history(30),
        "compiler": {"decorators": ["redact", limit]},
        "context_window": 400,
    }
    raw = json.dumps(body).encode()
    before = remembered(client)
    first, second, third = (
        client.post("/v1/compile", content=raw, headers={"content-type": "application/json"})
        for _ in range(3)
    )
    assert remembered(client) == before + 2
    ids = {answer.json().pop("compile_id") for answer in (first, second, third)}
    assert len(ids) == 3
    assert (
        first.content[first.content.index(b'",') :] == third.content[third.content.index(b'",') :]
    )
    assert "token_limit" in {left["reason"] for left in valid(second.json())["left_out"]}
    # The same history under another budget is another request, compiled afresh.
    other = compile_posted(client, **(body | {"context_window": 100_000}))
    assert "token_limit" not in {left["reason"] for left in other["left_out"]}
    assert remembered(client) == before + 2


def test_a_compiler_that_reads_the_clock_is_never_answered_from_memory(
    client: httpx.Client,
) -> None:
    body = {
        "messages": openai_history(2),
        "compiler": {"decorators": [{"name": "providers", "params": {"names": ["identity"]}}]},
    }
    before = remembered(client)
    first, second = (compile_posted(client, **body) for _ in range(2))
    assert first["messages"][0] != second["messages"][0]  # "Date: ..." moved on
    assert remembered(client) == before


def test_bad_messages_and_ephemeral_are_located(client: httpx.Client) -> None:
    bad_history = client.post("/v1/compile", json={"messages": [{"role": "x"}]})
    assert [e["path"] for e in bad_history.json()["errors"]] == ["body.messages[0].role"]
    good = [{"role": "user", "content": "hi"}]
    bad_extra = client.post("/v1/compile", json={"messages": good, "ephemeral": [{"role": "y"}]})
    assert [e["path"] for e in bad_extra.json()["errors"]] == ["body.ephemeral[0].role"]


@pytest.mark.skipif(
    not TRANSCRIPTS.exists(), reason="real transcripts are not beside this checkout"
)
@pytest.mark.parametrize("provider", ["gpt-4o", "anthropic", "gemini-2.5-pro"])
def test_every_real_transcript_compiles_to_valid_output(
    client: httpx.Client, provider: str
) -> None:
    for path in sorted(TRANSCRIPTS.glob("*/*.json")):
        doc = json.loads(path.read_text())
        body: dict[str, Any] = {
            "messages": doc["messages"],
            "provider": provider,
            "tools": doc.get("tools"),
        }
        if path.parent.name == "anthropic":
            body |= {"format": "anthropic", "system": doc.get("system")}
        response = client.post("/v1/compile", json=body)
        assert response.status_code == 200, (path.name, response.text[:500])
        valid(response.json())


def _first_prompt_text(messages: list[dict[str, Any]]) -> str | None:
    for message in messages:
        content = message.get("content")
        if message.get("role") != "user" or not content:
            continue
        if isinstance(content, str):
            return content
        texts = [b.get("text", "") for b in content if b.get("type") == "text"]
        if any(t.strip() for t in texts):
            return next(t for t in texts if t.strip())
    return None


@pytest.mark.skipif(
    not TRANSCRIPTS.exists(), reason="real transcripts are not beside this checkout"
)
@pytest.mark.parametrize("provider", ["gpt-4o", "anthropic"])
def test_real_transcripts_under_budget_keep_their_system_prompt_and_task(
    client: httpx.Client, provider: str
) -> None:
    kept = refused = 0
    for path in sorted(TRANSCRIPTS.glob("*/*.json")):
        doc = json.loads(path.read_text())
        body: dict[str, Any] = {
            "messages": doc["messages"],
            "provider": provider,
            "tools": doc.get("tools"),
        }
        if path.parent.name == "anthropic":
            body |= {"format": "anthropic", "system": doc.get("system")}
            system = doc.get("system")
        else:
            system = next((m["content"] for m in doc["messages"] if m["role"] == "system"), None)
        task = _first_prompt_text(doc["messages"])
        size = compile_posted(client, **body)["tokens"]["total"]
        for share in (0.1, 0.3, 0.6):
            response = client.post("/v1/compile", json=body | {"context_window": int(size * share)})
            if response.status_code == 422:
                # What must be sent does not fit: said plainly, never sent without it.
                assert response.json()["type"].endswith("budget-too-small"), response.text
                refused += 1
                continue
            assert response.status_code == 200, (path.name, share, response.text[:300])
            answer = valid(response.json())
            sent = json.dumps([answer.get("system"), answer["messages"]])
            if system:
                first = answer["messages"][0]
                anthropic = provider == "anthropic"
                assert answer.get("system") if anthropic else first["role"] == "system"
                probe = system if isinstance(system, str) else system[0]["text"]
                assert json.dumps(probe[:200])[1:-1] in sent, (path.name, share)
            # The task is sent whole, or cut to head and tail around a pointer (or left out)
            # with a warning that says so: the newest round and its prompt come first.
            said = ("opening task", "it is sent cut to head and tail")
            if task and not any(s in w for w in answer["warnings"] for s in said):
                assert json.dumps(task[:200])[1:-1] in sent, (path.name, share, answer["warnings"])
            kept += 1
    assert kept > refused


@pytest.mark.parametrize("provider", ["gpt-4o", "anthropic"])
def test_a_blank_message_is_left_out_of_either_shape_and_says_so(
    client: httpx.Client, provider: str
) -> None:
    history = [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": " \n"},
        {"role": "user", "content": "still there?"},
    ]
    answer = compile_posted(client, messages=history, provider=provider)
    assert [m["content"] for m in answer["messages"]] in (
        [history[0]["content"], history[2]["content"]],
        [[{"type": "text", "text": "hi"}, {"type": "text", "text": "still there?"}]],
    )
    assert {"reason": "invalid", "count": 1, "seq_ranges": [[2, 2]]} in answer["left_out"]
