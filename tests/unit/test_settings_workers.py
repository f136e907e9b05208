"""How many server processes `ctxc serve` runs: the setting, else one per usable core."""

from __future__ import annotations

import os

from app.settings import DEFAULT_WORKERS_AT_MOST, Settings


def test_unset_workers_are_one_per_usable_core_at_most_four() -> None:
    cores = len(os.sched_getaffinity(0))
    assert Settings(workers=None).serve_workers == min(cores, DEFAULT_WORKERS_AT_MOST)


def test_set_workers_are_what_is_set() -> None:
    assert Settings(workers=3).serve_workers == 3
