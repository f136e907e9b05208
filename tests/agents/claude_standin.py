"""A scripted stand-in of Anthropic's Messages API that drives Claude Code through a long session.

Requests are told apart by their system prompt: the sub-agent's (Claude Code marks it, and its
first user message holds ``SUB_MARKER``, which the stand-in writes into its ``Agent`` call) is
"sub"; the main loop's (that of the first request with tools whose first user message holds the
task) is "main"; anything else, and Claude Code's own summary request (what it sends when a
"prompt is too long" reaches it), a side request ("side", answered with plain text).

The main loop is a fixed plan, one step per main request answered: ``Read`` the working
directory's 20 KB files one by one, a ``Bash`` command now and then, once an ``Agent`` call whose
sub-agent reads a file and answers, then a final text. Each answer opens with a thinking block
carrying a signature; every thinking block the agent sends back must carry a signature the
stand-in issued, with the text it was issued with (else a problem is noted). Once, at
``overflow_at``, a main request gets Anthropic's real "prompt is too long" 400; a request over
``window`` tokens always does, and so does a tool-call turn sent back without its thinking
block (Anthropic's own 400, noted as a problem too).
"""

from __future__ import annotations

import base64
import hashlib
import itertools
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from starlette.responses import Response

from tests.agents.standin import Json, Received, StandIn
from tests.upstream_anthropic import AnthropicWire
from tests.upstream_wires import TEXT_PIECE, Error, Reply, dumps, json_reply, pieces

SUB_MARKER = "[sub-agent 7f3c]"
# The sub-agent's task, as the main loop's Agent call gives it.
SUB_TASK = f"{SUB_MARKER} Report the first line of the first notes file."
SUMMARY = "<analysis>The notes files.</analysis>\n<summary>Some notes files were read.</summary>"
FINAL_TEXT = "All files are read and summarised: the task is complete."
WIRE = AnthropicWire()
OVERFLOW = Error("overflow")
BILLING = "x-anthropic-billing-header:"
# How Claude Code asks for a summary when a "prompt is too long" reaches it.
COMPACT_ASK = "CRITICAL: Respond with TEXT ONLY. Do NOT call any tools."


@dataclass(frozen=True)
class Call:
    """A tool call the plan makes."""

    name: str
    input: Json


def files(count: int, size: int) -> dict[str, str]:
    """``count`` text files of about ``size`` bytes for the working directory, each distinct."""
    out = {}
    for i in range(1, count + 1):
        line = f"notes {i:02d}: line %05d of a long file the agent reads in full, with words.\n"
        lines = itertools.count(1)
        text = ""
        while len(text) < size:
            text += line % next(lines)
        out[f"notes/part{i:02d}.txt"] = text
    return out


class ClaudeStandIn(StandIn):
    """Options: ``task`` (the task sentence), ``files`` (the names to read, in order),
    ``window`` (tokens), ``overflow_at`` (the main step that gets a "prompt is too long" once),
    ``agent_at`` (the main step that calls the ``Agent`` tool; -1: never), ``bash_every``."""

    provider = "anthropic"

    def __init__(self, options: Json, workdir: Path) -> None:
        super().__init__(options, workdir)
        self.plan = self._plan()
        self.step = 0  # main requests answered so far
        self.sub_step = 0
        self.overflowed = False
        self.issued: dict[str, str] = {}  # signature -> thinking text
        self.ids = itertools.count(1)
        self.main_system: str | None = None

    def _plan(self) -> list[Call]:
        names: list[str] = self.options["files"]
        calls: list[Call] = []
        for i, name in enumerate(names):
            calls.append(Call("Read", {"file_path": str(self.workdir / name)}))
            if self.options.get("bash_every") and i % self.options["bash_every"] == 0:
                calls.append(
                    Call(
                        "Bash",
                        {
                            "command": f"wc -l {name}",
                            "description": "Count the lines of a notes file",
                        },
                    )
                )
        agent_at = self.options.get("agent_at", -1)
        if agent_at >= 0:
            calls.insert(
                agent_at,
                Call(
                    "Agent",
                    {
                        "description": "Read the first notes file",
                        "prompt": SUB_TASK,
                        "subagent_type": "general-purpose",
                        "run_in_background": False,
                    },
                ),
            )
        return calls

    async def answer(self, seen: Received) -> Response:
        if seen.method != "POST" or not seen.path.startswith("/v1/messages"):
            seen.answer = "status:404"
            return _reply(WIRE._error(404, "not_found_error", f"Not found: {seen.path}", 0))
        n = next(self.ids)
        counting = seen.path.endswith("/count_tokens")
        # Counting takes no max_tokens; the rest is refused as the Messages API refuses it.
        checked = {"max_tokens": 1, **seen.body} if counting else seen.body
        refusal = WIRE.refuse(seen.headers, checked, True, None, n)
        if refusal is not None:
            seen.answer = f"status:{refusal.status}"
            return _reply(refusal)
        if counting:
            seen.answer = "count"
            return _reply(_json(200, {"input_tokens": seen.tokens}))
        self._check_signatures(seen.body)
        seen.kind = self._kind(seen.body)
        unthought = _unthought(seen.body)
        if unthought is not None:
            seen.answer = "error:thinking"
            self.problem(f"refused with Anthropic's 400: {unthought}")
            return _reply(WIRE._error(400, "invalid_request_error", unthought, n))
        window = int(self.options["window"])
        if seen.tokens > window:
            seen.answer = "error:overflow"
            return _reply(WIRE.error(OVERFLOW, seen.body, seen.tokens, window, n))
        return self._model(seen, n)

    def _model(self, seen: Received, n: int) -> Response:
        with self.lock:
            scripted = seen.kind == "main" and self.step == self.options.get("overflow_at", -1)
            if scripted and not self.overflowed:
                self.overflowed = True
                seen.answer = "error:overflow-scripted"
                window = int(self.options["window"])
                over = max(seen.tokens, window + 1)
                return _reply(WIRE.error(OVERFLOW, seen.body, over, window, n))
            call = self._next_call(seen.kind)
        seen.answer = "text" if call is None else f"tool:{call.name}"
        return self._message(seen, call, n)

    def _next_call(self, kind: str) -> Call | None:
        if kind == "main":
            call = self.plan[self.step] if self.step < len(self.plan) else None
            self.step += 1
            return call
        if kind == "sub":
            self.sub_step += 1
            if self.sub_step == 1:
                return Call("Read", {"file_path": str(self.workdir / self.options["files"][0])})
        return None

    def _kind(self, body: Json) -> str:
        """Told apart by the system prompt (ctxc may rewrite the messages, not the system): the
        first with the task and tools is the main loop's; Claude Code marks its sub-agents'
        billing line ``cc_is_subagent=true``."""
        system = body.get("system")
        blocks = system if isinstance(system, list) else [{"text": system or ""}]
        texts = [b.get("text") or "" for b in blocks if isinstance(b, dict)]
        if any("cc_is_subagent=true" in text for text in texts):
            return "sub"
        if COMPACT_ASK in _last_user_text(body.get("messages") or []):
            return "side"  # Claude Code's own compaction, after an overflow reached it
        # The billing line changes from request to request.
        fingerprint = dumps([t for t in texts if not t.startswith(BILLING)])
        with self.lock:
            if self.main_system is None and self._opens_task(body):
                self.main_system = fingerprint
            if fingerprint == self.main_system:
                return "main"
        return "sub" if SUB_MARKER in _first_user_text(body.get("messages") or []) else "side"

    def _opens_task(self, body: Json) -> bool:
        return bool(body.get("tools")) and self.options["task"] in _first_user_text(
            body.get("messages") or []
        )

    def _check_signatures(self, body: Json) -> None:
        for i, message in enumerate(body.get("messages") or []):
            content = message.get("content") if isinstance(message, dict) else None
            for block in content if isinstance(content, list) else []:
                if not isinstance(block, dict) or block.get("type") != "thinking":
                    continue
                signature = block.get("signature")
                with self.lock:
                    issued = self.issued.get(signature) if isinstance(signature, str) else None
                if issued is None or issued != block.get("thinking"):
                    self.problem(
                        f"messages[{i}]: a thinking block not as issued: {dumps(block)[:200]}"
                    )

    def _thinking(self, body: Json, n: int) -> Json:
        """A signed thinking block, remembered; its text empty when the agent asked for the
        thinking display omitted, as the API sends it then."""
        omitted = (body.get("thinking") or {}).get("display") == "omitted"
        thought = "" if omitted else f"Step {n}: deciding what to read next."
        signature = base64.b64encode(hashlib.sha256(f"sig{n}{thought}".encode()).digest() * 4)
        with self.lock:
            self.issued[signature.decode()] = thought
        return {"type": "thinking", "thinking": thought, "signature": signature.decode()}

    def _message(self, seen: Received, call: Call | None, n: int) -> Response:
        body = seen.body
        if call is None:
            texts = {"main": FINAL_TEXT, "side": SUMMARY, "sub": "First line read."}
            block: Json = {"type": "text", "text": texts[seen.kind]}
        else:
            block = {"type": "tool_use", "id": f"toolu_standin{n:05d}", "name": call.name}
            block["input"] = call.input
        blocks = [self._thinking(body, n), block]
        usage = {
            "input_tokens": seen.tokens,
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 0,
            "output_tokens": 40,
        }
        message = {
            "id": f"msg_standin{n:05d}",
            "type": "message",
            "role": "assistant",
            "model": body.get("model"),
            "content": blocks,
            "stop_reason": "end_turn" if call is None else "tool_use",
            "stop_sequence": None,
            "usage": usage,
        }
        if not body.get("stream"):
            return _reply(_json(200, message))
        return Response(
            b"".join(_events(message)),
            200,
            media_type="text/event-stream",
            headers={"request-id": f"req_standin{n:05d}"},
        )


def _unthought(body: Json) -> str | None:
    """Anthropic's 400 for a request with thinking on whose last assistant turn, a tool call,
    does not open with its thinking block (the agent sent it back, so ctxc dropped it)."""
    if (body.get("thinking") or {}).get("type") not in ("enabled", "adaptive"):
        return None
    messages = [m for m in body.get("messages") or [] if isinstance(m, dict)]
    turns = [i for i, m in enumerate(messages) if m.get("role") == "assistant"]
    content = messages[turns[-1]].get("content") if turns else None
    if not isinstance(content, list) or not content:
        return None
    kinds = [b.get("type") for b in content if isinstance(b, dict)]
    if "tool_use" not in kinds or kinds[0] in ("thinking", "redacted_thinking"):
        return None
    return (
        f"messages.{turns[-1]}.content.0.type: Expected `thinking` or `redacted_thinking`, but "
        f"found `{kinds[0]}`. When `thinking` is enabled, a final `assistant` message must start "
        "with a thinking block (preceeding the lastmost set of `tool_use` and `tool_result` "
        "blocks). We recommend you include thinking blocks from previous turns. To avoid this "
        "requirement, disable `thinking`. Please consult our documentation at "
        "https://docs.claude.com/en/docs/build-with-claude/extended-thinking"
    )


def _last_user_text(messages: list[Any]) -> str:
    users = [m for m in messages if isinstance(m, dict) and m.get("role") == "user"]
    return dumps(users[-1].get("content")) if users else ""


def _first_user_text(messages: list[Any]) -> str:
    for message in messages:
        if isinstance(message, dict) and message.get("role") == "user":
            return dumps(message.get("content"))
    return ""


def _json(status: int, body: Json) -> Reply:
    return json_reply(status, body, {})


def _reply(reply: Reply) -> Response:
    return Response(b"".join(reply.parts), reply.status, headers=reply.headers)


def _events(message: Json) -> list[bytes]:
    """The SSE events of ``message``, as Anthropic streams one."""

    def event(name: str, data: Json) -> bytes:
        return f"event: {name}\ndata: {dumps({'type': name, **data})}\n\n".encode()

    start = {
        **message,
        "content": [],
        "stop_reason": None,
        "usage": {**message["usage"], "output_tokens": 1},
    }
    out = [event("message_start", {"message": start}), event("ping", {})]
    for index, block in enumerate(message["content"]):
        out += [event(name, {"index": index, **data}) for name, data in _block_events(block)]
    out.append(
        event(
            "message_delta",
            {
                "delta": {"stop_reason": message["stop_reason"], "stop_sequence": None},
                "usage": {"output_tokens": 40},
            },
        )
    )
    out.append(event("message_stop", {}))
    return out


def _block_events(block: Json) -> list[tuple[str, Json]]:
    if block["type"] == "thinking":
        opened: Json = {"type": "thinking", "thinking": "", "signature": ""}
        deltas = [
            {"type": "thinking_delta", "thinking": p}
            for p in pieces(block["thinking"], TEXT_PIECE)
            if p
        ]
        deltas.append({"type": "signature_delta", "signature": block["signature"]})
    elif block["type"] == "text":
        opened = {"type": "text", "text": ""}
        deltas = [{"type": "text_delta", "text": p} for p in pieces(block["text"], TEXT_PIECE)]
    else:
        opened = {**block, "input": {}}
        deltas = [
            {"type": "input_json_delta", "partial_json": p}
            for p in pieces(dumps(block["input"]), 8)
        ]
    return [
        ("content_block_start", {"content_block": opened}),
        *(("content_block_delta", {"delta": d}) for d in deltas),
        ("content_block_stop", {}),
    ]
