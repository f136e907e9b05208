"""CPU-heavy work on worker threads, a few at a time per tenant.

anyio runs ``to_thread.run_sync`` work in one process-wide pool (40 threads). Work done for a
tenant (validating and counting a big body, compiling, importing) first takes a slot of that
tenant's own ``CapacityLimiter``, then a thread of the shared pool: one tenant holds at most
``per_tenant`` threads, and the others' work never queues behind all of its requests.

The tenant is the request's: ``get_tenant`` calls ``enter`` and the context variable carries it
to whatever the request awaits (routes and services call ``run_sync`` without passing it on).
Work outside a request (start-up) runs in the shared pool alone.

The registry holds a limiter only while some work of its tenant holds or waits for it: the one
created for a tenant is dropped when its last user leaves. So it never holds more limiters than
there is work in flight, however many tenants there are, and a tenant's count is never split
between two limiters.

Background work (digests and compactions made after the requests that asked for them) takes no
tenant's slot: it runs in one ``Lane`` of its own, a step at a time, and after each step the lane
rests so that it takes at most ``share`` of one thread's time. A worker thread running Python holds
the GIL a switch interval at a time: a foreground request beside a busy background thread waits
for it at every step, so the background's share of the time is what bounds their latency.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from contextvars import ContextVar
from typing import TypeVar, TypeVarTuple

import anyio
import anyio.to_thread

T = TypeVar("T")
Ts = TypeVarTuple("Ts")


class TenantLimiters:
    """One ``CapacityLimiter`` of ``per_tenant`` tokens per tenant with work in flight."""

    def __init__(self, per_tenant: int) -> None:
        self.per_tenant = per_tenant
        self._held: dict[str, tuple[anyio.CapacityLimiter, int]] = {}

    def __len__(self) -> int:
        return len(self._held)

    @asynccontextmanager
    async def slot(self, tenant: str) -> AsyncIterator[None]:
        """Hold one of ``tenant``'s slots (waiting for one when all are taken)."""
        # Only the event loop's thread touches ``_held``: no lock is needed.
        limiter, users = self._held.get(tenant) or (anyio.CapacityLimiter(self.per_tenant), 0)
        self._held[tenant] = (limiter, users + 1)
        try:
            async with limiter:
                yield
        finally:
            limiter, users = self._held[tenant]
            if users == 1:
                del self._held[tenant]
            else:
                self._held[tenant] = (limiter, users - 1)


_CURRENT: ContextVar[tuple[TenantLimiters, str] | None] = ContextVar("ctxc_tenant", default=None)


def enter(limiters: TenantLimiters, tenant: str) -> None:
    """The request being served acts for ``tenant``: its CPU work takes that tenant's slots."""
    _CURRENT.set((limiters, tenant))


async def run_sync(work: Callable[[*Ts], T], *args: *Ts) -> T:
    """``work(*args)`` on a worker thread, in one of the current tenant's slots."""
    current = _CURRENT.get()
    if current is None:
        return await anyio.to_thread.run_sync(work, *args)
    limiters, tenant = current
    async with limiters.slot(tenant):
        return await anyio.to_thread.run_sync(work, *args)


BACKGROUND_SHARE = 0.25


class Lane:
    """Background CPU work: one step at a time process-wide, at most ``share`` of the time."""

    def __init__(self, share: float = BACKGROUND_SHARE) -> None:
        self.share = share
        self._lock: anyio.Lock | None = None  # made in the event loop that uses it

    async def run_sync(self, work: Callable[[*Ts], T], *args: *Ts) -> T:
        """``work(*args)`` on a worker thread when the lane is free; the lane then rests
        ``(1 / share - 1)`` times as long as the work took."""
        self._lock = self._lock or anyio.Lock()
        async with self._lock:
            start = time.perf_counter()
            done = await anyio.to_thread.run_sync(work, *args)
            await anyio.sleep((time.perf_counter() - start) * (1 / self.share - 1))
            return done
