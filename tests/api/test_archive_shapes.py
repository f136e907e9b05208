"""The archive in every shape, over HTTP on both databases: a compaction's archived messages and a
tool call's originals read canonical, as OpenAI or as Anthropic convert back (with the domain
converters) to the stored messages: exactly within the shape they were posted in, and across
providers up to what the other shape cannot hold."""

from __future__ import annotations

from itertools import groupby
from typing import Any

import httpx
import pytest

from app.domain.formats.anthropic import from_anthropic
from app.domain.formats.openai import from_openai
from app.domain.messages import (
    Message,
    ReasoningPart,
    TextPart,
    ToolCallPart,
    ToolResultPart,
    result_text,
)
from tests.api.test_compaction import POLICY, work_history
from tests.api.test_openapi_answers import check
from tests.api.test_originals import FILE_V1, agent_history, stored_session
from tests.conftest import Api, new_session

FORMATS = ("openai", "anthropic")


def anthropic_history(rounds: int) -> list[dict[str, Any]]:
    """A coding session in Anthropic turns: each round reads a module and its missing test in
    one turn, answered by one user turn holding both results (one an error)."""
    out: list[dict[str, Any]] = [
        {"role": "user", "content": "Fix the flaky test in tests/test_sync.py; keep the API."}
    ]
    for n in range(rounds):
        body = "\n".join(f"def handler_{n}_{k}(event):\n    return event" for k in range(12))
        out += [
            {
                "role": "assistant",
                "content": [
                    {"type": "thinking", "thinking": f"Module {n} next.", "signature": f"sig{n}"},
                    {"type": "text", "text": f"Reading module {n} and its test."},
                    {
                        "type": "tool_use",
                        "id": f"toolu_{n}a",
                        "name": "read_file",
                        "input": {"path": f"src/pkg/module_{n}.py"},
                    },
                    {
                        "type": "tool_use",
                        "id": f"toolu_{n}b",
                        "name": "read_file",
                        "input": {"path": f"tests/test_module_{n}.py"},
                    },
                ],
            },
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": f"toolu_{n}a",
                        "content": body,
                        "cache_control": {"type": "ephemeral"},
                    },
                    {
                        "type": "tool_result",
                        "tool_use_id": f"toolu_{n}b",
                        "is_error": True,
                        "content": [{"type": "text", "text": "No such file."}],
                    },
                ],
            },
        ]
    out += [
        {"role": "assistant", "content": "I read them all."},
        {"role": "user", "content": "Now fix it."},
    ]
    return out


def posted(client: httpx.Client, fmt: str) -> tuple[str, list[dict[str, Any]]]:
    """A session holding a history posted in ``fmt``, and that history."""
    sid = new_session(client, provider="gpt-4o", compaction=POLICY)
    history = work_history(12) if fmt == "openai" else anthropic_history(8)
    sent = client.post(f"/v1/sessions/{sid}/messages", json={"messages": history, "format": fmt})
    assert sent.status_code == 201, sent.text
    return sid, history


def compacted(client: httpx.Client, fmt: str) -> tuple[str, str, list[dict[str, Any]]]:
    sid, history = posted(client, fmt)
    done = client.post(f"/v1/sessions/{sid}/compact", json={"kind": "full"})
    assert done.status_code == 201, done.text
    return sid, done.json()["id"], history


def back(fmt: str, document: dict[str, Any]) -> list[Message]:
    if fmt == "openai":
        return from_openai(document["messages"])
    return from_anthropic(document["messages"], document["system"])[
        1 if document["system"] is not None else 0 :
    ]


def neutral(message: Message, fmt: str) -> tuple[Any, ...]:
    """What every shape holds: no provider hints, tool results as text; reasoning and a
    result's `is_error` are not OpenAI's."""
    parts: list[Any] = []
    for p in message.content:
        if isinstance(p, TextPart):
            parts.append(("text", p.text))
        elif isinstance(p, ToolCallPart):
            parts.append(("call", p.id, p.name, p.arguments))
        elif isinstance(p, ToolResultPart):
            parts.append(("result", p.call_id, result_text(p)))
        elif isinstance(p, ReasoningPart) and fmt == "anthropic":
            parts.append(("reasoning", p.text, p.signature))
    return (message.role, tuple(parts))


def regrouped(messages: list[Message], seqs: list[int]) -> list[Message]:
    """The messages of one stored seq joined again (OpenAI splits a turn's tool results)."""
    out = []
    for _, group in groupby(zip(seqs, messages, strict=True), key=lambda pair: pair[0]):
        found = [m for _, m in group]
        role = "tool" if all(m.role == "tool" for m in found) else found[-1].role
        out.append(Message(role=role, content=tuple(p for m in found for p in m.content)))
    return out


@pytest.mark.parametrize("posted_as", FORMATS)
def test_an_archive_reads_in_every_shape_and_converts_back(
    client: httpx.Client, posted_as: str
) -> None:
    sid, cid, _ = compacted(client, posted_as)
    url = f"/v1/sessions/{sid}/compactions/{cid}"
    canonical = client.get(url).json()
    assert client.get(url, params={"format": "canonical"}).json() == canonical
    archived = [Message.model_validate(a["message"]) for a in canonical["archived"]]
    seqs = [a["seq"] for a in canonical["archived"]]
    assert len(archived) > 10
    spec = client.get("/openapi.json").json()
    for fmt in FORMATS:
        answer = client.get(url, params={"format": fmt})
        assert answer.status_code == 200, answer.text
        check(spec, "/v1/sessions/{session_id}/compactions/{compaction_id}", "get", answer)
        shaped = answer.json()
        assert {k: v for k, v in shaped.items() if k != "archived"} == {
            k: v for k, v in canonical.items() if k != "archived"
        }
        document = shaped["archived"]
        assert document["format"] == fmt
        converted = back(fmt, document)
        if fmt == posted_as:  # lossless: the stored messages, provider hints and all
            assert document["seqs"] == seqs
            assert converted == archived
        else:
            assert sorted(set(document["seqs"])) == seqs
            again = regrouped(converted, document["seqs"])
            assert [neutral(m, fmt) for m in again] == [neutral(m, fmt) for m in archived]


def test_an_archive_in_a_provider_shape_is_what_was_posted(client: httpx.Client) -> None:
    for fmt in FORMATS:
        sid, cid, history = compacted(client, fmt)
        canonical = client.get(f"/v1/sessions/{sid}/compactions/{cid}").json()
        first, last = canonical["seq_from"], canonical["seq_to"]
        document = client.get(
            f"/v1/sessions/{sid}/compactions/{cid}", params={"format": fmt}
        ).json()["archived"]
        assert document["messages"] == history[first - 1 : last]


def shapes(client: httpx.Client, sid: str, call_id: str) -> dict[str, dict[str, Any]]:
    out = {}
    spec = client.get("/openapi.json").json()
    for fmt in ("canonical", *FORMATS):
        found = client.get(f"/v1/sessions/{sid}/tool-calls/{call_id}", params={"format": fmt})
        assert found.status_code == 200, found.text
        check(spec, "/v1/sessions/{session_id}/tool-calls/{call_id}", "get", found)
        out[fmt] = found.json()
    assert client.get(f"/v1/sessions/{sid}/tool-calls/{call_id}").json() == out["canonical"]
    return out


def call_back(fmt: str, shaped: dict[str, Any]) -> tuple[ToolCallPart, ToolResultPart]:
    """The canonical call and result of a provider-shaped answer."""
    if fmt == "openai":
        turn = {"role": "assistant", "content": None, "tool_calls": [shaped["call"]]}
        messages = from_openai([turn, shaped["result"]])
    else:
        messages = from_anthropic(
            [
                {"role": "assistant", "content": [shaped["call"]]},
                {"role": "user", "content": [shaped["result"]]},
            ]
        )
    return messages[0].tool_calls[0], messages[1].tool_results[0]


def check_shapes(found: dict[str, dict[str, Any]]) -> None:
    """Every shape names the same call, figures and result as the canonical answer."""
    canonical = found["canonical"]
    for fmt in FORMATS:
        shaped = found[fmt]
        assert shaped["format"] == fmt
        for key in ("call_id", "seq", "argument_fields", "turns"):
            assert shaped[key] == canonical[key]
        assert shaped["result_seq"] == canonical["result"]["seq"]
        assert shaped["result_fields"] == canonical["result"]["fields"]
        call, result = call_back(fmt, shaped)
        assert (call.id, call.name, call.arguments) == (
            canonical["call_id"],
            canonical["name"],
            canonical["arguments"],
        )
        assert result.call_id == canonical["call_id"]
        original = ToolResultPart(call_id="x", content=canonical["result"]["content"])
        assert result_text(result) == result_text(original)


def test_a_summarised_call_reads_in_every_shape(client: httpx.Client) -> None:
    sid, _, history = compacted(client, "anthropic")
    found = shapes(client, sid, "toolu_1b")
    check_shapes(found)
    # In its own shape it is what was posted, exactly; OpenAI has no is_error.
    assistant, results = history[3]["content"], history[4]["content"]
    assert found["anthropic"]["call"] == assistant[3]
    assert found["anthropic"]["result"] == results[1]
    assert found["canonical"]["result"]["is_error"] is True
    assert found["openai"]["call"] == {
        "id": "toolu_1b",
        "type": "function",
        "function": {"name": "read_file", "arguments": '{"path":"tests/test_module_1.py"}'},
    }
    assert found["openai"]["result"] == {
        "role": "tool",
        "tool_call_id": "toolu_1b",
        "content": "No such file.",
    }
    sid, _, history = compacted(client, "openai")
    found = shapes(client, sid, "call_2")
    check_shapes(found)
    assert found["openai"]["call"] == history[5]["tool_calls"][0]
    assert found["openai"]["result"] == history[6]
    assert found["anthropic"]["result"] == {
        "type": "tool_result",
        "tool_use_id": "call_2",
        "content": history[6]["content"],
    }


def test_a_call_compacted_by_tool_payload_compaction_reads_in_every_shape(
    client: httpx.Client,
) -> None:
    sid = stored_session(client)
    done = client.post(f"/v1/sessions/{sid}/compact", json={"kind": "tool_payloads"})
    assert done.status_code == 201, done.text
    page = client.get(f"/v1/sessions/{sid}/messages", params={"format": "openai"}).json()
    assert page["messages"][2]["content"].startswith("[tool_compaction]")  # r1's result
    found = shapes(client, sid, "r1")
    check_shapes(found)
    history = agent_history()
    assert found["openai"]["call"] == history[1]["tool_calls"][0]
    assert (
        found["openai"]["result"]
        == history[2]
        == {"role": "tool", "tool_call_id": "r1", "content": FILE_V1}
    )
    assert found["anthropic"]["call"] == {
        "type": "tool_use",
        "id": "r1",
        "name": "read_file",
        "input": {"path": "app.py"},
    }
    assert found["anthropic"]["result"]["content"] == FILE_V1
    sha = found["openai"]["result_fields"]["content"]["sha256"]
    assert client.get(f"/v1/sessions/{sid}/payloads/{sha}").json()["value"] == FILE_V1


def test_a_call_without_its_result_yet_and_a_bad_format(api: Api, client: httpx.Client) -> None:
    sid = new_session(client, provider="gpt-4o")
    waiting = {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "w", "type": "function", "function": {"name": "run", "arguments": "{}"}}
        ],
    }
    history = [{"role": "user", "content": "go"}, waiting]
    client.post(f"/v1/sessions/{sid}/messages", json={"messages": history}).raise_for_status()
    for fmt in FORMATS:
        found = client.get(f"/v1/sessions/{sid}/tool-calls/w", params={"format": fmt}).json()
        assert found["call"] is not None and found["call"]["id"] == "w"
        assert (found["result"], found["result_seq"], found["result_fields"]) == (None, None, None)
    sid, cid, _ = compacted(client, "openai")
    for url in (f"/v1/sessions/{sid}/compactions/{cid}", f"/v1/sessions/{sid}/tool-calls/call_1"):
        bad = client.get(url, params={"format": "xml"})
        assert bad.status_code == 422, bad.text
        assert bad.headers["content-type"] == "application/problem+json"
        assert bad.json()["errors"][0]["path"] == "query.format"
        with api.client(api.key_b) as other:
            assert other.get(url, params={"format": "openai"}).status_code == 404
