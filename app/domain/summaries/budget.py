"""A summary held to its budget, whatever wrote it: the last guard before it is stored.

Summarisers are asked for a summary within the budget and the built-in ones keep to it, but a
plug-in may not, and the stored summary is counted in the session's encoding (the summarisers
count in ``o200k_base``). A text over the budget is cut at the longest prefix that fits with a
note saying so; a cut ends at a line break where one is near.
"""

from __future__ import annotations

from collections.abc import Callable

CUT_NOTE = "\n[summary cut to fit its budget]"


def cut_to_budget(text: str, budget: int, count: Callable[[str], int]) -> str | None:
    """``text`` cut to fit ``budget`` as ``count`` measures it (the whole summary message), or
    None when it fits already. Binary search: about log2(len(text)) counts."""
    if count(text) <= budget:
        return None
    low, high = 0, len(text)  # the longest prefix that fits is in [low, high)
    while low < high - 1:
        middle = (low + high) // 2
        if count(text[:middle] + CUT_NOTE) <= budget:
            low = middle
        else:
            high = middle
    head = text[:low]
    line = head.rfind("\n", low * 3 // 4)
    return (head[:line] if line > 0 else head) + CUT_NOTE
