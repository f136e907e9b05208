"""Posted bodies: `json_pieces.loads` is `json.loads`, value for value and error for error; a
big body is parsed in a worker thread, a small one inline; the Idempotency-Key fingerprint is
the hash it always was."""

from __future__ import annotations

import asyncio
import hashlib
import json
import threading
from typing import Any

import pytest
from fastapi.exceptions import RequestValidationError
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, field_validator

from app.api import bodies, json_pieces
from app.api.problems import ProblemError
from app.api.schemas import MessagesAppend
from app.services.sessions.messages import fingerprint

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=False),
    st.text(max_size=12),
)
values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=4), inner),
    max_leaves=40,
)


def outcome(decode: Any, raw: bytes) -> tuple[str, Any]:
    try:
        return "value", json.dumps(decode(raw))
    except Exception as exc:
        return "error", type(exc).__name__


EDITS = st.sampled_from(["", ",", "]", "}", '"', "x", "1", " "])


@settings(max_examples=300, deadline=None)
@given(values, st.sampled_from([None, 1]), st.integers(0, 400), EDITS)
def test_pieces_decode_as_json_loads_does(
    value: Any, indent: int | None, at: int, edit: str
) -> None:
    text = json.dumps(value, indent=indent)
    for raw in (text.encode(), (text[:at] + edit + text[at + 1 :]).encode()):
        expected = outcome(json.loads, raw)
        for window in (1, 3, 8, 64):
            assert outcome(lambda r, w=window: json_pieces.loads(r, w), raw) == expected, raw


@pytest.mark.parametrize(
    "raw",
    [
        b"",
        b" ",
        b"\xef\xbb\xbf{}",
        b'{"a": 1, "a": 2}',
        b"[1,]",
        b'{"a": 1,}',
        b"\xff",
        b"[" * 5000 + b"]" * 5000,
        '{"x": "\u00e9"}'.encode("utf-16"),
        b"NaN",
        b"-Infinity",
        b'["\\ud800", 1e400, -2.5e-07, 12345678901234567890]',
        b"[1] x",
        b'"a\nb"',
    ],
)
def test_pieces_match_json_loads_on_edge_cases(raw: bytes) -> None:
    for window in (1, 4, json_pieces.WINDOW):
        assert outcome(lambda r, w=window: json_pieces.loads(r, w), raw) == outcome(json.loads, raw)


class Traced(BaseModel):
    items: list[int]

    @field_validator("items")
    @classmethod
    def _where(cls, items: list[int]) -> list[int]:
        THREADS.append(threading.current_thread())
        return items


THREADS: list[threading.Thread] = []


def test_small_bodies_are_parsed_on_the_loop_and_big_ones_in_a_worker_thread() -> None:
    small = json.dumps({"items": [1, 2, 3]}).encode()
    big = json.dumps({"items": list(range(30_000))}).encode()
    assert len(small) <= bodies.BIG_BODY < len(big)

    async def parse_both() -> tuple[threading.Thread, list[Traced]]:
        loop_thread = threading.current_thread()
        return loop_thread, [await bodies.parse_sized(Traced, raw) for raw in (small, big)]

    THREADS.clear()
    loop_thread, parsed = asyncio.run(parse_both())
    assert [len(p.items) for p in parsed] == [3, 30_000]
    assert THREADS[0] is loop_thread and THREADS[1] is not loop_thread


@pytest.mark.parametrize("size", [100, 200_000])
def test_errors_are_fastapis_at_any_size(size: int) -> None:
    pad = "x" * size
    with pytest.raises(ProblemError) as malformed:
        bodies.parse(MessagesAppend, b'{"messages": ["' + pad.encode() + b'", ')
    assert malformed.value.problem.status == 400
    with pytest.raises(RequestValidationError) as invalid:
        bodies.parse(MessagesAppend, json.dumps({"messages": [pad, {}], "colour": 1}).encode())
    assert [e["loc"] for e in invalid.value.errors()] == [("body", "colour")]
    with pytest.raises(ProblemError) as unstorable:
        raw = '{"messages": ["' + pad + '", {"content": "a\\ud800"}], "metadata": {"n": NaN}}'
        bodies.parse(MessagesAppend, raw.encode())
    assert [e.path for e in unstorable.value.problem.errors or []] == [
        "body.messages[1].content",
        "body.metadata.n",
    ]
    with pytest.raises(RequestValidationError) as missing:
        bodies.parse(MessagesAppend, b"")
    assert [e["loc"] for e in missing.value.errors()] == [("body",)]


def test_the_fingerprint_is_the_hash_of_the_json_dump_and_the_body_is_its_model_dump() -> None:
    body = MessagesAppend.model_validate(
        {"messages": [{"role": "user", "content": "é", "metadata": {"b": [1.5, None], "a": 2}}]}
    )
    assert dict(body) == body.model_dump(mode="json")
    text = json.dumps(["POST", "/p", dict(body)], sort_keys=True, separators=(",", ":"))
    assert fingerprint("POST", "/p", dict(body)) == hashlib.sha256(text.encode()).hexdigest()
