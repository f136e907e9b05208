"""A turn's phases (app/services/sidecar/phases.py) on a clock the test moves: a phase timed
within another is counted once, as its own; a phase run twice adds up; outside a turn nothing
is counted."""

from __future__ import annotations

import asyncio

from app.services.sidecar.phases import Phases, phase, timing


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_a_phase_within_another_is_counted_once() -> None:
    clock = Clock()
    phases = Phases(clock)
    with phases.timed("open"):
        clock.now += 0.002
        with phases.timed("hash"):
            clock.now += 0.005
        clock.now += 0.001
    with phases.timed("compile"):
        clock.now += 0.004
    with phases.timed("open"):  # a second time: added
        clock.now += 0.0005
    assert list(phases.spent) == ["open", "hash", "compile"]
    assert round(phases.spent["open"], 6) == 0.0035
    assert round(phases.spent["hash"], 6) == 0.005
    assert phases.header() == "open;dur=3.50, hash;dur=5.00, compile;dur=4.00"


def test_the_current_turn_is_its_task_s_own() -> None:
    async def turn(name: str) -> dict[str, str]:
        Phases.begin()
        with phase(name):
            await asyncio.sleep(0)
        return timing()

    async def both() -> list[dict[str, str]]:
        return list(await asyncio.gather(turn("a"), turn("b")))

    first, second = asyncio.run(both())
    assert first["server-timing"].startswith("a;dur=") and "b;" not in first["server-timing"]
    assert second["server-timing"].startswith("b;dur=") and "a;" not in second["server-timing"]
    assert timing() == {}  # outside a turn
    with phase("read"):  # counts nowhere
        pass
    assert timing() == {}
