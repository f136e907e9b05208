"""The byte-bounded LRU behind the compile caches: bounded by the sizes entries are put with,
least recently used out first, safe to share between threads."""

from __future__ import annotations

import threading

from app.services.sessions.cache import Lru


def kept(cache: Lru[str, str], keys: str) -> str:
    return "".join(k for k in keys if cache.get(k) is not None)


def test_the_least_recently_used_entries_leave_first_to_stay_within_the_bytes() -> None:
    cache: Lru[str, str] = Lru(max_bytes=10)
    for key in "abc":
        cache.put(key, key.upper(), 3)
    assert cache.get("a") == "A"  # "a" is now the most recent; "b" the least
    cache.put("d", "D", 4)  # 13 bytes: "b" goes, then 10 fit
    assert kept(cache, "abcd") == "acd"


def test_an_entry_over_the_bound_is_not_kept_and_evicts_nothing() -> None:
    cache: Lru[str, str] = Lru(max_bytes=10)
    cache.put("a", "A", 6)
    cache.put("big", "B", 11)
    assert (cache.get("big"), cache.get("a")) == (None, "A")


def test_a_key_already_kept_is_not_replaced() -> None:
    cache: Lru[str, str] = Lru(max_bytes=10)
    cache.put("a", "first", 2)
    cache.put("a", "second", 2)
    assert cache.get("a") == "first"


def test_a_zero_bound_keeps_nothing() -> None:
    cache: Lru[str, str] = Lru(max_bytes=0)
    cache.put("a", "A", 1)
    assert cache.get("a") is None


def test_threads_sharing_the_cache_never_exceed_its_bound() -> None:
    cache: Lru[int, int] = Lru(max_bytes=1_000)

    def work(offset: int) -> None:
        for n in range(2_000):
            cache.put(offset + n % 300, n, 7)
            cache.get(offset + (n * 7) % 300)

    threads = [threading.Thread(target=work, args=(k * 1_000,)) for k in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    alive = sum(cache.get(k * 1_000 + n) is not None for k in range(4) for n in range(300))
    assert alive == 1_000 // 7
