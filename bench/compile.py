"""Compile through HTTP against langchain-core's trim_messages with a tiktoken counter.

Same histories, same budget, same run: stateless compiles of 100, 1,000 and 10,000-message agent
histories (first call, repeated call, and the next turn: the history plus one new message), a
session compile of a 10,000-message session on each
database, and trim_messages(strategy="last") counting every message with o200k_base.

Then the first stateless compile (histories the server has never seen) of 1,000 and 10,000
messages against its floor: tiktoken counting the same text in this process, on one thread
(``encode_ordinary`` of every text a message is counted by: role, name, content, tool call names
and arguments). Measured twice: on a server that has answered other compiles before, and as the
very first request of a freshly started server (cold: nothing warmed, nothing collected yet).
"""

from __future__ import annotations

import json
import random
import statistics
import time
from functools import partial
from typing import Any

from langchain_core.messages import BaseMessage, convert_to_messages, trim_messages

from app.adapters.tokenizers import load_encoding
from bench.append import agent_batch
from bench.common import database, describe, server

SIZES = (100, 1_000, 10_000)
FIRST = {1_000: 7, 10_000: 3}  # distinct histories per size, each compiled once
COLD = 5  # freshly started servers, each sent one 1,000-message history first
REPEATS = {100: 30, 1_000: 15, 10_000: 5}
ENCODING = load_encoding("o200k_base")
JSON = {"content-type": "application/json"}


def history(size: int, seed: int) -> list[dict[str, Any]]:
    """An agent history of ``size`` messages, none of them in another seed's history: the tool
    call turns, whose ids ``agent_batch`` derives from their position alone, are given the seed
    too (a history that shared them would find a quarter of its messages already parsed)."""
    rng = random.Random(seed)
    out = [_own(m, seed) for i in range(0, size, 10) for m in agent_batch(rng, i)]
    return out[:size]


def _own(message: dict[str, Any], seed: int) -> dict[str, Any]:
    if "tool_call_id" in message:
        return message | {"tool_call_id": f"{message['tool_call_id']}_{seed}"}
    calls = [c | {"id": f"{c['id']}_{seed}"} for c in message.get("tool_calls") or []]
    return message | {"tool_calls": calls} if calls else message


def lc_count(messages: list[BaseMessage]) -> int:
    """The tiktoken counter trim_messages is given: per message 3 + content + tool calls JSON."""
    total = 0
    for message in messages:
        content = message.content
        text = content if isinstance(content, str) else json.dumps(content)
        calls = json.dumps(getattr(message, "tool_calls", []) or [])
        total += 3 + len(ENCODING.encode_ordinary(text)) + len(ENCODING.encode_ordinary(calls))
    return total


def timed(work: Any, repeats: int) -> list[float]:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        work()
        times.append(time.perf_counter() - start)
    return times


def texts(message: dict[str, Any]) -> list[str]:
    """The texts of an OpenAI message that its token count encodes."""
    out = [message["role"], message.get("name") or ""]
    content = message.get("content")
    out += [content] if isinstance(content, str) else [p.get("text", "") for p in content or []]
    for call in message.get("tool_calls") or []:
        out += [call["function"]["name"], call["function"]["arguments"]]
    return [t for t in out if t]


def unseen(client: Any, size: int, seed: int) -> tuple[float, float]:
    """A compile of a history new to the server, and its floor: tiktoken counting its text."""
    messages = history(size, seed=seed)
    body = {
        "messages": messages,
        "compiler": {"decorators": ["token_limit"]},
        "context_window": 100_000,
    }
    raw = json.dumps(body).encode()
    every = [t for m in messages for t in texts(m)]
    floor = timed(lambda: [ENCODING.encode_ordinary(t) for t in every], 1)[0]
    call = partial(client.post, "/v1/compile", content=raw, headers=JSON)
    return timed(lambda: call().raise_for_status(), 1)[0], floor


def report_first(label: str, pairs: list[tuple[float, float]]) -> None:
    first = statistics.median(p[0] for p in pairs)
    floor = statistics.median(p[1] for p in pairs)
    print(
        f"  {label}: median {first * 1000:7.1f} ms | tiktoken counting its text, one thread:"
        f" median {floor * 1000:7.1f} ms | ratio {first / floor:4.2f}x"
    )


def first_compiles(client: Any) -> None:
    """First compiles of unseen histories against tiktoken counting their text (the floor)."""
    for size, count in FIRST.items():
        pairs = [unseen(client, size, 1_000 * size + k) for k in range(count)]
        report_first(f"first stateless compile, {size:>6,} msgs", pairs)


def cold_compiles() -> None:
    """The first request of a freshly started server: a 1,000-message history, each time."""
    pairs = []
    for k in range(COLD):
        with database("sqlite") as url, server(url) as client:
            pairs.append(unseen(client, 1_000, 7_000 + k))
    report_first(f"first request of a fresh server, 1,000 msgs ({COLD} servers)", pairs)


def run() -> None:
    print("compile: stateless through HTTP vs langchain-core trim_messages (in process)")
    with database("sqlite") as url, server(url) as client:
        for size in SIZES:
            messages = history(size, seed=size)
            total = client.post("/v1/tokens/count", json={"messages": messages}).json()["total"]
            budget = total // 2
            body = {
                "messages": messages,
                "context_window": budget,
                "compiler": {"decorators": [{"name": "token_limit", "params": {"reserve": 0}}]},
            }

            raw = json.dumps(body).encode()  # serialised once: the client's cost is not ours

            def call(raw: bytes = raw) -> None:
                client.post("/v1/compile", content=raw, headers=JSON).raise_for_status()

            first = timed(call, 1)[0]
            repeated = timed(call, REPEATS[size])
            # The agent loop: the same history plus one new turn each time (nothing remembered
            # for the whole request; every earlier message is found parsed and counted).
            turns = [
                json.dumps(body | {"messages": [*messages, {"role": "user", "content": f"go {k}"}]})
                for k in range(REPEATS[size])
            ]
            grown = [timed(partial(call, turn.encode()), 1)[0] for turn in turns]
            trim = partial(
                trim_messages,
                convert_to_messages(messages),
                max_tokens=budget,
                strategy="last",
                token_counter=lc_count,
            )
            trimmed = timed(trim, max(3, REPEATS[size] // 3))
            trim_ms = statistics.median(trimmed)
            ratio, next_ratio = (
                trim_ms / statistics.median(repeated),
                trim_ms / statistics.median(grown),
            )
            print(
                f"  {size:>6} msgs, budget {budget:>9,}: first {first * 1000:8.1f} ms | repeated "
                f"{describe(repeated)} | next turn median {statistics.median(grown) * 1000:7.1f} ms"
                f" | trim_messages median {trim_ms * 1000:9.1f} ms"
                f" | ratio {ratio:6.1f}x (next turn {next_ratio:4.1f}x)"
            )
    for kind in ("sqlite", "postgres"):
        with database(kind) as url, server(url) as client:
            sid = client.post("/v1/sessions", json={}).json()["id"]
            messages = history(10_000, seed=7)
            for i in range(0, len(messages), 1_000):
                batch = {"messages": messages[i : i + 1_000]}
                client.post(f"/v1/sessions/{sid}/messages", json=batch).raise_for_status()

            def session_call(path: str = f"/v1/sessions/{sid}/compile") -> None:
                client.post(path, json={}).raise_for_status()

            print(
                f"  session compile, 10,000 messages, {kind:8s}: {describe(timed(session_call, 5))}"
            )
    with database("sqlite") as url, server(url) as client:
        first_compiles(client)
    cold_compiles()


if __name__ == "__main__":
    run()
