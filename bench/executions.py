"""Compiles of a session by an execution and with none, in turns, against compiles with none.

`python -m bench.executions` (`--quick`, or `CTXC_BENCH_QUICK=1`: 3,000 messages). One
`ctxc serve` on SQLite, one session of 12,000 messages whose older part holds trace messages of
execution `e1` (every tenth turn): a compile for `e1` sees that part one way, one with no
execution another, and each keeps a digest of its own. Timed: rounds of one appended turn and two
compiles, for `e1` and then with none; and on the same session in the same run, the peer: rounds
of one appended turn and a compile with no execution alone. Printed: the medians and their ratio
to the peer's (target: within 1.5x; when the two replaced each other's digest, every compile read
the whole history).
"""

from __future__ import annotations

import statistics
import sys
import time
from typing import Any

import httpx

from bench.common import database, metric, quick_run, served, verdict

SIZE = 12_000
QUICK_SIZE = 3_000
ROUNDS = 20
JOBS = "ctxc_digest_jobs"


def turn(n: int) -> list[dict[str, Any]]:
    """A prompt and a tool round answering it, the call a trace of `e1` every tenth turn."""
    call = f"call_{n}"
    trace = {"metadata": {"is_trace": True, "execution_id": "e1"}} if n % 10 == 3 else {}
    function = {"name": "read", "arguments": f'{{"path": "module_{n}.py"}}'}
    return [
        {"role": "user", "content": f"step {n}: look at module_{n}.py and report what it does"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": call, "type": "function", "function": function}],
        }
        | trace,
        {"role": "tool", "tool_call_id": call, "content": f"def handler_{n}(): " + "x = 1; " * 20}
        | trace,
    ]


def idle(client: httpx.Client) -> None:
    """Once no digest job runs."""
    while metric(client, JOBS) > 0:
        time.sleep(0.05)


def compiled(client: httpx.Client, sid: str, execution: str | None) -> float:
    body = {"execution_id": execution} if execution else {}
    began = time.perf_counter()
    client.post(f"/v1/sessions/{sid}/compile", json=body).raise_for_status()
    return time.perf_counter() - began


def rounds(
    client: httpx.Client, sid: str, first: int, executions: tuple[str | None, ...]
) -> dict[str | None, list[float]]:
    """Per execution, the times of its compiles over ``ROUNDS`` rounds of one appended turn."""
    times: dict[str | None, list[float]] = {e: [] for e in executions}
    for n in range(first, first + ROUNDS):
        client.post(f"/v1/sessions/{sid}/messages", json={"messages": turn(n)}).raise_for_status()
        for execution in executions:
            times[execution].append(compiled(client, sid, execution))
    return times


def run(quick: bool | None = None) -> None:
    size = QUICK_SIZE if quick_run(quick) else SIZE
    print(f"executions: compiles for e1 and with none in turns, {size:,} messages (SQLite)")
    with database("sqlite") as url, served(url) as (client, _):
        sid = client.post("/v1/sessions", json={"provider": "gpt-4o"}).json()["id"]
        messages = [m for n in range(size // 3) for m in turn(n)]
        for start in range(0, len(messages), 1_000):
            batch = {"messages": messages[start : start + 1_000]}
            client.post(f"/v1/sessions/{sid}/messages", json=batch).raise_for_status()
        for execution in ("e1", None):  # each one's digest made
            compiled(client, sid, execution)
            idle(client)
        alone = rounds(client, sid, size // 3, (None,))[None]
        turns = rounds(client, sid, size // 3 + ROUNDS, ("e1", None))
    peer = statistics.median(alone)
    print(f"  no execution alone: median {peer * 1000:7.1f} ms over {ROUNDS} turns")
    for execution, times in turns.items():
        ratio = statistics.median(times) / peer
        print(
            f"  in turns, {execution or 'no execution':>12}: median"
            f" {statistics.median(times) * 1000:7.1f} ms, max {max(times) * 1000:7.1f} ms"
            f" -> {ratio:4.2f}x ({verdict(ratio <= 1.5)}: <= 1.5x)"
        )


if __name__ == "__main__":
    run(True if "--quick" in sys.argv else None)
