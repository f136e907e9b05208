"""The prefix-cache simulator's accounting (bench.cache_sim) on hand-made prompts."""

from __future__ import annotations

from typing import Any

import pytest

from bench.cache_sim import Bill, Block, PrefixCache, prompt_blocks, with_breakpoint_at_end
from bench.coding_session import coding_session


def blocks(*sizes: int, first: str = "a") -> list[Block]:
    """A prompt of blocks of ``sizes`` tokens, the first named ``first``, the breakpoint last."""
    made = [Block(first if n == 0 else f"b{n}", size) for n, size in enumerate(sizes)]
    return with_breakpoint_at_end(made)


def test_an_identical_prompt_sent_twice_is_read_whole_the_second_time() -> None:
    cache = PrefixCache("anthropic")
    first = cache.send(blocks(800, 400, 300), now=0)
    second = cache.send(blocks(800, 400, 300), now=10)
    assert first == Bill("anthropic", 1_500, read=0, written=1_500)
    assert second == Bill("anthropic", 1_500, read=1_500, written=0)
    assert second.billed == pytest.approx(150)
    assert first.billed == pytest.approx(1_875)


def test_a_changed_first_block_reads_nothing() -> None:
    cache = PrefixCache("anthropic")
    cache.send(blocks(800, 400, 300), now=0)
    changed = cache.send(blocks(800, 400, 300, first="changed"), now=10)
    assert changed.read == 0
    assert changed.written == 1_500


def test_a_grown_prompt_reads_the_previous_breakpoint_and_writes_the_rest() -> None:
    cache = PrefixCache("anthropic")
    cache.send(blocks(800, 400, 300), now=0)
    grown = cache.send(blocks(800, 400, 300, 200, 100), now=10)
    assert (grown.read, grown.written, grown.uncached) == (1_500, 300, 0)


def test_the_lookback_reaches_20_blocks_back_and_no_further() -> None:
    near, far = PrefixCache("anthropic"), PrefixCache("anthropic")
    near.send(blocks(2_000), now=0)
    far.send(blocks(2_000), now=0)
    assert near.send(blocks(2_000, *[10] * 20), now=1).read == 2_000
    assert far.send(blocks(2_000, *[10] * 21), now=1).read == 0


def test_entries_expire_after_their_ttl_and_a_read_renews_them() -> None:
    cache = PrefixCache("anthropic", ttl_s=300)
    cache.send(blocks(1_500), now=0)
    assert cache.send(blocks(1_500), now=299).read == 1_500
    assert cache.send(blocks(1_500), now=598).read == 1_500
    assert cache.send(blocks(1_500), now=1_000).read == 0


def test_a_prefix_under_the_minimum_is_not_cached() -> None:
    cache = PrefixCache("anthropic", min_tokens=1_024)
    assert cache.send(blocks(1_000), now=0).written == 0
    assert cache.send(blocks(1_000), now=1).read == 0


def test_openai_mode_reads_the_shared_prefix_in_128_token_steps_from_1024() -> None:
    cache = PrefixCache("openai")
    cache.send(blocks(1_000, 300, 50), now=0)
    again = cache.send([*blocks(1_000, 300), Block("new", 999)], now=1)
    assert again.read == 1_024 + 2 * 128  # 1,300 shared tokens
    assert again.written == 0
    assert again.billed == pytest.approx(again.uncached + 0.5 * again.read)
    assert PrefixCache("openai").send(blocks(1_000), now=0).read == 0


def test_more_than_four_breakpoints_are_refused() -> None:
    marked = [Block(str(n), 10, breakpoint=True) for n in range(5)]
    with pytest.raises(ValueError, match="breakpoints"):
        PrefixCache("anthropic").send(marked, now=0)


def test_blocks_ignore_cache_control_and_keep_the_role() -> None:
    def count(text: str) -> int:
        return len(text)

    marked: list[dict[str, Any]] = [
        {"role": "user", "content": [{"type": "text", "text": "hi", "cache_control": {}}]}
    ]
    plain = prompt_blocks("sys", [{"role": "user", "content": "hi"}], count)
    with_mark = prompt_blocks([{"type": "text", "text": "sys"}], marked, count)
    assert [b.key for b in plain] == [b.key for b in with_mark]
    assert [b.breakpoint for b in with_mark] == [False, True]
    assert prompt_blocks(None, [{"role": "assistant", "content": "hi"}], count)[0].key != (
        plain[1].key
    )


def test_the_generated_session_is_deterministic_and_alternates() -> None:
    session = coding_session(16, 60)
    assert session == coding_session(16, 60)
    assert len(session) == 60
    assert all(t.incoming["role"] == "user" and t.reply["role"] == "assistant" for t in session)
