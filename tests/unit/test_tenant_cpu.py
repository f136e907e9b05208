"""A tenant's CPU-heavy work holds at most a few worker threads; others' work is not queued
behind it, and the registry keeps no limiter for a tenant with nothing in flight."""

from __future__ import annotations

import threading
from collections.abc import Callable

import anyio
import pytest

from app.services.tenancy import cpu


@pytest.mark.timeout(30)
def test_one_tenant_holds_at_most_its_slots_and_another_runs_meanwhile() -> None:
    limiters = cpu.TenantLimiters(2)
    release = threading.Event()
    running = 0
    most = 0
    lock = threading.Lock()

    def hog() -> None:
        nonlocal running, most
        with lock:
            running += 1
            most = max(most, running)
        release.wait(20)
        with lock:
            running -= 1

    async def as_tenant(tenant: str, work: Callable[[], None]) -> None:
        cpu.enter(limiters, tenant)
        await cpu.run_sync(work)

    async def main() -> None:
        async with anyio.create_task_group() as tasks:
            for _ in range(10):
                tasks.start_soon(as_tenant, "b", hog)
            await anyio.sleep(0.2)
            assert len(limiters) == 1
            # Tenant b has 10 requests in flight; tenant a's work runs at once all the same.
            with anyio.fail_after(5):
                await as_tenant("a", lambda: None)
            assert most == 2
            release.set()
        assert len(limiters) == 0  # nothing in flight: nothing kept

    anyio.run(main)
    assert most == 2


def test_work_outside_a_request_runs_without_a_tenant() -> None:
    async def main() -> int:
        return await cpu.run_sync(sum, [1, 2, 3])

    assert anyio.run(main) == 6


@pytest.mark.timeout(30)
def test_background_work_runs_one_step_at_a_time_and_takes_no_tenant_slot() -> None:
    lane = cpu.Lane(share=0.5)
    limiters = cpu.TenantLimiters(1)
    release = threading.Event()
    running = most = 0
    lock = threading.Lock()

    def step(n: int) -> int:
        nonlocal running, most
        with lock:
            running += 1
            most = max(most, running)
        with lock:
            running -= 1
        return n * n

    async def main() -> list[int]:
        cpu.enter(limiters, "a")
        results: list[int] = []
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(cpu.run_sync, lambda: release.wait(20))  # the tenant's one slot
            await anyio.sleep(0.1)

            async def background(n: int) -> None:
                results.append(await lane.run_sync(step, n))

            async with anyio.create_task_group() as steps:  # all end with the slot held
                for n in range(5):
                    steps.start_soon(background, n)
            release.set()
        return results

    assert sorted(anyio.run(main)) == [0, 1, 4, 9, 16]
    assert most == 1
