"""A scripted stand-in of OpenAI's Responses API that drives Codex CLI through a long session.

Every ``POST /v1/responses`` is a "main" request (Codex has one loop here: no sub-agent is asked
for). The plan is one step per main request answered: an ``exec_command`` call reading each of
the working directory's files in turn (``cat <file>``), then a final text. Answers are
tests/upstream_responses.py's: a reasoning item with an ``encrypted_content`` first, then the
call or the message, streamed as the API streams them when asked. Every request is refused as
the API would and noted as a problem when it breaks a rule of ``responses_problems``, or sends
back a reasoning item this stand-in did not give out byte for byte, or lacks the Bearer key.
Once, at ``overflow_at``, a request gets the API's real "context_length_exceeded" 400; a
request over ``window`` tokens always does.
"""

from __future__ import annotations

import itertools
from pathlib import Path

from starlette.responses import Response

from tests.agents.standin import Json, Received, StandIn
from tests.upstream_responses import ResponsesWire
from tests.upstream_wires import Error, Reply, Text, ToolCall, Usage

FINAL_TEXT = "All parts are read: the incident began when the cache went cold."
OVERFLOW = Error("overflow")


class CodexStandIn(StandIn):
    """Options: ``files`` (the names to read, in order), ``window`` (tokens), ``overflow_at``
    (the step that gets a "context_length_exceeded" once), ``key`` (the only API key)."""

    provider = "responses"

    def __init__(self, options: Json, workdir: Path) -> None:
        super().__init__(options, workdir)
        self.wire = ResponsesWire()
        self.ids = itertools.count(1)
        self.step = 0  # main requests answered so far
        self.overflowed = False

    async def answer(self, seen: Received) -> Response:
        if seen.method != "POST" or seen.path != "/v1/responses":
            seen.answer = "status:404"
            return Response(status_code=404)
        seen.kind = "main"
        n = next(self.ids)
        refusal = self.wire.refuse(seen.headers, seen.body, True, self.options["key"], n)
        if refusal is not None:
            seen.answer = f"status:{refusal.status}"
            self.problem(f"request {n} refused: {b''.join(refusal.parts)[:300]!r}")
            return _reply(refusal)
        if seen.tokens > self.options["window"]:
            seen.answer = "error:overflow"
            return _reply(self.wire.error(OVERFLOW, seen.body, seen.tokens, 0, n))
        if self.step == self.options["overflow_at"] and not self.overflowed:
            self.overflowed = True
            seen.answer = "error:overflow-scripted"
            return _reply(self.wire.error(OVERFLOW, seen.body, seen.tokens, 0, n))
        return _reply(self._next(seen, n))

    def _next(self, seen: Received, n: int) -> Reply:
        """The plan's next step, answered."""
        names: list[str] = self.options["files"]
        answer: Text | ToolCall
        if self.step < len(names):
            answer = ToolCall("exec_command", {"cmd": f"cat {names[self.step]}"})
            seen.answer = "tool:exec_command"
        else:
            answer = Text(FINAL_TEXT)
            seen.answer = "text"
        self.step += 1
        return self.wire.reply(answer, seen.body, Usage(seen.tokens, 0, 0, 20), n)


def _reply(reply: Reply) -> Response:
    return Response(b"".join(reply.parts), reply.status, headers=reply.headers)
