"""One warmed output kept per session (app/services/compiling/warming.py): each write's replaces
the one before, and a write that warms an older state of the session after a later one did
keeps nothing."""

from __future__ import annotations

from app.adapters.tokenizers import load_counter
from app.domain.compiling import Output
from app.services.compiling.warming import _keep
from app.services.sessions.cache import MessageCache

SESSION = ("tenant-a", "7")


def output(total: int) -> Output:
    return Output(None, [], None, total, {}, 1_000, True, None, [], [], [])


def test_each_warm_replaces_the_one_before_and_an_older_one_keeps_nothing() -> None:
    cache = MessageCache(load_counter(), 1 << 20, view_bytes=1 << 24)
    first, second, third = (("tenant-a", "7", bytes([n])) for n in range(3))
    assert _keep(cache, SESSION, (1, 10), first, output(10))
    assert _keep(cache, SESSION, (1, 20), second, output(20))
    assert cache.views.get(first) is None and cache.views.get(second) == output(20)
    # A write of seq 15 whose warm ends after the write of seq 20 warmed.
    assert not _keep(cache, SESSION, (1, 15), third, output(15))
    assert cache.views.get(third) is None and cache.views.get(second) == output(20)
    # A compaction moves the version: a later state, whatever its last seq.
    assert _keep(cache, SESSION, (2, 5), third, output(5))
    assert cache.views.get(second) is None and cache.views.get(third) == output(5)
    assert _keep(cache, ("tenant-b", "7"), (1, 1), first, output(1))
    assert cache.views.get(third) == output(5)  # another tenant's session is its own
