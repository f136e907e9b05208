"""Where a sidecar turn's time went, phase by phase, said to the agent in a ``Server-Timing``
header (docs/sidecar.md): reading its body, opening the session (hashing its history against the
session's, within it), compiling, the upstream's answer, storing the turn.

A turn's phases are kept in a context variable, so code deep in a phase (the hashing, in
``threads``) times its part without being handed anything. A phase timed within another is its
own: the outer one counts only the rest.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar

# The phases, in the order a turn runs them (docs/sidecar.md says what each covers).
READ = "read"  # the body received, parsed and put in its essential form
OPEN = "open"  # the session read (or made, or forked) and the new messages parsed
HASH = "hash"  # within ``open``: the history hashed and compared with the session's thread
COMPILE = "compile"  # the compile (its compactions too) and the body to forward
UPSTREAM = "upstream"  # until the upstream's answer began (its status and headers)
STORE = "store"  # the turn stored (said only on an answer that is not streamed)

TIMING = "server-timing"  # the header

_CURRENT: ContextVar[Phases | None] = ContextVar("ctxc_sidecar_phases", default=None)


class Phases:
    """The time a turn spent in each phase, in the order they began."""

    def __init__(self, clock: Callable[[], float] = time.perf_counter) -> None:
        self.spent: dict[str, float] = {}  # seconds, without the phases timed within
        self._within: list[float] = []  # per open phase: the time of the phases inside it
        self._clock = clock

    @classmethod
    def begin(cls) -> Phases:
        """A turn's phases, the current ones from here on (in this task and what it starts)."""
        phases = cls()
        _CURRENT.set(phases)
        return phases

    @contextmanager
    def timed(self, name: str) -> Iterator[None]:
        """Count the time of the block to ``name`` (less the phases timed within it)."""
        self.spent.setdefault(name, 0.0)
        start = self._clock()
        self._within.append(0.0)
        try:
            yield
        finally:
            took = self._clock() - start
            inner = self._within.pop()
            self.spent[name] += took - inner
            if self._within:
                self._within[-1] += took

    def header(self) -> str:
        """The ``Server-Timing`` value: each phase's milliseconds."""
        return ", ".join(f"{name};dur={s * 1000:.2f}" for name, s in self.spent.items())


@contextmanager
def phase(name: str) -> Iterator[None]:
    """Count the block to the current turn's phase ``name``; nothing outside a turn."""
    phases = _CURRENT.get()
    if phases is None:
        yield
        return
    with phases.timed(name):
        yield


def timing(upstream: Mapping[str, str] | None = None) -> dict[str, str]:
    """The ``Server-Timing`` header of the current turn's phases so far, then the entries of
    the upstream's own (in its answer's headers ``upstream``: kept); none outside a turn."""
    phases = _CURRENT.get()
    if phases is None:
        return {}
    theirs = None if upstream is None else upstream.get(TIMING)
    return {TIMING: ", ".join(filter(None, (phases.header(), theirs)))}
