"""A scripted stand-in of the Gemini API that drives Gemini CLI through a long session.

Requests are told apart by their system instruction: the main loop's is that of the first
request with tools whose first user content holds the task ("main"); every other model call
(Gemini CLI's next-speaker check, loop detection, history compression, ... with a flash model
and no tools) is a side request ("side"), answered with text, or with JSON its
``responseJsonSchema`` accepts (the next speaker: the model the first time, so that the agent
goes on with another main request, then the user; no loop).

The main loop is a fixed plan, one step per main request answered: ``read_file`` of the working
directory's 20 KB files one by one, a ``run_shell_command`` now and then, then a final text.
Each answer opens with a thought and signs its function call with a ``thoughtSignature``
(tests/upstream_gemini.py's ``GeminiWire``): a call sent back without it gets Gemini 3's 400,
one with another signature is noted as a problem. Once, at ``overflow_at``, a main request gets
Gemini's real "input token count exceeds the maximum" 400; a request over ``window`` tokens
always does.
"""

from __future__ import annotations

from pathlib import Path

from starlette.responses import Response

from tests.agents.standin import Json, Received, StandIn
from tests.upstream_gemini import Answer, GeminiWire, error, overflow, to_response
from tests.upstream_wires import dumps, example_arguments

FINAL_TEXT = "All files are read and summarised: the task is complete."
MODEL_CALLS = ("generateContent", "streamGenerateContent")
# What the side requests' JSON schemas ask, answered so that the agent carries on.
SIDE_ANSWERS: Json = {
    "next_speaker": "user",
    "unproductive_state_confidence": 0.0,
    "is_unproductive": False,
    "reasoning": "The model answered; the user speaks next.",
}


class GeminiStandIn(StandIn):
    """Options: ``task`` (the task sentence), ``files`` (the names to read, in order),
    ``window`` (tokens), ``overflow_at`` (the main step that gets the overflow once),
    ``shell_every``."""

    provider = "gemini"

    def __init__(self, options: Json, workdir: Path) -> None:
        super().__init__(options, workdir)
        self.wire = GeminiWire()
        self.plan = self._plan()
        self.step = 0
        self.overflowed = False
        self.main_system: str | None = None
        self.n = 0
        self.checks = 0  # next-speaker checks answered

    def _plan(self) -> list[Json]:
        calls: list[Json] = []
        every = self.options.get("shell_every") or 0
        for i, name in enumerate(self.options["files"]):
            calls.append({"name": "read_file", "args": {"file_path": name}})
            if every and i % every == 0:
                command = {"command": f"wc -l {name}", "description": "Count a file's lines"}
                calls.append({"name": "run_shell_command", "args": command})
        return calls

    def report(self) -> Json:
        out = super().report()
        out["problems"] += self.wire.problems
        return out

    async def answer(self, seen: Received) -> Response:
        model, _, method = seen.path.rpartition("/")[2].partition(":")
        if seen.method != "POST" or method not in (*MODEL_CALLS, "countTokens"):
            seen.answer = "status:404"
            return to_response(error(404, "NOT_FOUND", f"Not found: {seen.path}"), False)
        query = dict(p.split("=", 1) for p in seen.query.split("&") if "=" in p)
        refused = self.wire.refuse(seen.headers, query, seen.body)
        if refused is not None:
            seen.answer = f"status:{refused.status}"
            if refused.status == 400 and "thought_signature" in dumps(refused.body):
                self.problem(f"refused with Gemini's 400: {refused.body}")
            return to_response(refused, False)
        if method == "countTokens":
            seen.answer = "count"
            return to_response(Answer(200, {"totalTokens": seen.tokens}), False)
        seen.kind = self._kind(seen.body)
        events = query.get("alt") == "sse"
        return to_response(self._model(seen, model, method != "generateContent"), events)

    def _model(self, seen: Received, model: str, stream: bool) -> Answer:
        window = int(self.options["window"])
        with self.lock:
            self.n += 1
            n = self.n
            if seen.tokens > window:
                seen.answer = "error:overflow"
                return overflow(seen.tokens, window)
            scripted = seen.kind == "main" and self.step == self.options.get("overflow_at", -1)
            if scripted and not self.overflowed:
                self.overflowed = True
                seen.answer = "error:overflow-scripted"
                return overflow(max(seen.tokens, window + 1), window)
            call = self._next_call(seen.kind)
        thought = {"text": f"Step {n}: deciding what to do next.", "thought": True}
        if call is not None:
            seen.answer = f"tool:{call['name']}"
            part = {"functionCall": call, "thoughtSignature": self.wire.sign(call, n)}
        else:
            seen.answer = "text"
            part = {"text": self._text(seen)}
        return self.wire.answer([thought, part], seen.tokens, stream, model)

    def _next_call(self, kind: str) -> Json | None:
        if kind != "main":
            return None
        call = self.plan[self.step] if self.step < len(self.plan) else None
        self.step += 1
        return call

    def _text(self, seen: Received) -> str:
        """The main loop's final text; a side request's JSON when it asks for JSON."""
        config = seen.body.get("generationConfig") or {}
        schema = config.get("responseJsonSchema") or config.get("responseSchema")
        if seen.kind == "main" or config.get("responseMimeType") != "application/json":
            return FINAL_TEXT if seen.kind == "main" else "A summary of the session so far."
        properties = schema.get("properties") if isinstance(schema, dict) else None
        answer = example_arguments(schema)
        for name in properties or {}:
            if name in SIDE_ANSWERS:
                answer[name] = SIDE_ANSWERS[name]
        if "next_speaker" in answer:
            with self.lock:  # the model once (the agent asks it to go on), then the user
                self.checks += 1
                answer["next_speaker"] = "model" if self.checks == 1 else "user"
        return dumps(answer)

    def _kind(self, body: Json) -> str:
        """The main loop's system instruction (ctxc rewrites contents, not the system): the
        first with the task and tools."""
        fingerprint = dumps(body.get("systemInstruction"))
        with self.lock:
            if self.main_system is None and self._opens_task(body):
                self.main_system = fingerprint
            return "main" if fingerprint == self.main_system and body.get("tools") else "side"

    def _opens_task(self, body: Json) -> bool:
        users = [c for c in body.get("contents") or [] if c.get("role") == "user"]
        return bool(body.get("tools")) and bool(users) and self.options["task"] in dumps(users[0])
