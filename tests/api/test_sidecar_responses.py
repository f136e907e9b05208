"""The Responses sidecar end to end: the official OpenAI SDK's ``client.responses.create`` pointed
at a real `ctxc` server forwarding to the local Responses stand-in (tests/upstream_responses.py),
on each database, with the request Codex CLI sends (developer items, ``store: false``, the whole
input each turn, reasoning items with ``encrypted_content``, a ``prompt_cache_key``)."""

from __future__ import annotations

import json
import uuid
from typing import Any

import httpx
import openai
import pytest

from app.domain.formats.responses import from_responses
from tests.api.sidecar import Sidecar, stored
from tests.conftest import row_counts
from tests.upstream_wires import Error, Text, ToolCall
from tests.upstreams import Upstream

TOOLS = [
    {
        "type": "function",
        "name": "exec_command",
        "description": "Run a shell command",
        "strict": False,
        "parameters": {
            "type": "object",
            "properties": {"cmd": {"type": "string"}},
            "required": ["cmd"],
        },
    },
    {"type": "web_search"},
]
TASK = "Find where the parser drops the reasoning items and fix it."
DEVELOPER = {
    "type": "message",
    "role": "developer",
    "content": [{"type": "input_text", "text": "You are a coding agent in a CLI."}],
}


def codex_body(history: list[Any], key: str) -> dict[str, Any]:
    """The body Codex CLI sends, but its input."""
    return {
        "model": "gpt-5-codex",
        "input": history,
        "tools": TOOLS,
        "tool_choice": "auto",
        "parallel_tool_calls": True,
        "reasoning": {"summary": "auto"},
        "store": False,
        "include": ["reasoning.encrypted_content"],
        "prompt_cache_key": key,
        "extra_body": {"client_metadata": {"turn": str(len(history))}},
    }


def streamed(client: openai.OpenAI, body: dict[str, Any]) -> tuple[list[Any], Any]:
    """The output items of a streamed response (as Codex keeps them: from each
    ``response.output_item.done``) and the completed response."""
    items, completed = [], None
    for event in client.responses.create(**body, stream=True):
        if event.type == "response.output_item.done":
            items.append(event.item.model_dump(exclude_none=True))
        elif event.type == "response.completed":
            completed = event.response
    assert completed is not None
    return items, completed


def codex_loop(sidecar: Sidecar, session: str, turns: int, window: int, stream: bool) -> list[Any]:
    """An agent written as Codex is: the whole input resent every turn, the output items
    appended to it, each ``function_call`` answered by a ``function_call_output``."""
    client = sidecar.openai(session, **{"X-Ctxc-Context-Window": str(window)})
    key = str(uuid.uuid4())
    history: list[Any] = [
        DEVELOPER,
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": TASK}]},
    ]
    for turn in range(turns):
        if turn:
            history.append(
                {
                    "type": "message",
                    "role": "user",
                    "content": [{"type": "input_text", "text": f"Now step {turn}."}],
                }
            )
        while True:
            if stream:
                items, _ = streamed(client, codex_body(history, key))
            else:
                answer = client.responses.create(**codex_body(history, key))
                items = [item.model_dump(exclude_none=True) for item in answer.output]
            history += items
            calls = [item for item in items if item["type"] == "function_call"]
            if not calls:
                break
            history += [
                {
                    "type": "function_call_output",
                    "call_id": call["call_id"],
                    "output": f"output of step {turn}\n" + "a line of a file\n" * 120,
                }
                for call in calls
            ]
    return history


@pytest.mark.parametrize("stream", [True, False], ids=["streamed", "whole"])
def test_a_codex_loop_is_stored_and_compiled_in_a_small_window(
    sidecar: Sidecar, up: Upstream, stream: bool
) -> None:
    session = f"codex-{uuid.uuid4().hex[:8]}"
    history = codex_loop(sidecar, session, turns=10, window=2_000, stream=stream)
    requests = [seen for seen in up.requests if seen.path == "/v1/responses"]
    assert len(requests) == 20
    with sidecar.ctxc() as c:
        compactions = c.get(f"/v1/sessions/{session}/compactions").json()["items"]
        assert c.get(f"/v1/sessions/{session}:fork-1").status_code == 404  # never forked
    assert compactions, "a window this small must have made ctxc compact"
    # The last request is much less than the agent's history: its older part summarised.
    assert len(json.dumps(requests[-1].body["input"])) < len(json.dumps(history)) / 2
    for seen in requests:
        body = seen.body
        # The rest of the body as Codex sent it.
        assert body["prompt_cache_key"] == requests[0].body["prompt_cache_key"]
        assert body["include"] == ["reasoning.encrypted_content"] and body["store"] is False
        assert body["reasoning"] == {"summary": "auto"} and body["tools"] == TOOLS
        assert body["client_metadata"]["turn"].isdigit() and "instructions" not in body
        assert seen.headers["authorization"] == "Bearer sk-upstream"
        # The developer item, in place, and the task sentence in every request.
        assert body["input"][0] == DEVELOPER and TASK in str(body["input"])
    # Reasoning went back (the stand-in refuses any it did not give out, byte for byte).
    resent = [i for seen in requests for i in seen.body["input"] if i.get("type") == "reasoning"]
    assert resent and all(i["encrypted_content"] in up.wires["responses"].issued for i in resent)  # type: ignore[attr-defined]
    everything = _everything(sidecar, session)
    # Every message: the developer item, the task, and each turn's items as one message per turn.
    assert len(everything) == _messages_of(history)


def _messages_of(history: list[Any]) -> int:
    return len(from_responses(history))


def _everything(sidecar: Sidecar, session: str) -> list[dict[str, Any]]:
    """The session's messages, live (but summaries) and archived, by seq."""
    with sidecar.ctxc() as c:
        found = {
            m["seq"]: m
            for m in c.get(f"/v1/sessions/{session}/messages", params={"limit": 1000}).json()[
                "items"
            ]
            if m["section"] != "summary"
        }
        for record in c.get(f"/v1/sessions/{session}/compactions").json()["items"]:
            detail = c.get(f"/v1/sessions/{session}/compactions/{record['id']}").json()
            found |= {a["seq"]: a for a in detail["archived"] if a["section"] != "summary"}
    return [found[seq] for seq in sorted(found)]


def test_a_turn_stores_its_items_and_reasoning_byte_for_byte(
    sidecar: Sidecar, up: Upstream
) -> None:
    session = f"resp-{uuid.uuid4().hex[:8]}"
    client = sidecar.openai(session)
    up.script.extend([ToolCall("exec_command", {"cmd": "cat a.py"}), Text("It is fine.")])
    history: list[Any] = [{"role": "user", "content": "Read a.py"}]
    raw = client.responses.with_raw_response.create(**codex_body(history, "k"))
    assert raw.headers["x-ctxc-managed"] == "true" and raw.headers["x-ctxc-session"] == session
    first = raw.parse()
    history += [item.model_dump(exclude_none=True) for item in first.output]
    call = history[-1]
    history.append({"type": "function_call_output", "call_id": call["call_id"], "output": "ok"})
    items, completed = streamed(client, codex_body(history, "k"))
    assert completed.usage.input_tokens > 0
    # Stored before the stream's last event reached the agent: at once, no waiting.
    messages = stored(sidecar, session)
    assert [m["role"] for m in messages] == ["user", "assistant", "tool", "assistant"]
    # The reasoning item, as the upstream gave it, is what the second request sent.
    reasoning = first.output[0].model_dump(exclude_none=True)
    assert reasoning["type"] == "reasoning"
    assert up.requests[-1].body["input"][1] == reasoning
    assert reasoning["encrypted_content"] in str(messages[1])
    assert [i["type"] for i in items] == ["reasoning", "message"]


def test_a_string_input_is_one_user_message(sidecar: Sidecar, up: Upstream) -> None:
    session = f"str-{uuid.uuid4().hex[:8]}"
    answer = sidecar.openai(session).responses.create(
        model="gpt-5", input="Say hello.", instructions="Be brief."
    )
    assert answer.output_text
    assert up.requests[-1].body["instructions"] == "Be brief."
    assert up.requests[-1].body["input"] == [{"role": "user", "content": "Say hello."}]
    messages = stored(sidecar, session)
    assert [m["role"] for m in messages] == ["system", "user", "assistant"]


def test_a_too_long_prompt_is_compacted_and_retried(sidecar: Sidecar, up: Upstream) -> None:
    session = f"long-{uuid.uuid4().hex[:8]}"
    codex_loop(sidecar, session, turns=2, window=100_000, stream=True)
    up.script.append(Error("overflow"))
    history = [DEVELOPER, {"role": "user", "content": TASK}]
    raw = sidecar.openai(session).responses.with_raw_response.create(**codex_body(history, "k"))
    assert raw.headers["x-ctxc-retried"] == "prompt_too_long"
    assert raw.parse().output


def test_a_previous_response_id_is_passed_on_and_said_unmanaged(
    sidecar: Sidecar, up: Upstream
) -> None:
    session = f"prev-{uuid.uuid4().hex[:8]}"
    before = row_counts(sidecar.database_url)
    raw = sidecar.openai(session).responses.with_raw_response.create(
        model="gpt-5", previous_response_id="resp_123", input="And then?", store=True
    )
    assert raw.parse().output
    assert raw.headers["x-ctxc-managed"] == "false"
    assert "previous_response_id" in raw.headers["x-ctxc-unmanaged-reason"]
    assert up.requests[-1].body["previous_response_id"] == "resp_123"
    assert up.requests[-1].body["input"] == "And then?"  # as sent
    after = row_counts(sidecar.database_url)
    assert after["messages"] == before["messages"] and after["sessions"] == before["sessions"]


def test_other_calls_are_forwarded_and_said_unmanaged(sidecar: Sidecar, up: Upstream) -> None:
    with httpx.Client(base_url=f"{sidecar.url}/openai/v1") as c:
        answer = c.get(
            "/models",
            headers={"X-Ctxc-Api-Key": sidecar.key, "Authorization": "Bearer sk-upstream"},
        )
    assert answer.status_code == 200
    assert answer.headers["x-ctxc-managed"] == "false"
    assert answer.headers["x-ctxc-unmanaged-reason"]


@pytest.mark.parametrize(
    ("given", "param"),
    [
        ({"input": []}, "input"),
        ({"input": 7}, "input"),
        ({"input": [{"role": "tool", "content": "x"}]}, "input[0].role"),
        ({"input": [{"type": "reasoning", "id": "rs_1"}]}, "input[0].summary"),
    ],
)
def test_bad_input_gets_openais_error_and_stores_nothing(
    sidecar: Sidecar, up: Upstream, given: dict[str, Any], param: str
) -> None:
    session = f"bad-{uuid.uuid4().hex[:8]}"
    before = row_counts(sidecar.database_url)
    with pytest.raises(openai.BadRequestError) as caught:
        sidecar.openai(session).responses.create(model="gpt-5", **given)
    error = caught.value.body
    assert isinstance(error, dict) and error["type"] == "invalid_request_error"
    assert error["param"] == param and error["message"]
    assert not up.requests
    after = row_counts(sidecar.database_url)
    assert after["messages"] == before["messages"] and after["sessions"] == before["sessions"]


def test_without_a_session_the_request_is_compiled_and_nothing_stored(
    sidecar: Sidecar, up: Upstream
) -> None:
    before = row_counts(sidecar.database_url)
    raw = sidecar.openai().responses.with_raw_response.create(
        model="gpt-4o", input=[DEVELOPER, {"role": "user", "content": TASK}]
    )
    assert raw.parse().output_text
    assert raw.headers["x-ctxc-managed"] == "true" and "x-ctxc-session" not in raw.headers
    # An OpenAI model through Responses: its own window, the Responses shape.
    assert raw.headers["x-ctxc-context-window"] == "128000"
    assert up.requests[-1].body["input"][0] == DEVELOPER
    after = row_counts(sidecar.database_url)
    assert after["messages"] == before["messages"] and after["sessions"] == before["sessions"]


@pytest.mark.parametrize(
    ("given", "reason"),
    [
        ({"conversation": "conv_123"}, "conversation:"),
        ({"background": True}, "background:"),
    ],
)
def test_a_conversation_the_provider_holds_is_passed_on_and_said_unmanaged(
    sidecar: Sidecar, up: Upstream, given: dict[str, Any], reason: str
) -> None:
    before = row_counts(sidecar.database_url)
    raw = sidecar.openai(f"held-{uuid.uuid4().hex[:8]}").responses.with_raw_response.create(
        model="gpt-5", input="Go on.", **given
    )
    assert raw.headers["x-ctxc-managed"] == "false"
    assert raw.headers["x-ctxc-unmanaged-reason"].startswith(reason)
    assert all(up.requests[-1].body[k] == v for k, v in given.items())
    after = row_counts(sidecar.database_url)
    assert after["messages"] == before["messages"] and after["sessions"] == before["sessions"]
