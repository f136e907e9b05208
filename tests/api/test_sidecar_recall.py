"""In proxy mode ctxc answers the recall tool itself: the model's recall call never reaches the
agent, and only the final answer is stored, so the agent's next turn extends the session."""

from __future__ import annotations

import uuid
from typing import Any

from tests.api.sidecar import TOOLS_ANTHROPIC, TOOLS_OPENAI, Sidecar, stored
from tests.api.test_calibration import session_samples
from tests.api.test_originals import LOG, agent_history
from tests.api.test_recall import O200K, RECALL_SPEC
from tests.upstreams import DEFAULT_TEXT, Text, ToolCall, Upstream


def recall_session(sidecar: Sidecar, provider: str = "gpt-4o") -> str:
    session = f"recall-{uuid.uuid4().hex[:8]}"
    with sidecar.ctxc() as c:
        made = c.post(
            "/v1/sessions", json={"id": session, "provider": provider, "compiler": RECALL_SPEC}
        )
        assert made.status_code == 201, made.text
    return session


def test_a_recall_call_is_answered_by_ctxc_and_the_agent_gets_the_final_answer(
    sidecar: Sidecar, up: Upstream
) -> None:
    session = recall_session(sidecar)
    client = sidecar.openai(session)
    history: list[Any] = agent_history()
    up.script.append(ToolCall(name="ctxc_recall", arguments={"call_id": "t1", "seq": 7}))
    raw = client.chat.completions.with_raw_response.create(
        model="gpt-4o", messages=history, tools=TOOLS_OPENAI
    )
    answer = raw.parse().choices[0].message
    assert answer.content == DEFAULT_TEXT and not answer.tool_calls
    assert raw.headers["x-ctxc-recalls"] == "1"
    first, second = (r.body for r in up.requests)
    assert [t["function"]["name"] for t in first["tools"]] == ["read_file", "ctxc_recall"]
    placeholder = next(m for m in first["messages"] if m.get("tool_call_id") == "t1")
    assert placeholder["content"].endswith('ctxc_recall {"call_id": "t1", "seq": 7}')
    called, result = second["messages"][-2:]
    assert called["tool_calls"][0]["function"]["name"] == "ctxc_recall"
    assert result["tool_call_id"] == called["tool_calls"][0]["id"]
    page = result["content"].rsplit("\n[ctxc_recall:", 1)[0]
    assert LOG.startswith(page) and len(page) > 1_000
    # Only the final answer is stored: the agent's next turn extends the session.
    roles = [m["role"] for m in stored(sidecar, session)]
    assert roles == [m["role"] for m in history] + ["assistant"]
    history += [answer, {"role": "user", "content": "and now?"}]
    up.requests.clear()
    again = client.chat.completions.with_raw_response.create(
        model="gpt-4o", messages=history, tools=TOOLS_OPENAI
    )
    assert "x-ctxc-forked-to" not in again.headers and "x-ctxc-recalls" not in again.headers
    assert len(stored(sidecar, session)) == len(history) + 1


def test_a_streamed_turn_is_not_offered_the_tool(sidecar: Sidecar, up: Upstream) -> None:
    session = recall_session(sidecar)
    client = sidecar.openai(session)
    stream = client.chat.completions.create(
        model="gpt-4o", messages=agent_history(), tools=TOOLS_OPENAI, stream=True
    )
    chunks = list(stream)
    assert chunks and any(c.choices and c.choices[0].delta.tool_calls for c in chunks)
    [request] = up.requests
    assert [t["function"]["name"] for t in request.body["tools"]] == ["read_file"]


def test_an_anthropic_recall_call_is_answered_in_a_user_turn(
    sidecar: Sidecar, up: Upstream
) -> None:
    session = recall_session(sidecar, "claude-haiku-4-5")
    client = sidecar.anthropic(session)

    def use(call_id: str) -> dict[str, Any]:
        return {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": call_id, "name": "run_tests", "input": {}}],
        }

    def answer(call_id: str) -> dict[str, Any]:
        return {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": call_id, "content": LOG}],
        }

    history: list[Any] = [
        {"role": "user", "content": "Run the tests twice"},
        use("t1"),
        answer("t1"),
        use("t2"),
        answer("t2"),
        {"role": "assistant", "content": "All green."},
        {"role": "user", "content": "What did the first run say?"},
    ]
    up.script.append(ToolCall(name="ctxc_recall", arguments={"call_id": "t1", "seq": 3}))
    raw = client.messages.with_raw_response.create(
        model="claude-haiku-4-5", max_tokens=256, messages=history, tools=TOOLS_ANTHROPIC
    )
    final = raw.parse()
    assert [b.type for b in final.content] == ["text"] and raw.headers["x-ctxc-recalls"] == "1"
    first, second = (r.body for r in up.requests)
    assert [t["name"] for t in first["tools"]] == ["read_file", "ctxc_recall"]
    called, answered = second["messages"][-2:]
    [block] = answered["content"]
    assert answered["role"] == "user" and block["tool_use_id"] == called["content"][0]["id"]
    assert LOG.startswith(block["content"].rsplit("\n[ctxc_recall:", 1)[0])
    assert "is_error" not in block
    assert len(stored(sidecar, session)) == len(history) + 1
    # The usage reported is of the request with the recall exchange, which the compile did not
    # estimate: it calibrates nothing. The next turn's (no recall) does.
    assert session_samples(sidecar.database_url, session) == []
    history += [
        {"role": "assistant", "content": [{"type": "text", "text": final.content[0].text}]},
        {"role": "user", "content": "Thanks"},
    ]
    up.script.append(Text())
    client.messages.create(model="claude-haiku-4-5", max_tokens=256, messages=history)
    [ring] = session_samples(sidecar.database_url, session)
    assert len(ring) == 1


def test_pages_fit_what_a_small_window_has_left(sidecar: Sidecar, up: Upstream) -> None:
    session = recall_session(sidecar)
    client = sidecar.openai(session, **{"X-Ctxc-Context-Window": "9000"})
    up.script.append(ToolCall(name="ctxc_recall", arguments={"call_id": "t1", "seq": 7}))
    raw = client.chat.completions.with_raw_response.create(
        model="gpt-4o", messages=agent_history(), tools=TOOLS_OPENAI
    )
    size = (9000 - int(raw.headers["x-ctxc-tokens"]) - 1024) // 3
    assert 64 < size < 4000
    result = up.requests[-1].body["messages"][-1]
    page = result["content"].rsplit("\n[ctxc_recall:", 1)[0]
    assert LOG.startswith(page) and len(O200K.encode(page)) <= size
