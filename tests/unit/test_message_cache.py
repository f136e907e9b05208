"""The parse-and-count cache of stateless compiles remembers per tenant, and counts each message
once per encoding asked for, on several threads for a big batch, exactly as one thread does."""

from __future__ import annotations

import random
import threading

import pytest

from app.adapters.tokenizers import load_counter
from app.domain.errors import InvalidInput
from app.domain.formats.openai import from_openai
from app.services.sessions.cache import PARALLEL_MESSAGES, MessageCache
from bench.append import agent_batch

HISTORY = [{"role": "user", "content": "the deploy key is in vault/prod/deploy"}]
COUNTER = load_counter()


def _history(size: int) -> list[dict[str, object]]:
    rng = random.Random(size)
    return [m for i in range(0, size, 10) for m in agent_batch(rng, i)][:size]


def test_a_tenant_hits_what_it_sent_before_and_never_what_another_sent() -> None:
    cache = MessageCache(COUNTER, 1 << 20)
    [(first, _)] = cache.parse("tenant-a", "openai", HISTORY)
    [(again, _)] = cache.parse("tenant-a", "openai", HISTORY)
    [(other, _)] = cache.parse("tenant-b", "openai", HISTORY)
    assert again is first  # remembered: parsed and counted once
    assert other is not first and other == first  # parsed anew for the other tenant


@pytest.mark.parametrize("threads", [1, 2, 4])
@pytest.mark.parametrize("size", [3, PARALLEL_MESSAGES * 10 + 7])
def test_counts_are_those_of_one_thread_in_the_encodings_asked_for(threads: int, size: int) -> None:
    raw = _history(size)
    expected = [COUNTER.count_all(m) for m in from_openai(raw)]
    cache = MessageCache(COUNTER, 1 << 30, threads=threads)
    entries = cache.parse("t", "openai", raw, encodings=("cl100k_base",))
    assert [counts for _, counts in entries] == [
        {"cl100k_base": e["cl100k_base"]} for e in expected
    ]
    # Asked again for both, the remembered messages get the count they lack, and only that.
    again = cache.parse("t", "openai", raw)
    assert all(a[0] is b[0] for a, b in zip(again, entries, strict=True))
    assert [counts for _, counts in again] == expected
    # No encoding asked for: parsed only (ephemeral messages are never counted).
    assert all(not c for _, c in cache.parse("u", "openai", raw, encodings=()))


def test_a_refused_batch_names_every_bad_message_whatever_the_threads() -> None:
    raw: list[object] = list(_history(PARALLEL_MESSAGES * 4))
    raw[5] = {"role": "nobody", "content": "x"}
    raw[-1] = {"role": "tool", "content": "no call id"}
    for threads in (1, 2):
        with pytest.raises(InvalidInput) as refused:
            MessageCache(COUNTER, 1 << 30, threads=threads).parse("t", "openai", raw)
        assert [p[0][0] for p in refused.value.problems] == [5, len(raw) - 1]


def test_a_busy_pool_never_holds_a_batch_up() -> None:
    """The pool's helpers may all be busy with other batches: the parsing thread counts alone."""
    cache = MessageCache(COUNTER, 1 << 30, threads=2)
    release = threading.Event()
    cache.executor().submit(release.wait)  # the only helper thread, held
    done: list[object] = []
    worker = threading.Thread(target=lambda: done.append(cache.parse("t", "openai", _history(500))))
    worker.start()
    worker.join(timeout=120)
    release.set()
    assert done, "the batch waited for a helper that never started"
    [entries] = done
    assert isinstance(entries, list)
    assert [c for _, c in entries] == [COUNTER.count_all(m) for m in from_openai(_history(500))]
