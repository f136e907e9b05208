"""Redaction on hostile text: RE2 in metered windows against a plain scan, and against `re`.

1. Every built-in pattern over 256 KB texts made to be hard (near-misses repeated, dense real
   matches), against a floor measured in the same run: one `bytes.count` pass over the text per
   pattern (what any pattern must at least read). Also the metered work, in bytes per byte.
2. Growth: the old backtracking `connection_password` (`re`) against the RE2 one on `a.a.a.…` of
   8, 16 and 32 KB: time ratio to the 8 KB run (quadratic quadruples per doubling).
3. Hostile tenant patterns over 256 KB: how long until they finish or are refused.
4. A whole compile's redaction (built-ins and 32 tenant patterns sharing one budget, 5 s
   deadline) over 1 MB made to be hard: how long until it finishes or is refused.
"""

from __future__ import annotations

import re
import statistics
import time
from collections.abc import Callable

from app.domain.compilers.patterns import (
    Budget,
    Meter,
    TooCostly,
    alone,
    builtins,
    custom,
    secrets,
)

SIZE = 256 * 1024
OLD_PASSWORD = r"\b[A-Za-z][A-Za-z0-9+.-]*://[^\s:/@]*:(?P<secret>[^\s@/]+)@"


def fill(unit: str, size: int = SIZE) -> bytes:
    return (unit * (size // len(unit) + 1))[:size].encode()


TEXTS = {
    "a.a.a. (issue 19)": fill("a."),
    "a://:x@ (dense passwords)": fill("a://:x@"),
    "bearer 1, (near-miss tokens)": fill("bearer 1,"),
    "sk- (near-miss keys)": fill("sk-"),
    "BEGIN headers, no END": fill("-----BEGIN PRIVATE KEY-----"),
    "prose": fill("The agent read the file and ran the tests again. "),
}


def best(run: Callable[[], object], repeat: int = 5) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return min(times)


def redact_all(data: bytes) -> int:
    work = 0
    for pattern in builtins():
        meter = alone(pattern, data)
        for _ in secrets(pattern, data, meter):
            pass
        work += meter.budget.spent
    return work


def builtin_figures() -> None:
    patterns = len(builtins())
    print(f"every built-in pattern ({patterns}) over 256 KB, against {patterns} bytes.count passes")
    for name, data in TEXTS.items():
        floor = best(lambda d=data: [d.count(b"\x00") for _ in range(patterns)])
        took = best(lambda d=data: redact_all(d))
        work = redact_all(data) / len(data) / patterns
        print(
            f"  {name:30} {took * 1000:8.2f} ms  {took / floor:8.0f}x the floor"
            f"  ({floor * 1000:.3f} ms)  work {work:5.2f} bytes/byte/pattern"
        )


def growth() -> None:
    print("growth on a.a.a.…: time at 16 and 32 KB over the time at 8 KB (2x, 4x is linear)")
    old = re.compile(OLD_PASSWORD)
    new = next(p for p in builtins() if p.name == "connection_password")
    sizes = (8192, 16384, 32768)
    old_times = [best(lambda n=n: old.findall(fill("a.", n).decode()), 1) for n in sizes]
    new_times = [
        best(lambda n=n: list(secrets(new, fill("a.", n), alone(new, fill("a.", n)))))
        for n in sizes
    ]
    for label, times in (("re (before)", old_times), ("RE2, metered", new_times)):
        ratios = "  ".join(f"{t / times[0]:6.1f}x" for t in times[1:])
        print(f"  {label:14} 8 KB {times[0] * 1000:9.2f} ms   16, 32 KB: {ratios}")


def tenant_figures() -> None:
    print("hostile tenant patterns over 256 KB, alone (finish, or refused at 68 bytes/byte)")
    cases = [
        ("(a+)+$", fill("a") + b"!"),
        ("a*b|a", fill("a")),
        ("(?s).*x|y", fill("y")),
        ("a", fill("ab")),
    ]
    for text, data in cases:
        pattern = custom(text, 0)
        times, outcome = [], ""
        for _ in range(3):
            start = time.perf_counter()
            try:
                outcome = f"{len(list(secrets(pattern, data, alone(pattern, data)))):,} found"
            except TooCostly:
                outcome = "refused"
            times.append(time.perf_counter() - start)
        print(f"  {text:12} {statistics.median(times) * 1000:8.2f} ms  {outcome}")


def compile_figures() -> None:
    print("a whole compile's redaction over 1 MB: built-ins and tenant patterns, one budget")
    cases = [("bearer 1 ", []), ("a://:x@", []), ("xxxxxxxa", ["a"]), ("xxxxxxxa", ["a"] * 32)]
    for unit, texts in cases:
        data = fill(unit, 1 << 20)
        patterns = [*builtins(), *(custom(t, n) for n, t in enumerate(texts))]
        budget = Budget(patterns)
        budget.text(len(data))
        start, outcome = time.perf_counter(), "finished"
        try:
            for pattern in patterns:
                list(secrets(pattern, data, Meter(pattern, budget)))
        except TooCostly as err:
            outcome = "refused: " + str(err).split(" on ")[0].removeprefix("redaction ")[:40]
        took = time.perf_counter() - start
        label = f"{unit!r} + {len(texts)} patterns"
        print(
            f"  {label:28} {took * 1000:9.2f} ms  work {budget.spent / len(data):6.1f}"
            f" bytes/byte  {outcome}"
        )


def run() -> None:
    builtin_figures()
    growth()
    tenant_figures()
    compile_figures()


if __name__ == "__main__":
    run()
