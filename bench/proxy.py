"""The sidecar proxy's added latency against calling the upstream directly, at 200 and 10,000
stored messages, non-streaming and streaming, with a session compile of the same session beside;
the Responses endpoint (`/openai/v1/responses`, the agent as Codex CLI) and the Gemini one
(`/gemini/v1beta/models/...:generateContent`, the agent as Gemini CLI, against the local Gemini
stand-in tests/upstream_gemini.py) at 200.

`python -m bench.proxy` (`--quick`, or `CTXC_BENCH_QUICK=1`: fewer turns). On Postgres and on
SQLite, one `ctxc serve` each, its `CTXC_OPENAI_UPSTREAM` at a local upstream (tests/upstreams.py)
served from this process. The agent is plain httpx on a kept-alive connection, as an OpenAI SDK
pointed at `/openai/v1` with `X-Ctxc-Session` would send: a first request whose history is the
whole session (`bench.append.agent_batch` turns, then a user prompt) builds it through the proxy;
then each turn appends the reply it got and a new user prompt and resends the whole history.

Each measured turn is two agent turns and their floors, timed by the client (request bodies made
before the clock starts):

- non-streaming: the whole answer through ctxc (proxy), then the very request ctxc forwarded (as
  the upstream recorded it) sent straight to the upstream (direct); added = proxy - direct;
- streaming: the same, to the first body byte (TTFB) and to the end; ctxc stores a streamed turn
  after the stream ended, so the next turn waits for it (untimed) as an agent's next turn would;
- compile: `POST /v1/sessions/{id}/compile` for the same model and window, the peer of the
  proxy's own compile (the target: added p50 at most twice a compile's p50).

At 10,000 messages (17 MB resent a turn) the policy the sidecar gives its sessions (compaction
at 80% of the window) summarises the history at the first request: the compiled request and the
compile are small from then on, while the agent still resends everything (what ctxc forwards and
the tokens it counted are printed). The first turns of each size are warm-up and not counted.
Targets (issue 13): added p50 within 2x a session compile's p50, and TTFB added p50 within 10 ms
at 200 messages; issue 27: TTFB added p50 within 10 ms at every size beyond receiving and hashing
the agent's body, which ctxc says it took (its ``Server-Timing`` phases ``read`` and ``hash``,
docs/sidecar.md): the turn's added TTFB less those two, turn by turn. The phases' medians are
printed beside it.
"""

from __future__ import annotations

import os
import random
import statistics
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import httpx
import orjson

from app.domain.formats.convert import parse_messages
from app.domain.formats.gemini import to_gemini
from app.domain.formats.responses import to_responses
from app.domain.wire import ReplyStream, reply_of
from bench.append import agent_batch
from bench.common import _ctxc, database, percentile, quick_run, serving, verdict
from tests.upstream_gemini import GeminiUpstream, GeminiWire
from tests.upstreams import Upstream

SIZES = {200: 30, 10_000: 15}  # stored messages: measured turns
QUICK_SIZES = {200: 10, 10_000: 4}
WARMUP = 3  # turns of each size before the measured ones
MODEL = "gpt-4o"
GEMINI_MODEL = "gemini-2.5-flash"
WINDOW = 128_000
UPSTREAM_KEY = "sk-bench-upstream"
SETTLE_S = 30.0  # the longest wait for a streamed turn to be stored
JSON = {"Content-Type": "application/json"}
PROMPTS = "now run the tests again and fix what still fails in the parser module".split()  # noqa: SIM905


@dataclass(frozen=True)
class Timed:
    """One request's client times, in seconds: to the first body byte and to the end; and the
    phases ctxc said it spent (its ``Server-Timing``, milliseconds; none from the upstream)."""

    first: float
    total: float
    phases: dict[str, float]


@dataclass
class Turns:
    """The samples of one size on one database, in seconds."""

    kind: str
    size: int
    proxy: list[float]
    direct: list[float]
    compile: list[float]
    proxy_first: list[float]
    direct_first: list[float]
    proxy_stream: list[float]
    direct_stream: list[float]
    tokens: list[int]  # of the compiled request ctxc forwarded (its x-ctxc-tokens)
    phases: list[dict[str, float]]  # of the streamed turns through ctxc (its Server-Timing)


class Agent:
    """An agent behind the sidecar: its history, resent whole on every turn (Chat Completions;
    bench/proxy_responses.py: Responses)."""

    PATH = "/chat/completions"
    STREAM_PATH = PATH  # the body says it streams

    def __init__(self, base: str, key: str, session: str, history: list[dict[str, Any]]) -> None:
        headers = {
            "Authorization": f"Bearer {UPSTREAM_KEY}",
            "X-Ctxc-Api-Key": key,
            "X-Ctxc-Session": session,
            "X-Ctxc-Context-Window": str(WINDOW),
        }
        self.http = httpx.Client(base_url=f"{base}/openai/v1", headers=headers, timeout=600)
        self.history = history
        self.rng = random.Random(len(history))
        self.tokens = 0  # the last forwarded request's, as ctxc counted them

    def body(self, stream: bool) -> bytes:
        """The next request: the history so far and a new user prompt."""
        if self.history[-1]["role"] != "user":
            prompt = " ".join(self.rng.choices(PROMPTS, k=self.rng.randint(5, 40)))
            self.history.append({"role": "user", "content": prompt})
        return orjson.dumps({"model": MODEL, "messages": self.history, "stream": stream})

    def turn(self) -> float:
        body = self.body(stream=False)
        start = time.perf_counter()
        answer = self.http.post(self.PATH, content=body, headers=JSON)
        took = time.perf_counter() - start
        answer.raise_for_status()
        self.tokens = int(answer.headers["x-ctxc-tokens"])
        self.history += self.reply(answer.json())
        return took

    def reply(self, answer: Any) -> list[dict[str, Any]]:
        """What the agent appends to its history of a whole answer."""
        return [answer["choices"][0]["message"]]

    def streamed_turn(self) -> Timed:
        timed, data = stream(self.http, self.STREAM_PATH, self.body(stream=True))
        self.history += self.streamed_reply(data)
        return timed

    def streamed_reply(self, data: bytes) -> list[dict[str, Any]]:
        """What the agent appends to its history of a streamed answer."""
        return [{"role": "assistant", "content": streamed_text(data)}]

    def close(self) -> None:
        self.http.close()


class ResponsesAgent(Agent):
    """The same agent on the Responses API, as Codex CLI sends it: the whole ``input`` each
    turn (``store: false``), the output items it got appended."""

    PATH = "/responses"
    STREAM_PATH = PATH

    def __init__(self, base: str, key: str, session: str, history: list[dict[str, Any]]) -> None:
        _, items = to_responses(parse_messages("openai", history))
        super().__init__(base, key, session, items)

    def body(self, stream: bool) -> bytes:
        if self.history[-1].get("role") != "user":
            prompt = " ".join(self.rng.choices(PROMPTS, k=self.rng.randint(5, 40)))
            self.history.append({"role": "user", "content": prompt})
        return orjson.dumps(
            {
                "model": MODEL,
                "input": self.history,
                "stream": stream,
                "store": False,
                "prompt_cache_key": "bench",
            }
        )

    def reply(self, answer: Any) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = answer["output"]
        return items

    def streamed_reply(self, data: bytes) -> list[dict[str, Any]]:
        events = (
            orjson.loads(line[6:]) for line in data.splitlines() if line.startswith(b"data: ")
        )
        return [e["item"] for e in events if e["type"] == "response.output_item.done"]


class GeminiAgent(Agent):
    """The same agent on the Gemini API, as Gemini CLI sends it: the whole ``contents`` each
    turn, the model's content it got appended (its streamed pieces joined, as the CLI does)."""

    PATH = f"/v1beta/models/{GEMINI_MODEL}:generateContent"
    STREAM_PATH = f"/v1beta/models/{GEMINI_MODEL}:streamGenerateContent?alt=sse"
    WIRE: GeminiWire | None = None  # the stand-in's, which signs the history's calls

    def __init__(self, base: str, key: str, session: str, history: list[dict[str, Any]]) -> None:
        _, contents = to_gemini(parse_messages("openai", history))
        super().__init__(base, key, session, self.signed(contents))
        self.http.headers.pop("Authorization")
        self.http.headers["x-goog-api-key"] = UPSTREAM_KEY
        self.http.base_url = httpx.URL(f"{base}/gemini")

    @classmethod
    def signed(cls, contents: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """``contents`` with each function call signed, as the model gave them (Gemini 3
        refuses a call sent back without its signature)."""
        assert cls.WIRE is not None, "GeminiAgent.of(stand-in) binds the stand-in"
        for n, part in enumerate(p for c in contents for p in c.get("parts", [])):
            if "functionCall" in part:  # signed as the model gives it: without a client's id
                call = {k: v for k, v in part["functionCall"].items() if k != "id"}
                part["thoughtSignature"] = cls.WIRE.sign(call, n)
        return contents

    @classmethod
    def of(cls, gemini: GeminiUpstream) -> type[GeminiAgent]:
        """The agent of the Gemini stand-in ``gemini``."""
        return type(cls.__name__, (cls,), {"WIRE": gemini.wire})

    def body(self, stream: bool) -> bytes:
        if self.history[-1].get("role") != "user":
            prompt = " ".join(self.rng.choices(PROMPTS, k=self.rng.randint(5, 40)))
            self.history.append({"role": "user", "parts": [{"text": prompt}]})
        return orjson.dumps({"contents": self.history})

    def reply(self, answer: Any) -> list[dict[str, Any]]:
        return [reply_of("gemini", answer).message]

    def streamed_reply(self, data: bytes) -> list[dict[str, Any]]:
        reader = ReplyStream("gemini")
        reader.feed(data)
        reply = reader.reply()
        assert reply is not None, "the stream ended without a complete answer"
        return [reply.message]


def stream(http: httpx.Client, path: str, body: bytes) -> tuple[Timed, bytes]:
    """POST ``body`` and read the streamed answer: its times and its bytes."""
    start = time.perf_counter()
    with http.stream("POST", path, content=body, headers=JSON) as answer:
        answer.raise_for_status()
        chunks = answer.iter_raw()
        first_chunk = next(chunks)
        first = time.perf_counter() - start
        data = first_chunk + b"".join(chunks)
        phases = server_timing(answer.headers.get("server-timing", ""))
    return Timed(first, time.perf_counter() - start, phases), data


def server_timing(header: str) -> dict[str, float]:
    """ctxc's phases in a ``Server-Timing`` header, in milliseconds (its entries come first;
    the upstream's own, after them, are left out)."""
    phases: dict[str, float] = {}
    for entry in filter(None, header.split(", ")):
        name, _, duration = entry.partition(";dur=")
        if not duration.replace(".", "", 1).isdigit():
            break  # the upstream's
        phases.setdefault(name, float(duration))
    return phases


def streamed_text(data: bytes) -> str:
    """The assistant's text in a streamed Chat Completions answer."""
    text = []
    for line in data.splitlines():
        if line.startswith(b"data: ") and line != b"data: [DONE]":
            for choice in orjson.loads(line[6:])["choices"]:
                text.append(choice["delta"].get("content") or "")
    return "".join(text)


def transcript(size: int) -> list[dict[str, Any]]:
    """``size`` messages of agent turns, the last a user prompt (the agent's next question)."""
    messages = [m for i in range(0, size, 10) for m in agent_batch(random.Random(i), i)]
    messages = messages[: size - 1]
    return [*messages, {"role": "user", "content": "Carry on with the next failing test."}]


def forwarded(up: Upstream) -> bytes:
    """The request ctxc just forwarded, as the upstream received it."""
    body = orjson.dumps(up.requests[-1].body)
    up.requests.clear()
    return body


def last_seq(ctxc: httpx.Client, session: str) -> int:
    answer = ctxc.get(f"/v1/sessions/{session}")
    answer.raise_for_status()
    seq: int = answer.json()["last_seq"]
    return seq


def settle(ctxc: httpx.Client, session: str, seq: int) -> None:
    """Wait until the session's messages reach ``seq`` (a streamed turn is stored after the
    stream ended, so the agent may already hold the answer)."""
    deadline = time.monotonic() + SETTLE_S
    while last_seq(ctxc, session) < seq:
        if time.monotonic() > deadline:
            raise RuntimeError(f"the streamed turn was not stored within {SETTLE_S:.0f} s")
        time.sleep(0.002)


def compile_time(ctxc: httpx.Client, session: str) -> float:
    body = {"provider": MODEL, "context_window": WINDOW}
    start = time.perf_counter()
    answer = ctxc.post(f"/v1/sessions/{session}/compile", json=body)
    took = time.perf_counter() - start
    answer.raise_for_status()
    return took


def measure_size(
    kind: str,
    base: str,
    key: str,
    ctxc: httpx.Client,
    up: Upstream | GeminiUpstream,
    size: int,
    turns: int,
    agent_type: type[Agent] = Agent,
    direct_base: str | None = None,
) -> Turns:
    """Build a session of ``size`` messages through the proxy, then time ``turns`` turns."""
    session = f"bench-{size}-{time.monotonic_ns()}"
    agent = agent_type(base, key, session, transcript(size))
    direct = httpx.Client(
        base_url=direct_base or up.openai_base,
        timeout=600,
        headers={"Authorization": f"Bearer {UPSTREAM_KEY}", "x-goog-api-key": UPSTREAM_KEY},
    )
    out = Turns(kind, size, [], [], [], [], [], [], [], [], [])
    try:
        began = time.perf_counter()
        agent.turn()
        mb = len(agent.body(stream=False)) / 1e6
        print(
            f"  {kind}: {size:,} messages stored through the proxy in "
            f"{time.perf_counter() - began:.1f} s; the agent resends {mb:.1f} MB a turn, "
            f"ctxc forwards {len(forwarded(up)) / 1e6:.2f} MB",
            flush=True,
        )
        for n in range(WARMUP + turns):
            proxy = agent.turn()
            start = time.perf_counter()
            direct.post(agent.PATH, content=forwarded(up), headers=JSON)
            plain = time.perf_counter() - start
            compiled = compile_time(ctxc, session)
            stored = last_seq(ctxc, session)
            proxy_stream = agent.streamed_turn()
            sent = forwarded(up)
            settle(ctxc, session, stored + 2)  # the new prompt and the reply
            direct_stream, _ = stream(direct, agent.STREAM_PATH, sent)
            if n >= WARMUP:
                out.proxy.append(proxy)
                out.direct.append(plain)
                out.compile.append(compiled)
                out.proxy_first.append(proxy_stream.first)
                out.direct_first.append(direct_stream.first)
                out.proxy_stream.append(proxy_stream.total)
                out.direct_stream.append(direct_stream.total)
                out.tokens.append(agent.tokens)
                out.phases.append(proxy_stream.phases)
    finally:
        agent.close()
        direct.close()
    return out


@contextmanager
def sidecar(
    url: str, up: Upstream, gemini: GeminiUpstream
) -> Iterator[tuple[str, str, httpx.Client]]:
    """``ctxc serve`` on ``url`` forwarding to ``up`` (and Gemini's to ``gemini``): its base URL,
    a key, a keyed client."""
    _ctxc(url, "migrate")
    env = {
        "CTXC_OPENAI_UPSTREAM": up.openai_base,
        "CTXC_GEMINI_UPSTREAM": gemini.url,
        "CTXC_MAX_BODY_BYTES": str(1 << 28),
        "CTXC_UPSTREAM_TIMEOUT_SECONDS": "600",
    }
    with serving(url, env, "bench-proxy") as (base, key, _):
        headers = {"Authorization": f"Bearer {key}"}
        with httpx.Client(base_url=base, headers=headers, timeout=600) as ctxc:
            yield base, key, ctxc


def measure(kind: str, sizes: dict[int, int]) -> list[Turns]:
    """The Chat Completions turns at each size, then the Responses and Gemini ones at the
    smallest."""
    with (
        database(kind) as url,
        Upstream() as up,
        GeminiUpstream(window=WINDOW) as gemini,
        sidecar(url, up, gemini) as (base, key, ctxc),
    ):
        rows = [measure_size(kind, base, key, ctxc, up, size, n) for size, n in sizes.items()]
        size, n = min(sizes.items())
        rows.append(measure_size(f"{kind}/resp", base, key, ctxc, up, size, n, ResponsesAgent))
        gemini_rows = measure_size(
            f"{kind}/gemini", base, key, ctxc, gemini, size, n, GeminiAgent.of(gemini), gemini.url
        )
        rows.append(gemini_rows)
        return rows


def p50(values: list[float]) -> float:
    return statistics.median(values) * 1000


def p90(values: list[float]) -> float:
    return percentile(values, 90) * 1000


def added(proxy: list[float], direct: list[float]) -> list[float]:
    """Per turn: what going through ctxc cost on top of the same request sent directly."""
    return [a - b for a, b in zip(proxy, direct, strict=True)]


def _pair(values: list[float]) -> str:
    return f"{p50(values):7.1f} {p90(values):7.1f}"


def _heads(*names: str) -> str:
    return " | ".join(f"{name:>15s}" for name in names)


def table(rows: list[Turns]) -> None:
    print(f"whole answer, non-streaming ({MODEL}, {WINDOW:,}-token window; ms, p50 and p90)")
    print(
        f"  database        stored  tokens   n | "
        f"{_heads('proxy', 'direct', 'added', 'compile')} | added/compile"
    )
    for r in rows:
        more = added(r.proxy, r.direct)
        tokens = round(statistics.median(r.tokens))
        print(
            f"  {r.kind:13s} {r.size:>8,} {tokens:>7,} {len(r.proxy):3d} | {_pair(r.proxy)} | "
            f"{_pair(r.direct)} | {_pair(more)} | {_pair(r.compile)} | "
            f"{p50(more) / p50(r.compile):12.2f}x"
        )
    print("streaming: to the first body byte (TTFB), and added to the end (ms, p50 and p90)")
    print(
        f"  database        stored   n | "
        f"{_heads('TTFB proxy', 'TTFB direct', 'TTFB added', 'end added')}"
    )
    for r in rows:
        print(
            f"  {r.kind:13s} {r.size:>8,} {len(r.proxy_first):3d} | {_pair(r.proxy_first)} | "
            f"{_pair(r.direct_first)} | {_pair(added(r.proxy_first, r.direct_first))} | "
            f"{_pair(added(r.proxy_stream, r.direct_stream))}"
        )


def targets(rows: list[Turns]) -> None:
    """Issue 13's targets, for every size and database (the TTFB one is set at 200 messages)."""
    for r in rows:
        ratio = p50(added(r.proxy, r.direct)) / p50(r.compile)
        stream_ratio = p50(added(r.proxy_stream, r.direct_stream)) / p50(r.compile)
        first = p50(added(r.proxy_first, r.direct_first))
        print(
            f"  {r.kind:13s} {r.size:>8,}: added p50 / compile p50 {ratio:5.2f}x "
            f"(streamed to the end {stream_ratio:5.2f}x) target <= 2x: {verdict(ratio <= 2)}"
            f" | TTFB added p50 {first:7.1f} ms target <= 10 ms: "
            f"{verdict(first <= 10)}"
        )
        # A turn cannot forward before it compiled: what the proxy adds beyond that compile.
        beyond = first - p50(r.compile)
        print(f"  {'':13s} {'':>8}  TTFB added beyond a session compile's p50: {beyond:6.1f} ms")
        floor = [(p.get("read", 0) + p.get("hash", 0)) / 1000 for p in r.phases]
        past = p50(added(added(r.proxy_first, r.direct_first), floor))
        print(
            f"  {'':13s} {'':>8}  TTFB added beyond receiving and hashing the body "
            f"(issue 27) p50 {past:6.1f} ms target <= 10 ms: {verdict(past <= 10)}"
        )
        said = ", ".join(
            f"{name} {statistics.median(p.get(name, 0) for p in r.phases):.1f}"
            for name in ("read", "hash", "open", "compile", "upstream")
        )
        print(f"  {'':13s} {'':>8}  ctxc's phases (Server-Timing, p50 ms): {said}")


def run(quick: bool | None = None) -> None:
    quick = quick_run(quick)
    sizes = QUICK_SIZES if quick else SIZES
    print(
        f"sidecar proxy against the upstream called directly, at "
        f"{', '.join(f'{s:,}' for s in sizes)} stored messages (load average "
        f"{os.getloadavg()[0]:.1f})"
    )
    rows = [row for kind in ("sqlite", "postgres") for row in measure(kind, sizes)]
    table(rows)
    targets(rows)
    print(f"  (load average at the end {os.getloadavg()[0]:.1f})")


if __name__ == "__main__":
    run(quick="--quick" in sys.argv[1:])
