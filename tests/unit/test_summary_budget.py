"""The last guard on a summary's size: a text over its budget is cut to the longest prefix that
fits, with a note, counted as the caller counts (the whole summary message)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from app.adapters.tokenizers import load_counter
from app.domain.summaries.budget import CUT_NOTE, cut_to_budget

COUNT = load_counter().encoder("cl100k_base").count


def test_a_summary_within_its_budget_is_left_alone() -> None:
    assert cut_to_budget("Fixed src/app.py.", 64, COUNT) is None


def test_a_summary_over_its_budget_is_cut_at_a_line_end_with_a_note() -> None:
    text = "\n".join(f"- decided to keep handler_{n} in src/h_{n}.py" for n in range(500))
    cut = cut_to_budget(text, 300, lambda t: COUNT(t) + 10)  # 10: the message's overhead
    assert cut is not None and cut.endswith(CUT_NOTE)
    assert COUNT(cut) + 10 <= 300
    kept = cut.removesuffix(CUT_NOTE)
    assert text.startswith(kept + "\n") and COUNT(kept) > 250


@settings(max_examples=100, deadline=None)
@given(st.text(min_size=0, max_size=3_000), st.integers(12, 400))
def test_whatever_the_text_the_cut_fits(text: str, budget: int) -> None:
    cut = cut_to_budget(text, budget, COUNT)
    assert COUNT(text if cut is None else cut) <= budget
