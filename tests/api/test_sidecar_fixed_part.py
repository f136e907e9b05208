"""A sidecar session lives with its agent's fixed part (issue 29, item 6): Claude Code sends about
25,000 tokens of system prompt and tool definitions every turn; in a 40,000-token window, 16 turns
of 20 KB tool results through the sidecar (the official Anthropic SDK, a real local upstream that
refuses an over-window prompt with the provider's error) compact at most 3 times, never on two
turns in a row, every request fits the window, and between compactions every request's messages
start with the previous request's, byte for byte (the provider's prompt cache keeps them)."""

from __future__ import annotations

import itertools
import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from app.adapters.tokenizers import load_encoding
from app.settings import Settings
from tests.api.sidecar import Sidecar
from tests.conftest import LiveServer, make_key
from tests.upstream_wires import dumps
from tests.upstreams import Upstream

WINDOW = 40_000
TURNS = 16


def tool(n: int) -> dict[str, Any]:
    """A tool definition of about 1,000 tokens (agents' descriptions are long)."""
    words = " ".join(
        f"When option_{n}_{k} is set the tool reads mode_{k} first." for k in range(60)
    )
    schema = {
        "type": "object",
        "required": ["path"],
        "properties": {"path": {"type": "string", "description": "The file to read"}},
    }
    return {
        "name": f"tool_{n}" if n else "read_file",
        "description": f"Tool {n}. {words}",
        "input_schema": schema,
    }


TOOLS = [tool(n) for n in range(19)]
SYSTEM = "You are a coding agent. " + " ".join(
    f"Rule {k}: keep edits small, run the tests of area_{k} before you commit." for k in range(320)
)


def result(turn: int) -> str:
    """A file read: about 20 KB, 5,700 tokens."""
    return "\n".join(
        f"{i:6}\tdef handler_{turn}_{i}(request, ctx):  # returns compute(request.arg_{i % 9})"
        for i in range(260)
    )


@pytest.fixture()
def small(database_url: str) -> Iterator[Sidecar]:
    """A sidecar forwarding to an upstream whose window is ``WINDOW``."""
    with Upstream(window=WINDOW) as upstream:
        settings = Settings(
            database_url=database_url,
            auth="keys",
            openai_upstream=upstream.openai_base,
            anthropic_upstream=upstream.anthropic_base,
        )
        key = make_key(database_url, f"fixed-{uuid.uuid4().hex[:6]}")
        with LiveServer(settings) as server:
            sidecar = Sidecar(server.url, key, upstream, database_url)
            yield sidecar
            while sidecar.clients:
                sidecar.clients.pop().close()


def openai_tool(n: int) -> dict[str, Any]:
    """``tool(n)`` as OpenAI takes it."""
    found = tool(n)
    function = {
        "name": found["name"],
        "description": found["description"],
        "parameters": found["input_schema"],
    }
    return {"type": "function", "function": function}


def openai_agent(sidecar: Sidecar, session: str) -> list[tuple[int, int]]:
    """``agent`` written against the OpenAI SDK: its system prompt a system message."""
    client = sidecar.openai(session, **{"X-Ctxc-Context-Window": str(WINDOW)})
    tools: Any = [openai_tool(n) for n in range(len(TOOLS))]
    history: list[Any] = [{"role": "system", "content": SYSTEM}]
    said = []
    for turn in range(TURNS):
        history.append({"role": "user", "content": f"Turn {turn}: read src/module_{turn}.py."})
        while True:
            raw = client.chat.completions.with_raw_response.create(
                model="gpt-4o", messages=history, tools=tools
            )
            said.append((turn, int(raw.headers["x-ctxc-compactions"])))
            message = raw.parse().choices[0].message
            history.append(message.model_dump(exclude_none=True))
            if not message.tool_calls:
                break
            history += [
                {"role": "tool", "tool_call_id": c.id, "content": result(turn)}
                for c in message.tool_calls
            ]
    return said


def agent(sidecar: Sidecar, session: str) -> list[tuple[int, int]]:
    """Claude Code's loop, its fixed part included: each turn a prompt, a file read and an
    answer. The (turn, compactions) of each request, as ctxc's headers said."""
    client = sidecar.anthropic(session, **{"X-Ctxc-Context-Window": str(WINDOW)})
    history: list[Any] = []
    said = []
    for turn in range(TURNS):
        history.append({"role": "user", "content": f"Turn {turn}: read src/module_{turn}.py."})
        while True:
            raw = client.messages.with_raw_response.create(
                model="claude-haiku-4-5",
                max_tokens=512,
                system=SYSTEM,
                messages=history,
                tools=TOOLS,
            )
            said.append((turn, int(raw.headers["x-ctxc-compactions"])))
            content = [b.model_dump() for b in raw.parse().content]
            history.append({"role": "assistant", "content": content})
            calls = [b for b in content if b["type"] == "tool_use"]
            if not calls:
                break
            history.append(
                {
                    "role": "user",
                    "content": [
                        {"type": "tool_result", "tool_use_id": c["id"], "content": result(turn)}
                        for c in calls
                    ],
                }
            )
    return said


def prompt_tokens(body: dict[str, Any]) -> int:
    """The upstream's count of a request's prompt (tests/upstreams.py)."""
    prompt = {key: body[key] for key in ("tools", "system", "messages") if key in body}
    return len(load_encoding("o200k_base").encode_ordinary(dumps(prompt)))


def fixed_part(body: dict[str, Any]) -> dict[str, Any]:
    """What of a request the agent sends unchanged every turn: tools and system prompt."""
    system = [m for m in body["messages"] if m["role"] == "system"]
    return {key: body[key] for key in ("tools", "system") if key in body} | {"messages": system}


@pytest.mark.parametrize("provider", ["anthropic", "openai"])
def test_an_agent_with_a_big_fixed_part_compacts_rarely_and_keeps_its_prefix(
    small: Sidecar, provider: str
) -> None:
    session = f"fixed-{uuid.uuid4().hex[:6]}"
    said = (agent if provider == "anthropic" else openai_agent)(small, session)
    bodies = [r.body for r in small.upstream.requests]
    # Each request answered the first time: none refused for its length and retried.
    assert len(bodies) == len(said) == 2 * TURNS
    assert 24_000 < prompt_tokens(fixed_part(bodies[0])) < 26_000
    assert all(prompt_tokens(b) <= WINDOW for b in bodies)
    with small.ctxc() as c:
        compactions = c.get(f"/v1/sessions/{session}/compactions").json()["items"]
    compacted = [turn for turn, count in said if count]
    assert 1 <= len(compactions) <= 3
    assert sum(count for _, count in said) == len(compactions)
    assert all(later - earlier > 1 for earlier, later in itertools.pairwise(compacted))
    # Between compactions the messages sent only grow at their end, byte for byte.
    for n, (before, after) in enumerate(itertools.pairwise(bodies), start=1):
        sent, then = before["messages"], after["messages"]
        extends = json.dumps(then[: len(sent)]) == json.dumps(sent)
        assert extends == (said[n][1] == 0), n
