"""Helpers of the database fault tests: a client loop that tallies every answer under a fault."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

import httpx

UNAVAILABLE = "urn:ctxc:problem:database-unavailable"
MESSAGE = {"role": "user", "content": "keep going"}


@dataclass
class Tally:
    """Every answer the loop got: how many, which were wrong, when the last success started."""

    tried: int = 0
    ok: int = 0
    unavailable: int = 0
    other: dict[int, int] = field(default_factory=dict)  # 404s (sessions lost with the database)
    wrong: list[str] = field(default_factory=list)  # 5xx but 503, 503 without Retry-After, ...
    notes: list[str] = field(default_factory=list)  # the allowed 4xx, to show them
    successes: list[float] = field(default_factory=list)  # start times of 2xx answers
    lock: threading.Lock = field(default_factory=threading.Lock)

    def record(self, started: float, response: httpx.Response) -> None:
        with self.lock:
            self.tried += 1
            status = response.status_code
            if 200 <= status < 300:
                self.ok += 1
                self.successes.append(started)
            elif status == 503:
                problem = unavailable_problem(response)
                if problem is None:
                    self.unavailable += 1
                else:
                    self.wrong.append(problem)
            elif status == 404:  # a session made before the database was lost
                self.other[status] = self.other.get(status, 0) + 1
                self.notes.append(f"{status} {response.request.url.path} {response.text[:200]}")
            else:
                self.wrong.append(f"{status} {response.text[:200]}")

    def failed(self, error: Exception) -> None:
        with self.lock:
            self.tried += 1
            self.wrong.append(f"no answer: {error!r}")

    def first_success_after(self, moment: float) -> float | None:
        with self.lock:
            later = [t for t in self.successes if t >= moment]
        return min(later) if later else None

    def summary(self) -> str:
        return (
            f"tried={self.tried} ok={self.ok} 503={self.unavailable} other={self.other} "
            f"wrong={len(self.wrong)}"
        )


def unavailable_problem(response: httpx.Response) -> str | None:
    """None when ``response`` is the database-unavailable problem with a Retry-After, else
    what is wrong with it."""
    retry_after = response.headers.get("retry-after", "")
    if not retry_after.isdigit() or int(retry_after) < 1:
        return f"503 without a Retry-After: {response.headers} {response.text[:200]}"
    if response.headers.get("content-type") != "application/problem+json":
        return f"503 not a problem: {response.text[:200]}"
    if response.json().get("type") != UNAVAILABLE:
        return f"503 of another type: {response.text[:200]}"
    return None


def loop(url: str, key: str, stop: threading.Event, tally: Tally) -> None:
    """Until ``stop``: create a session, append to it, compile it; tally every answer."""
    headers = {"Authorization": f"Bearer {key}"}
    with httpx.Client(base_url=url, headers=headers, timeout=30) as client:

        def call(path: str, body: object) -> httpx.Response | None:
            started = time.monotonic()
            try:
                response = client.post(path, json=body)
            except httpx.HTTPError as exc:
                tally.failed(exc)
                return None
            tally.record(started, response)
            return response

        while not stop.is_set():
            created = call("/v1/sessions", {})
            if created is None or created.status_code != 201:
                time.sleep(0.01)
                continue
            sid = created.json()["id"]
            for _ in range(3):
                appended = call(f"/v1/sessions/{sid}/messages", {"messages": [MESSAGE]})
                if appended is not None and appended.status_code == 201:
                    call(f"/v1/sessions/{sid}/compile", {})


class Load:
    """``workers`` client loops in threads for the block."""

    def __init__(self, url: str, key: str, workers: int = 4) -> None:
        self.stop = threading.Event()
        self.tally = Tally()
        self.threads = [
            threading.Thread(target=loop, args=(url, key, self.stop, self.tally), daemon=True)
            for _ in range(workers)
        ]

    def __enter__(self) -> Load:
        for thread in self.threads:
            thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.stop.set()
        for thread in self.threads:
            thread.join(timeout=60)


def wait_for_success(tally: Tally, since: float, limit_s: float) -> float:
    """Seconds from ``since`` to the start of the first 2xx answer after it."""
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        first = tally.first_success_after(since)
        if first is not None:
            return first - since
        time.sleep(0.05)
    raise AssertionError(f"no success within {limit_s} s: {tally.summary()}")
