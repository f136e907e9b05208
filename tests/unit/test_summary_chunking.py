"""Chunking a history for a summariser's window, the transcript it reads, and its prompts."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from app.adapters.tokenizers import load_counter
from app.domain.messages import ImagePart, Message, OpaquePart, ReasoningPart
from app.domain.summaries import REASONS
from app.domain.summaries.chunking import chunk_messages, split_message
from app.domain.summaries.prompts import build_prompt, instructions
from app.domain.summaries.transcript import render_message, render_transcript
from tests.unit.compiler_builders import user
from tests.unit.test_extractive_summary import build_failure

ENCODER = load_counter().encoder("o200k_base")


def tokens(message: Message) -> int:
    return ENCODER.count(render_message(message))


def chars(message: Message) -> int:
    return len(render_message(message))


lines = st.text(alphabet="abc \n", max_size=30).map(lambda t: t or "x")
histories = st.lists(lines.map(user), max_size=12)


@settings(max_examples=150, deadline=None)
@given(histories, st.integers(12, 60))
def test_chunks_fit_the_budget_keep_order_and_never_split_a_message_that_fits(
    history: list[Message], budget: int
) -> None:
    chunks = chunk_messages(history, budget, chars)
    for chunk in chunks:
        assert sum(map(chars, chunk)) <= budget
    whole = [m for chunk in chunks for m in chunk if "piece" not in m.metadata]
    assert whole == [m for m in history if chars(m) <= budget]
    pieces = [m for chunk in chunks for m in chunk if "piece" in m.metadata]
    oversized = [render_message(m) for m in history if chars(m) > budget]
    assert "".join(p.text for p in pieces) == "".join(oversized)
    assert all(len(chunk) == 1 for chunk in chunks if "piece" in chunk[0].metadata)


def test_a_message_over_the_budget_is_cut_into_pieces_at_line_ends() -> None:
    log = "\n".join(f"line {n}: compiled module_{n}.py" for n in range(400))
    message = user(log)
    pieces = split_message(message, 500, tokens)
    assert len(pieces) > 1
    assert all(tokens(p) <= 500 for p in pieces)
    assert "".join(p.text for p in pieces) == render_message(message)
    assert [p.metadata["piece"] for p in pieces] == [
        [k, len(pieces)] for k in range(1, len(pieces) + 1)
    ]
    assert all(p.text.endswith("\n") for p in pieces[:-1])


def test_a_budget_below_one_character_still_ends() -> None:
    pieces = split_message(user("abc"), 0, chars)
    assert "".join(p.text for p in pieces) == "user: abc"


def test_a_history_that_fits_is_one_chunk() -> None:
    history = build_failure()
    assert chunk_messages(history, 10_000, tokens) == [tuple(history)]
    assert chunk_messages([], 10, tokens) == []


def test_the_transcript_shows_every_kind_of_part() -> None:
    history = build_failure()
    odd = Message(
        role="assistant",
        name="planner",
        content=(
            ReasoningPart(text="think"),
            ReasoningPart(redacted_data="xx"),
            ImagePart(url="https://x.org/a.png"),
            ImagePart(data="AAAA", media_type="image/png"),
            OpaquePart(provider="anthropic", data={"type": "document", "data": "Q" * 5000}),
        ),
    )
    text = render_transcript([*history, odd])
    assert '[tool call call_1] read_file {"path": "src/app.py", "limit": 200}' in text
    assert "[tool result call_2, error] collected 3 items" in text
    assert "assistant (planner): [reasoning] think\n[redacted reasoning]\n" in text
    assert "[image https://x.org/a.png]\n[image: inline image/png data]" in text
    assert "AAAA" not in text and len(text) < 3_000


def test_each_reason_has_its_own_instructions_and_they_ask_for_the_references() -> None:
    texts = {reason: instructions(reason, 1234) for reason in REASONS}
    assert len(set(texts.values())) == len(REASONS)
    for text in texts.values():
        assert "at most 1234 tokens" in text
        assert "every file path, URL and identifier" in text


def test_a_prompt_holds_the_transcript_and_names_its_part() -> None:
    history = build_failure()
    whole = build_prompt(history, "session_compaction", 500)
    assert whole.user == f"<transcript>\n{render_transcript(history)}\n</transcript>"
    assert "older part" in whole.system
    part = build_prompt(history[:2], "reactive_micro", 500, part=(2, 3))
    assert part.user.startswith("This is part 2 of 3 of the history")
    assert "src/app.py" in part.user
