"""Stored JSON reads back as the standard library reads it, also where orjson refuses it."""

from __future__ import annotations

import json
import math

import pytest

from app.storage.db import json_loads


@pytest.mark.parametrize(
    "text",
    [
        '{"n": [13, 9999, 2.5, true, null], "s": "\\u00e9\\n"}',
        '{"big": 123456789012345678901234567890, "neg": -18446744073709551617}',
        '{"u64": 18446744073709551615, "zero": -0, "f": -0.0, "e": 1e-7}',
        '"\\ud800 lone surrogate"',
        '{"a": 1, "a": 2}',
        "1e400",
    ],
)
def test_values_read_as_the_standard_library_reads_them(text: str) -> None:
    assert json_loads(text) == json.loads(text)
    assert json_loads(text.encode()) == json.loads(text)


def test_nan_reads_as_nan() -> None:
    [value] = json_loads("[NaN]")
    assert math.isnan(value)
