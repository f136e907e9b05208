"""A deterministic simulator of a provider's prompt cache, for the prefix-cache benchmark.

A prompt is a sequence of blocks (Anthropic's order: the system blocks, then each message's
content blocks); a block's identity is its JSON with `cache_control` left out, and the role of
its message. Two modes:

- `anthropic`: explicit breakpoints (a block with `cache_control`, at most 4). A request reads
  the longest live cached prefix ending at a breakpoint or at one of the `LOOKBACK` block
  boundaries before it, and writes the prefix up to each breakpoint (prefixes under
  `min_tokens` are never cached). Billed: uncached x 1, written x 1.25, read x 0.1.
- `openai`: automatic. Every prefix of a request is cached; a request reads the longest live
  shared prefix, from 1,024 tokens in 128-token steps. Billed: uncached x 1, read x 0.5.

Entries live `ttl_s` simulated seconds from their last write or read. Matching is by whole
blocks, so a prefix that differs inside a block matches up to that block only.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

Mode = Literal["anthropic", "openai"]
LOOKBACK = 20
MAX_BREAKPOINTS = 4
OPENAI_MIN = 1_024
OPENAI_STEP = 128
RATES: dict[Mode, tuple[float, float]] = {"anthropic": (1.25, 0.1), "openai": (0.0, 0.5)}


@dataclass(frozen=True)
class Block:
    """One content block of a prompt: what identifies it, its tokens, and whether it carries a
    cache breakpoint."""

    key: str
    tokens: int
    breakpoint: bool = False


@dataclass(frozen=True)
class Bill:
    """One request's prompt tokens as the provider bills them."""

    mode: Mode
    prompt: int
    read: int
    written: int

    @property
    def uncached(self) -> int:
        return self.prompt - self.read - self.written

    @property
    def billed(self) -> float:
        """Input billed in uncached-token equivalents."""
        write_rate, read_rate = RATES[self.mode]
        return self.uncached + write_rate * self.written + read_rate * self.read


def _content(content: Any) -> list[Any]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return list(content) if isinstance(content, list) else [content]


def prompt_blocks(
    system: Any, messages: Iterable[dict[str, Any]], count: Callable[[str], int]
) -> list[Block]:
    """The blocks of an Anthropic-shaped prompt (``system`` a string or text blocks), with the
    breakpoints its ``cache_control`` marks say; ``count`` gives a block's tokens."""
    parts = [("system", block) for block in _content(system)] if system else []
    for message in messages:
        parts += [(message["role"], block) for block in _content(message.get("content"))]
    blocks = []
    for role, block in parts:
        marked = isinstance(block, dict) and "cache_control" in block
        bare = {k: v for k, v in block.items() if k != "cache_control"} if marked else block
        body = json.dumps(bare, sort_keys=True, ensure_ascii=False)
        blocks.append(Block(f"{role}:{body}", count(body), marked))
    return blocks


def with_breakpoint_at_end(blocks: Sequence[Block]) -> list[Block]:
    """The agent's usual breakpoint: on the last block of the prompt."""
    out = list(blocks)
    if out:
        last = out[-1]
        out[-1] = Block(last.key, last.tokens, True)
    return out


def _chain(blocks: Sequence[Block]) -> list[bytes]:
    ids, previous = [], b""
    for block in blocks:
        previous = hashlib.sha256(previous + block.key.encode()).digest()
        ids.append(previous)
    return ids


class PrefixCache:
    """One account's prompt cache in one provider's mode."""

    def __init__(self, mode: Mode, ttl_s: float = 300.0, min_tokens: int = 1_024) -> None:
        self.mode = mode
        self.ttl_s = ttl_s
        self.min_tokens = min_tokens
        self._expiry: dict[bytes, float] = {}

    def send(self, blocks: Sequence[Block], now: float) -> Bill:
        """Bill one request sent at simulated time ``now`` (seconds), and cache what it caches."""
        ids = _chain(blocks)
        ends = [0]
        for block in blocks:
            ends.append(ends[-1] + block.tokens)
        if self.mode == "openai":
            return self._automatic(ids, ends, now)
        return self._explicit(blocks, ids, ends, now)

    def _live(self, key: bytes, now: float) -> bool:
        return self._expiry.get(key, -1.0) >= now

    def _explicit(
        self, blocks: Sequence[Block], ids: list[bytes], ends: list[int], now: float
    ) -> Bill:
        marks = [n for n, block in enumerate(blocks) if block.breakpoint]
        if len(marks) > MAX_BREAKPOINTS:
            raise ValueError(f"{len(marks)} cache breakpoints; the provider allows 4")
        hit = -1
        for mark in marks:
            for n in range(mark, max(-1, mark - LOOKBACK - 1), -1):
                if self._live(ids[n], now):
                    hit = max(hit, n)
                    break
        if hit >= 0:
            self._expiry[ids[hit]] = now + self.ttl_s
        read = ends[hit + 1]
        written = 0
        for mark in marks:
            if ends[mark + 1] >= self.min_tokens:
                self._expiry[ids[mark]] = now + self.ttl_s
                written = max(written, ends[mark + 1] - read)
        return Bill(self.mode, ends[-1], read, written)

    def _automatic(self, ids: list[bytes], ends: list[int], now: float) -> Bill:
        shared = 0
        for n in range(len(ids) - 1, -1, -1):
            if self._live(ids[n], now):
                shared = ends[n + 1]
                break
        read = 0
        if shared >= OPENAI_MIN:
            read = OPENAI_MIN + (shared - OPENAI_MIN) // OPENAI_STEP * OPENAI_STEP
        for n, key in enumerate(ids):
            if ends[n + 1] >= OPENAI_MIN:
                self._expiry[key] = now + self.ttl_s
        return Bill(self.mode, ends[-1], read, 0)
