"""The answer to a database fault: a 503 problem with Retry-After, logged without a flood."""

from __future__ import annotations

import logging
import time

from starlette.types import Scope

log = logging.getLogger("ctxc")

RETRY_AFTER_S = 2  # what a 503 for a database fault asks the client to wait
RETRY_AFTER = (b"retry-after", str(RETRY_AFTER_S).encode())
DATABASE_UNAVAILABLE = {
    "type": "urn:ctxc:problem:database-unavailable",
    "title": "Database unavailable",
    "status": 503,
    "detail": "the database is unavailable or failing over: retry after Retry-After seconds "
    "(an append retried with its Idempotency-Key is never stored twice)",
}
FAULT_LOG_EVERY_S = 10.0


class FaultLog:
    """Database faults are logged as one warning per ``every`` seconds at most (an outage
    would otherwise write a line per request), with how many requests it answered since."""

    def __init__(self, every: float = FAULT_LOG_EVERY_S) -> None:
        self.every = every
        self.last = -every
        self.unlogged = 0

    def fault(self, scope: Scope, exc: BaseException) -> None:
        now = time.monotonic()
        self.unlogged += 1
        if now - self.last < self.every:
            return
        log.warning(
            "database unavailable on %s %s, answering 503 (%d requests since the last report): %s",
            scope["method"],
            scope["path"],
            self.unlogged,
            _one_line(exc),
        )
        self.last, self.unlogged = now, 0


def _one_line(exc: BaseException) -> str:
    text = str(exc).splitlines()[0] if str(exc) else ""
    return f"{type(exc).__name__}: {text}"[:300]
