"""The sidecar's test harness: a real `ctxc` server forwarding to a real local upstream
(tests/upstreams.py), the official OpenAI and Anthropic SDKs as the agent's clients, and agent
loops written as agents write them."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import anthropic
import httpx
import openai

from tests.upstreams import Upstream

TOOLS_OPENAI = [
    {
        "type": "function",
        "function": {
            "name": "read_file",
            "description": "Read a file",
            "parameters": {
                "type": "object",
                "properties": {"path": {"type": "string"}},
                "required": ["path"],
            },
        },
    }
]


TOOLS_ANTHROPIC = [
    {
        "name": "read_file",
        "description": "Read a file",
        "input_schema": {
            "type": "object",
            "properties": {"path": {"type": "string"}},
            "required": ["path"],
        },
    }
]


@dataclass(frozen=True)
class Sidecar:
    url: str
    key: str
    upstream: Upstream
    database_url: str
    clients: list[openai.OpenAI | anthropic.Anthropic] = field(default_factory=list)

    def openai(self, session: str | None = None, **headers: str) -> openai.OpenAI:
        """The OpenAI SDK pointed at the sidecar (closed after the test)."""
        client = openai.OpenAI(
            base_url=f"{self.url}/openai/v1",
            api_key="sk-upstream",
            default_headers=self._headers(session, headers),
            max_retries=0,
        )
        self.clients.append(client)
        return client

    def anthropic(self, session: str | None = None, **headers: str) -> anthropic.Anthropic:
        """The Anthropic SDK pointed at the sidecar (closed after the test)."""
        client = anthropic.Anthropic(
            base_url=f"{self.url}/anthropic",
            api_key="sk-ant-upstream",
            default_headers=self._headers(session, headers),
            max_retries=0,
        )
        self.clients.append(client)
        return client

    def _headers(self, session: str | None, headers: dict[str, str]) -> dict[str, str]:
        session_header = {"X-Ctxc-Session": session} if session else {}
        return {"X-Ctxc-Api-Key": self.key, **session_header, **headers}

    def ctxc(self) -> httpx.Client:
        return httpx.Client(
            base_url=self.url, headers={"Authorization": f"Bearer {self.key}"}, timeout=60
        )


def stored(sidecar: Sidecar, session: str) -> list[dict[str, Any]]:
    with sidecar.ctxc() as c:
        answer = c.get(f"/v1/sessions/{session}/messages", params={"limit": 1000})
        assert answer.status_code == 200, answer.text
        return [item["message"] for item in answer.json()["items"]]


def prompt(turn: int) -> str:
    return f"Turn {turn}: look at src/pkg/module_{turn}.py and explain it. " + "Details. " * 40


def openai_loop(sidecar: Sidecar, session: str, turns: int, window: int) -> list[Any]:
    """A tool-calling agent as written against the OpenAI SDK: prompt, tool call, tool result,
    answer; its whole history resent every turn."""
    client = sidecar.openai(session, **{"X-Ctxc-Context-Window": str(window)})
    history: list[Any] = [{"role": "system", "content": "You are a coding agent."}]
    for turn in range(turns):
        history.append({"role": "user", "content": prompt(turn)})
        while True:
            answer = client.chat.completions.create(
                model="gpt-4o", messages=history, tools=TOOLS_OPENAI
            )
            message = answer.choices[0].message
            history.append(message)
            if not message.tool_calls:
                break
            for call in message.tool_calls:
                history.append(
                    {
                        "role": "tool",
                        "tool_call_id": call.id,
                        "content": f"contents of module {turn}\n" + "code line\n" * 60,
                    }
                )
    return history


def tool_results(calls: list[Any], turn: int) -> dict[str, Any]:
    """The user turn an Anthropic agent sends back with its tools' results of ``turn``."""
    content = f"contents of module {turn}\n" + "code line\n" * 60
    results = [{"type": "tool_result", "tool_use_id": c.id, "content": content} for c in calls]
    return {"role": "user", "content": results}


def anthropic_loop(sidecar: Sidecar, session: str, turns: int, window: int) -> list[Any]:
    client = sidecar.anthropic(session, **{"X-Ctxc-Context-Window": str(window)})
    history: list[Any] = []
    for turn in range(turns):
        history.append({"role": "user", "content": prompt(turn)})
        while True:
            with client.messages.stream(
                model="claude-haiku-4-5",
                max_tokens=512,
                system="You are a coding agent.",
                messages=history,
                tools=TOOLS_ANTHROPIC,
            ) as stream:
                final = stream.get_final_message()
            history.append({"role": "assistant", "content": final.content})
            calls = [b for b in final.content if b.type == "tool_use"]
            if not calls:
                break
            history.append(tool_results(calls, turn))
    return history
