"""In proxy mode ctxc answers the recall tool itself.

When a session's compiler offers the recall tool (the ``recall`` decorator), a non-streamed
turn forwards it beside the agent's tools; an upstream reply that only calls it (every tool call
is a recall call) is answered by ctxc: the call and its results are appended to the request and
the upstream is asked again, at most ``MAX_RECALLS`` times, the pages sized to what the window
has left (``page_tokens``). The agent gets the final answer, as if the model had answered at
once, and only that is stored: the agent never sees the recall exchange, so its next request,
which resends its history, extends the session as before. A streamed turn is forwarded as it
arrives: the tool is not offered there.
"""

from __future__ import annotations

from typing import Any, Final

import httpx
import orjson

from app.api.deps import AppState
from app.api.sidecar.forwarding import ANSWER_BYTES, ERROR_BYTES, read_body, send
from app.api.sidecar.requests import Turn
from app.domain.recall import MIN_PAGE_TOKENS, PAGE_TOKENS, tool_names, with_tools
from app.domain.wire import WireError
from app.domain.wire import reply_of as wire_reply
from app.services.compiling import Compilation
from app.services.sessions import recall as recalling
from app.services.sidecar.turns import Opened

MAX_RECALLS: Final = 3
# Tokens of the window a page leaves for the model's reply.
REPLY_ROOM: Final = 1_024


def offered(turn: Turn, done: Compilation) -> str | None:
    """The recall tool's name when this turn offers it (a non-streamed session turn whose
    compile added it)."""
    if turn.stream or turn.session_id is None or not done.output.tools:
        return None
    if turn.endpoint.provider not in ("openai", "anthropic"):
        return None  # Responses' calls are not read here (yet); Gemini's carry no ids
    names = [n for tool in done.output.tools for n in tool_names(turn.endpoint.provider, tool)]
    return names[0] if names else None


def tools(turn: Turn, done: Compilation) -> list[Any] | None:
    """The tools to forward: the agent's with the recall tool, when the turn offers it."""
    if offered(turn, done) is None:
        return None
    return with_tools(turn.endpoint.provider, turn.body.get("tools"), done.output.tools)


def _calls(provider: str, message: dict[str, Any], name: str) -> list[tuple[str, Any]] | None:
    """The (id, arguments) of the reply's tool calls when every one calls ``name``."""
    found: list[tuple[Any, Any, Any]]
    if provider == "openai":
        found = [
            (
                c.get("id"),
                (c.get("function") or {}).get("name"),
                (c.get("function") or {}).get("arguments"),
            )
            for c in message.get("tool_calls") or ()
            if isinstance(c, dict)
        ]
    else:
        content = message.get("content")
        found = (
            [
                (b.get("id"), b.get("name"), b.get("input"))
                for b in content
                if isinstance(b, dict) and b.get("type") == "tool_use"
            ]
            if isinstance(content, list)
            else []
        )
    if not found or any(called != name or not isinstance(i, str) for i, called, _ in found):
        return None
    return [(i, args) for i, _, args in found]


def page_tokens(done: Compilation, calls: int) -> int:
    """A page's size in this turn: what the window has left beside the compiled request and a
    reply, shared by the calls of every round ctxc may answer (at most ``PAGE_TOKENS``). The
    room is in the provider's tokens and a page is counted as estimated ones: converted."""
    room = done.output.context_window - done.output.total - REPLY_ROOM
    if done.calibration is not None:
        room = done.calibration.budget(max(room, 0))
    return max(MIN_PAGE_TOKENS, min(PAGE_TOKENS, room // (calls * MAX_RECALLS)))


async def _results(
    state: AppState,
    turn: Turn,
    opened: Opened,
    done: Compilation,
    name: str,
    calls: list[tuple[str, Any]],
) -> list[dict[str, Any]]:
    out = []
    pending = [message for message, _ in opened.new]  # the turn is stored once answered
    size = page_tokens(done, len(calls))
    for call_id, arguments in calls:
        call = recalling.Call(turn.endpoint.provider, name, call_id, arguments or {}, size)
        async with state.sessionmaker() as db:
            recalled = await recalling.recall(
                db,
                state.counter,
                state.settings.catalog,
                turn.tenant,
                opened.session_id,
                call,
                pending,
            )
        out.append(recalled.result)
    return out


async def settle(
    state: AppState,
    turn: Turn,
    opened: Opened,
    done: Compilation,
    payload: bytes,
    upstream: httpx.Response,
) -> tuple[httpx.Response, bytes, int]:
    """The upstream's final answer (read), after answering up to ``MAX_RECALLS`` replies that
    only call the recall tool, and how many it answered."""
    name = offered(turn, done)
    data = await read_body(upstream, ANSWER_BYTES)
    if name is None:
        return upstream, data, 0
    sent = orjson.loads(payload)
    messages = list(sent["messages"])
    for n in range(MAX_RECALLS):
        try:
            reply = wire_reply(turn.endpoint.provider, orjson.loads(data))
        except (orjson.JSONDecodeError, WireError):
            return upstream, data, n
        calls = _calls(turn.endpoint.provider, reply.message, name)
        if calls is None:
            return upstream, data, n
        results = await _results(state, turn, opened, done, name, calls)
        answer = (
            results
            if turn.endpoint.provider == "openai"
            else [{"role": "user", "content": results}]
        )
        messages += [reply.message, *answer]
        body = orjson.dumps({**sent, "messages": messages})
        upstream = await send(state, turn.upstream(state), body, turn.headers, params=turn.query)
        limit = ANSWER_BYTES if upstream.status_code == 200 else ERROR_BYTES
        data = await read_body(upstream, limit)
        if upstream.status_code != 200:
            return upstream, data, n + 1
    return upstream, data, MAX_RECALLS
