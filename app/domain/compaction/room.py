"""A sidecar session fitted to its agent's fixed part: the system prompt, system messages and
tool definitions an agent sends unchanged every turn (Claude Code: about 25,000 tokens).

What is left of the context window beside it and the reply's reserve is the room of the
history. The session's policy measures the history as sent (``measure: "sent"``): it compacts
at 90% of the room down to 35% of it, so a compaction leaves room for many turns and the
requests between two compactions extend one another (the provider's prompt cache keeps them).
Its compiler previews a tool result over an eighth of the room from the first time it is sent,
the same way in every later request (the original stays retrievable), so that one result
cannot fill the room and no older message is rendered again between compactions.
"""

from __future__ import annotations

from typing import Any

from app.domain.compilers.decorators import default_reserve
from app.domain.compilers.newest import capped

TRIGGER_PCT = 90
LOW_WATER_PCT = 35
# A tool result over this part of the room is previewed; a summary is no longer.
RESULT_SHARE = 8
MIN_RESULT_TOKENS = 256
# What the room is never less than, as a part of the window (a fixed part that fills the window
# leaves the compile to say the request cannot fit).
MIN_ROOM_SHARE = 8


def room(window: int, fixed: int) -> int:
    """The history's room in ``window`` beside a fixed part of ``fixed`` tokens and the reply."""
    return max(window // MIN_ROOM_SHARE, window - default_reserve(window) - fixed, 2)


def policy(window: int, fixed: int) -> dict[str, Any]:
    """The compaction policy of a sidecar session (fields over the defaults)."""
    space = room(window, fixed)
    return {
        "measure": "sent",
        "trigger_tokens": max(2, space * TRIGGER_PCT // 100),
        "target_tokens": max(1, space * LOW_WATER_PCT // 100),
        "summary_tokens": max(64, min(2_000, space // RESULT_SHARE)),
        "min_messages": 2,
        # The compile measures the request itself; the usage the provider reports compacts
        # only a request that filled the whole window (at 85% it compacted every turn).
        "micro_trigger_pct": 100,
        "full_trigger_pct": 100,
    }


def compiler(window: int, fixed: int) -> dict[str, Any]:
    """The compiler of a sidecar session: results over the cap previewed alike in every round
    (the newest round's cap is the same, and so is its preview), then ``token_limit``."""
    cap = max(MIN_RESULT_TOKENS, room(window, fixed) // RESULT_SHARE)
    rules = capped(cap)
    params = {
        "max_tokens": rules.max_tokens,
        "head_tokens": rules.head_tokens,
        "tail_tokens": rules.tail_tokens,
        "newest_max_tokens": rules.max_tokens,
    }
    return {"decorators": [{"name": "compact_tool_results", "params": params}, "token_limit"]}
