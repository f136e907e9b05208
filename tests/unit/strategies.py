"""Hypothesis strategies shared by the converter tests."""

from __future__ import annotations

from hypothesis import strategies as st

json_scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8)
)
json_values = st.recursive(
    json_scalars,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3)
    ),
    max_leaves=3,
)
json_objects = st.dictionaries(st.text(max_size=6), json_values, max_size=3)
messy_text = st.text(max_size=20) | st.sampled_from(["", " ", "\n\n", "\t ", "é 🚀 \u200b"])
caller_meta = st.dictionaries(st.sampled_from(["is_trace", "execution_id", "pinned"]), json_values)
