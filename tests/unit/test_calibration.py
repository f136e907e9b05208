"""Counts that learn, on the domain alone: the estimator, its bounds, outliers and cache tokens."""

from __future__ import annotations

import math
import random
from dataclasses import replace
from fractions import Fraction

from hypothesis import assume, given, settings
from hypothesis import strategies as st

from app.domain.calibration import (
    BAND,
    HIGHEST,
    KEPT,
    LOWEST,
    MARGIN,
    MIN_SAMPLES,
    Calibration,
    Sample,
    cache_apart,
    calibration_of,
    choose,
    factor_of,
    from_json,
    kept,
    key_of,
    reported_prompt,
    sample_of,
    to_json,
)
from tests.unit.test_compiling_properties import Case, cases, run

SETTINGS = settings(max_examples=200, deadline=None)
estimates = st.integers(min_value=1, max_value=2_000_000)
ratios = st.floats(min_value=0.25, max_value=4.0, allow_nan=False)


def sample(estimated: int, ratio: float) -> Sample:
    reported = max(1, round(estimated * ratio))
    return Sample(estimated, reported, estimated)


def ring(*pairs: tuple[int, float]) -> tuple[Sample, ...]:
    return tuple(sample(e, r) for e, r in pairs)


def test_too_few_samples_calibrate_nothing() -> None:
    assert factor_of(ring((1000, 1.2)) * (MIN_SAMPLES - 1)) is None
    assert factor_of(ring((1000, 1.2)) * MIN_SAMPLES) == (1.2, MIN_SAMPLES)


def test_the_factor_is_reported_over_estimated_of_the_inliers() -> None:
    found = factor_of(ring((1000, 1.1), (3000, 1.2), (1000, 1.15), (1000, 3.5)))
    # 3.5 is an outlier; the rest weigh by size: (1100 + 3600 + 1150) / 5000.
    assert found == (1.17, 3)


def test_a_provider_counting_less_is_followed_down_to_the_margin_only() -> None:
    found = factor_of(ring((1000, 0.5)) * 4)
    assert found == (LOWEST, 4)
    calibration = Calibration(LOWEST, 4, "session", sample(1000, 0.5))
    assert calibration.count(1000) == 950  # never more than MARGIN below the estimate


def test_a_provider_counting_far_more_is_followed_up_to_the_cap() -> None:
    assert factor_of(ring((1000, 3.0)) * 4) == (HIGHEST, 4)


def test_usage_without_a_prompt_count_is_no_sample() -> None:
    assert sample_of(1000, 1000, {"completion_tokens": 40}, apart=True) is None
    assert sample_of(1000, 1000, None, apart=False) is None
    assert sample_of(1000, 1000, {"prompt_tokens": 0}, apart=False) is None
    assert sample_of(0, 3, {"prompt_tokens": 100}, apart=False) is None


def test_an_implausible_count_is_no_sample() -> None:
    # Anthropic's input_tokens alone, the cache left out: a hundredth of the prompt.
    assert sample_of(10_000, 10_000, {"prompt_tokens": 100}, apart=False) is None
    assert sample_of(10_000, 10_000, {"prompt_tokens": 50_000}, apart=False) is None
    assert sample_of(10_000, 10_700, {"prompt_tokens": 11_800}, apart=False) == Sample(
        10_000, 11_800, 10_700
    )


def test_anthropic_cache_tokens_are_added_and_openai_ones_are_not() -> None:
    usage = {"prompt_tokens": 300, "cache_read_tokens": 9000, "cache_write_tokens": 700}
    assert reported_prompt(usage, apart=True) == 10_000
    assert reported_prompt({"prompt_tokens": 10_000, "cache_read_tokens": 9000}, False) == 10_000
    assert cache_apart(key_of("anthropic", "o200k_base", "anthropic"))
    assert not cache_apart(key_of("anthropic/claude:x", "o200k_base", "openai"))


@SETTINGS
@given(
    total=st.integers(min_value=1, max_value=10_000_000),
    read=st.floats(min_value=0, max_value=1),
    write=st.floats(min_value=0, max_value=1),
)
def test_the_whole_prompt_is_read_however_the_cache_splits_it(
    total: int, read: float, write: float
) -> None:
    cached = int(total * read)
    created = int((total - cached) * write)
    anthropic = {
        "prompt_tokens": total - cached - created,
        "cache_read_tokens": cached,
        "cache_write_tokens": created,
    }
    openai = {"prompt_tokens": total, "cache_read_tokens": cached}
    assert reported_prompt(anthropic, apart=True) == total
    assert reported_prompt(openai, apart=False) == total


@SETTINGS
@given(st.lists(st.tuples(estimates, ratios), min_size=1, max_size=40))
def test_the_factor_stays_within_its_bounds(pairs: list[tuple[int, float]]) -> None:
    found = factor_of(ring(*pairs))
    if found is not None:
        factor, used = found
        assert LOWEST <= factor <= HIGHEST
        assert MIN_SAMPLES <= used <= len(pairs)


@SETTINGS
@given(
    factor=st.floats(min_value=LOWEST, max_value=HIGHEST),
    estimate=st.integers(min_value=0, max_value=10**9),
    window=st.integers(min_value=1, max_value=10**9),
)
def test_counts_are_never_below_the_margin_and_the_budget_fits_the_window(
    factor: float, estimate: int, window: int
) -> None:
    calibration = Calibration(round(factor, 4), 3, "profile", Sample(1, 1, 1))
    assert calibration.count(estimate) >= estimate * (1 - MARGIN)
    budget = calibration.budget(window)
    assert calibration.count(budget) <= window
    assert calibration.count(budget + 1) > window  # the budget is the most that fits


@SETTINGS
@given(
    truth=st.floats(min_value=LOWEST, max_value=HIGHEST),
    clean=st.lists(
        st.tuples(st.integers(200, 200_000), st.floats(-0.02, 0.02)), min_size=3, max_size=12
    ),
    outliers=st.lists(
        st.tuples(st.integers(200, 200_000), st.floats(0.4, 3.0), st.booleans()), max_size=11
    ),
    order=st.randoms(use_true_random=False),
)
def test_outliers_fewer_than_the_clean_samples_move_nothing(
    truth: float,
    clean: list[tuple[int, float]],
    outliers: list[tuple[int, float, bool]],
    order: random.Random,
) -> None:
    assume(len(outliers) < len(clean))
    samples = [Sample(e, round(e * truth * (1 + noise)), e) for e, noise in clean]
    # Far off either way: more than 40% above or below what the tokenizer difference explains.
    samples += [
        Sample(e, max(1, round(e * truth * ((1 + off) if up else 1 / (1 + off)))), e)
        for e, off, up in outliers
    ]
    order.shuffle(samples)
    found = factor_of(samples)
    assert found is not None
    factor, used = found
    assert used == len(clean)
    assert abs(factor / min(max(truth, LOWEST), HIGHEST) - 1) <= 0.021


@SETTINGS
@given(st.lists(st.tuples(estimates, ratios), max_size=40), st.tuples(estimates, ratios))
def test_the_ring_keeps_the_newest_few(
    pairs: list[tuple[int, float]], new: tuple[int, float]
) -> None:
    before = ring(*pairs)
    after = kept(before, sample(*new))
    assert len(after) == min(len(before) + 1, KEPT)
    assert after[-1] == sample(*new)
    assert from_json(to_json(after)) == after


def test_stored_samples_that_are_not_samples_are_skipped() -> None:
    raw = [[1, 2, 3], [1, 2], "x", [0, 5, 5], [True, 2, 2], [4, 5, 6]]
    assert from_json(raw) == (Sample(1, 2, 3), Sample(4, 5, 6))
    assert from_json({"samples": []}) == ()


def test_the_session_comes_first_then_the_profile() -> None:
    session, profile = ring((1000, 1.3)) * 3, ring((1000, 1.1)) * 5
    chosen = choose(session, profile)
    assert chosen is not None and (chosen.scope, chosen.factor) == ("session", 1.3)
    chosen = choose(session[:2], profile)
    assert chosen is not None and (chosen.scope, chosen.factor) == ("profile", 1.1)
    assert choose(session[:2], profile[:2]) is None


def test_the_last_error_is_of_the_figure_given() -> None:
    found = calibration_of([*ring((1000, 1.2)) * 3, Sample(1000, 1250, 1200)], "session")
    assert found is not None
    assert (found.error_tokens, found.error_share) == (-50, -0.04)


def test_a_simulated_provider_is_learnt_within_three_percent() -> None:
    """A provider counting 1.18x the estimate with 2% noise and an outlier every seventh call:
    after a few calls the calibrated count is within 3% of its count, the raw one is not."""
    rng = random.Random(15)
    samples: tuple[Sample, ...] = ()
    for call in range(1, 13):
        estimated = rng.randint(2_000, 60_000)
        ratio = 1.18 * (1 + rng.uniform(-0.02, 0.02))
        if call % 7 == 0:
            ratio *= rng.choice((0.5, 2.5))
        samples = kept(samples, sample(estimated, ratio))
    calibration = calibration_of(samples, "session")
    assert calibration is not None
    estimated = 40_000
    reported = round(estimated * 1.18)
    assert abs(calibration.count(estimated) / reported - 1) <= 0.03
    assert abs(estimated / reported - 1) > 0.1
    assert BAND < 0.4  # what "an outlier" means above


@settings(max_examples=120, deadline=None)
@given(cases(limited=True), st.floats(min_value=LOWEST, max_value=HIGHEST))
def test_a_calibrated_compile_fits_the_window_by_its_calibrated_count(
    case: Case, factor: float
) -> None:
    """The compile trims to the window divided by the factor: the calibrated total (the raw
    estimate times the factor, rounded up) fits the window."""
    calibration = Calibration(round(factor, 4), 3, "session", Sample(1, 1, 1))
    result = run(replace(case, target=replace(case.target, calibration=calibration)))
    if result is None:
        return
    output = result.output
    assert output.total == math.ceil(output.estimate * Fraction(calibration.factor))
    assert output.total <= case.target.context_window == output.context_window
    assert not any("exceeds the context window" in w for w in output.warnings)
