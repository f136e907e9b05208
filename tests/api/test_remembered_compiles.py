"""A session compile remembered (app/services/compiling/remembered.py) is the compile made from
scratch, byte for byte (issue 27, item 1), over HTTP on both databases.

Three servers share one database: two replicas that remember compiles and one that never does.
Generated histories go through random steps, each made through either replica: appends (tool
rounds, duplicate and orphaned call ids, empty turns), changes of the session (system prompt,
window, compiler, metadata, profile), compactions, a fork (an exported copy imported as a new
session), acknowledgements that move the cursor or calibrate the counts, and restarts (a replica
stopped and started, its memory gone). After every step each replica compiles the session with
a request drawn from a set (twice: the second finds what the first kept) and its answers, but
the compile id, equal the fresh server's. Windows are set below the history's tokens, so the
view is trimmed, but above what makes a history long enough for a digest: every compile that is
not remembered reads the whole history (that a tail with its digest compiles as the whole does
is test_tail_compile's subject). The ``LONG`` runs start with a session window that makes the
history long: their appends make and move its digest, and warm the compile with no options in
the replica they went through, which must answer what the fresh server compiles.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest

from app.settings import Settings
from tests.api.test_tail_compile import reads
from tests.conftest import METRICS_TOKEN, LiveServer, make_key, new_session

SEEDS = range(4)
# Seeds run with a session window that makes the history long enough for a digest.
LONG = [(10, 1_000), (11, 1_500)]
STEPS = 24
SMALL = -1  # a window set below the history's tokens (``_window``)
BODIES: list[dict[str, Any]] = [
    {},
    {"context_window": SMALL},
    {"provider": "anthropic"},
    {"provider": "openai-responses", "context_window": SMALL},
    {"provider": "gemini"},
    {"provider": "codex-cli"},
    {"fragments": [{"name": "now", "text": "The build is green."}]},
    {"execution_id": "run-2"},
    {"tools": [{"type": "function", "function": {"name": "grep", "parameters": {}}}]},
    {"compiler": {"base": "all_sections", "decorators": [{"name": "token_limit"}]}},
]


class Replica:
    """One server on the shared database: stopped and started again (a restart) at will."""

    def __init__(self, database_url: str, remember: bool) -> None:
        self.settings = Settings(
            database_url=database_url,
            auth="keys",
            metrics_token=METRICS_TOKEN,
            view_cache_bytes=64 * 1024 * 1024 if remember else 0,
        )
        self.server: LiveServer | None = None
        self.start()

    def start(self) -> None:
        self.server = LiveServer(self.settings)
        self.server.__enter__()

    def stop(self) -> None:
        assert self.server is not None
        self.server.__exit__(None, None, None)

    def client(self, key: str) -> httpx.Client:
        assert self.server is not None
        headers = {"Authorization": f"Bearer {key}"}
        return httpx.Client(base_url=self.server.url, headers=headers, timeout=60)


@dataclass
class Servers:
    replicas: tuple[Replica, Replica]
    fresh: Replica
    key: str


@pytest.fixture(scope="module")
def servers(database_url: str) -> Iterator[Servers]:
    key = make_key(database_url, f"remembered-{uuid.uuid4().hex[:6]}")
    made = [Replica(database_url, remember) for remember in (True, True, False)]
    try:
        yield Servers((made[0], made[1]), made[2], key)
    finally:
        for replica in made:
            replica.stop()


@dataclass
class Run:
    """One generated history: the session it is in, and the calls made of it."""

    servers: Servers
    rng: random.Random
    sid: str
    turns: int = 0
    last: dict[str, Any] = field(default_factory=dict)  # the last compile answer, by replica 0

    def via(self) -> httpx.Client:
        return self.servers.replicas[self.rng.randrange(2)].client(self.servers.key)


def _turn(rng: random.Random, n: int) -> list[dict[str, Any]]:
    """A user message and a tool round, now and then with a reused, orphaned or missing id."""
    cid = rng.choice([f"call_{n}", "call_1", ""]) if rng.random() < 0.2 else f"call_{n}"
    out = "ok " * rng.randrange(5, 400)
    call = {"id": cid, "type": "function", "function": {"name": "run", "arguments": "{}"}}
    turn: list[dict[str, Any]] = [
        {"role": "user", "content": f"step {n}: run the check on module_{n}"},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": cid, "content": f"module_{n}: {out}"},
    ]
    if rng.random() < 0.15:
        turn.append({"role": "tool", "tool_call_id": f"stray_{n}", "content": "late"})
    turn.append({"role": "assistant", "content": rng.choice(["", f"module_{n} passes."])})
    return turn


def _append(run: Run) -> None:
    batch = [m for _ in range(run.rng.randrange(1, 6)) for m in _turn(run.rng, run.turns + 1)]
    run.turns += 1
    with run.via() as c:
        answer = c.post(f"/v1/sessions/{run.sid}/messages", json={"messages": batch})
        assert answer.status_code == 201, answer.text


def _patch(run: Run) -> None:
    change: dict[str, Any] = run.rng.choice(
        [
            {"system_prompt": [{"name": "role", "text": f"You are agent {run.turns}."}]},
            {"context_window": run.rng.choice([SMALL, 128_000])},
            {"compiler": {"decorators": ["compact_tool_results", "token_limit"]}},
            {"compiler": None},
            {"metadata": {"team": run.rng.choice(["a", "b"])}},
            {"provider": run.rng.choice(["openai", "anthropic", "claude-code"])},
        ]
    )
    with run.via() as c:
        answer = c.patch(f"/v1/sessions/{run.sid}", json=_windowed(run, change))
        assert answer.status_code == 200, answer.text


def _windowed(run: Run, body: dict[str, Any]) -> dict[str, Any]:
    """``body`` with a ``SMALL`` window made 80% of the history's tokens: trimmed, and short of
    the 1.65 windows that make a history long enough for a digest."""
    if body.get("context_window") != SMALL:
        return body
    with run.via() as c:
        tokens = c.get(f"/v1/sessions/{run.sid}").json()["tokens"]
    return body | {"context_window": max(1_000, tokens * 4 // 5)}


def _compact(run: Run) -> None:
    kind = run.rng.choice(["micro", "full", "tool_payloads"])
    body: dict[str, Any] = {"kind": kind}
    if kind == "tool_payloads":
        body["steps"] = ["compact_tool_results"]
    with run.via() as c:
        answer = c.post(f"/v1/sessions/{run.sid}/compact", json=body)
        assert answer.status_code in (200, 201, 409), answer.text


def _fork(run: Run) -> None:
    with run.via() as c:
        exported = c.get(f"/v1/sessions/{run.sid}/export").json()
        exported["session"]["id"] = f"fork-{uuid.uuid4().hex}"
        exported["compiles"] = []  # ids import once per database: a fork starts without them
        for compaction in exported["compactions"]:
            compaction["id"] = str(uuid.uuid4())
        imported = c.post("/v1/sessions/import", json=exported)
        assert imported.status_code == 201, imported.text
    run.sid = exported["session"]["id"]


def _acknowledge(run: Run) -> None:
    """Acknowledge the last compile: a provider session (the cursor moves), or usage (a
    calibration of the counts)."""
    if not run.last:
        return
    body: dict[str, Any] = {"compile_id": run.last["compile_id"]}
    if run.rng.random() < 0.5:
        body["provider_session_id"] = "thread-1"
    else:
        total = run.last["tokens"]["total"]
        body["usage"] = {"prompt_tokens": int(total * run.rng.uniform(1.05, 1.3)) + 3}
    with run.via() as c:
        answer = c.post(f"/v1/sessions/{run.sid}/cursor", json=body)
        assert answer.status_code in (200, 404), answer.text  # a compile pruned since: 404


def _reset(run: Run) -> None:
    with run.via() as c:
        assert c.delete(f"/v1/sessions/{run.sid}/cursor").status_code == 200


def _restart(run: Run) -> None:
    replica = run.servers.replicas[run.rng.randrange(2)]
    replica.stop()
    replica.start()


STEPS_BY_WEIGHT: list[tuple[Callable[[Run], None], int]] = [
    (_append, 8),
    (_patch, 3),
    (_compact, 2),
    (_fork, 1),
    (_acknowledge, 3),
    (_reset, 1),
    (_restart, 1),
]


def _compile(client: httpx.Client, sid: str, body: dict[str, Any]) -> dict[str, Any]:
    """The answer (or the problem: 422 when there is nothing to send), whole."""
    answer = client.post(f"/v1/sessions/{sid}/compile", json=body)
    assert answer.status_code in (200, 422), answer.text
    out: dict[str, Any] = answer.json()
    return out


def _compiled(client: httpx.Client, sid: str, body: dict[str, Any]) -> dict[str, Any]:
    """The answer but what names the compile (its id, or the problem's instance)."""
    out = _compile(client, sid, body)
    out.pop("compile_id", None)
    out.pop("instance", None)
    return out


def _check(run: Run) -> None:
    """Every replica, twice, answers what the server that remembers nothing answers."""
    body = _windowed(run, run.rng.choice(BODIES))
    with run.servers.fresh.client(run.servers.key) as c:
        expected = _compiled(c, run.sid, body)
    for n, replica in enumerate(run.servers.replicas):
        with replica.client(run.servers.key) as c:
            for _ in range(2):
                got = _compile(c, run.sid, body)
                if n == 0 and "compile_id" in got:
                    run.last = dict(got)
                got.pop("compile_id", None)
                got.pop("instance", None)
                differing = sorted(k for k in {*got, *expected} if got.get(k) != expected.get(k))
                assert got == expected, (n, body, differing)


@pytest.mark.parametrize(("seed", "window"), [*((s, None) for s in SEEDS), *LONG])
def test_a_remembered_compile_is_the_compile_made_from_scratch(
    servers: Servers, seed: int, window: int | None
) -> None:
    """With a ``window``, the session is long in it from its first turns: appends make and move
    its digest, and the one that moved it warms the compile with no options in the replica it
    went through (app/services/compiling/warming.py)."""
    rng = random.Random(seed)
    with servers.replicas[0].client(servers.key) as c:
        sid = new_session(c, **({"context_window": window} if window else {}))
    run = Run(servers, rng, sid)
    _append(run)
    steps, weights = zip(*STEPS_BY_WEIGHT, strict=True)
    for _ in range(STEPS):
        rng.choices(steps, weights)[0](run)
        _check(run)


def test_a_repeated_compile_is_remembered_and_a_new_turn_is_not(servers: Servers) -> None:
    """The second of two equal compiles reads nothing; an append makes the next one read."""
    replica = servers.replicas[0]
    with replica.client(servers.key) as c:
        sid = new_session(c)
        c.post(f"/v1/sessions/{sid}/messages", json={"messages": _turn(random.Random(0), 1)})
        before = reads(c)
        first, second = _compiled(c, sid, {}), _compiled(c, sid, {})
        assert first == second
        c.post(f"/v1/sessions/{sid}/messages", json={"messages": _turn(random.Random(1), 2)})
        third = _compiled(c, sid, {})
        after = reads(c)
    assert third != first
    assert after.get("remembered", 0) - before.get("remembered", 0) == 1
    # The first read the history whole; the third, after the append, what that kept and the rest.
    assert after.get("whole", 0) - before.get("whole", 0) == 1
    assert after.get("kept_whole", 0) - before.get("kept_whole", 0) == 1


def test_one_tenant_never_gets_what_another_compiled(servers: Servers, database_url: str) -> None:
    """Two tenants' sessions of the same id and history each get their own answer: the key
    starts with the tenant and the session, so none finds another's."""
    other = make_key(database_url, f"remembered-b-{uuid.uuid4().hex[:6]}")
    sid = f"same-{uuid.uuid4().hex}"
    answers = []
    for key, text in ((servers.key, "tenant a's secret"), (other, "tenant b's secret")):
        with servers.replicas[0].client(key) as c:
            new_session(c, id=sid)
            message = {"role": "user", "content": text}
            c.post(f"/v1/sessions/{sid}/messages", json={"messages": [message]})
            answers.append(_compiled(c, sid, {}))
    assert answers[0]["messages"][-1]["content"] == "tenant a's secret"
    assert answers[1]["messages"][-1]["content"] == "tenant b's secret"
