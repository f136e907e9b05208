"""Conversation facts: the ledger keeps what people say of themselves and others in a chat
(app/domain/summaries/chat.py), newest value first, small talk dropped first; and on generated
long chats (bench/facts_data.py) it keeps at least twice what tail truncation keeps at 10%."""

from __future__ import annotations

import asyncio

from app.adapters.tokenizers import load_counter
from app.domain.messages import Message, TextPart
from app.domain.summaries.chat import Chat, chat_of, sentence_entry, split_turn
from app.domain.summaries.ledger import summarize_ledger
from app.services.compaction.summarising import summary_message
from bench.facts import measure, share
from bench.facts_data import conversation

COUNT = load_counter().encoder("o200k_base").count


def turns(*lines: str) -> list[Message]:
    roles = ("user", "assistant")
    return [
        Message(role=roles[n % 2], content=(TextPart(text=line),)) for n, line in enumerate(lines)
    ]


CHAT = turns(
    "[8 May 2023, 1:56 pm]\nAnn: Hey! How have you been?",
    "Bo: Good! Oh, and Biscuit, my new puppy, finally learned to sit.",
    "Ann: That sounds amazing! We moved to Denver last year, still unpacking.",
    "Bo: I ran a charity 5k yesterday. Honestly, I needed that.",
    "Ann: My friend Jo just moved to Boston for work.",
    "Bo: I work as a nurse at Brightwater Clinic now.",
    "[20 May 2023, 9:12 am]\nAnn: Big news, we finally moved to Austin! Boxes everywhere.",
    "Bo: Haha, that's so you. How is Jo doing?",
)


def test_a_history_of_speaker_turns_is_a_chat_and_an_agent_history_is_not() -> None:
    chat = chat_of(CHAT)
    assert chat is not None and chat.speakers == {"Ann", "Bo"}
    assert split_turn(CHAT[0].text) == ("8 May 2023, 1:56 pm", "Ann", "Hey! How have you been?")
    agent = turns("Fix the failing test in src/app.py.", "Note: the test imports a stale module.")
    assert chat_of(agent * 3) is None


def test_a_fact_names_its_speaker_and_small_talk_and_questions_are_notes() -> None:
    chat = Chat(frozenset({"Ann", "Bo"}), "8 May 2023")
    pet = sentence_entry("Biscuit, my new puppy, learned to sit.", "Bo", chat, (2,))
    assert pet is not None and (pet.kind, pet.text) == (
        "fact",
        "Bo: Biscuit, my new puppy, learned to sit.",
    )
    job = sentence_entry("I work as a nurse now.", "Bo", chat, (6,))
    assert job is not None and job.kind == "fact"  # said of oneself, no name needed
    for talk in ("That sounds amazing!", "How is Jo doing?", "Ugh, Mondays."):
        entry = sentence_entry(talk, "Ann", chat, (3,))
        assert entry is not None and entry.kind == "note", talk


def test_something_done_carries_the_sessions_date() -> None:
    text = summarize_ledger(CHAT, 2_000, COUNT, range(1, 9)).text
    assert "Bo: I ran a charity 5k yesterday. (8 May 2023)" in text
    assert "Ann: Big news, we finally moved to Austin! (20 May 2023)" in text


def test_the_newest_home_wins_and_a_friends_move_stays_apart() -> None:
    text = summarize_ledger(CHAT, 2_000, COUNT, range(1, 9)).text
    assert "Austin" in text and "Denver" not in text
    assert "Ann: My friend Jo just moved to Boston for work." in text


def test_a_move_after_a_summary_replaces_the_home_it_carried() -> None:
    first = summarize_ledger(CHAT[:6], 2_000, COUNT, range(1, 7)).text
    assert "Denver" in first
    later = [summary_message(first), *CHAT[6:]]
    text = summarize_ledger(later, 2_000, COUNT, range(6, 9)).text
    assert "Austin" in text and "Denver" not in text


def test_facts_come_before_small_talk_and_the_budget_holds() -> None:
    for budget in (40, 60, 90):
        ledger = summarize_ledger(CHAT, budget, COUNT, range(1, 9))
        assert COUNT(ledger.text) <= budget
        kept = {e.text for e in ledger.loss.kept}
        dropped = {e.text for e in ledger.loss.dropped}
        assert not any("sounds amazing" in t for t in kept) or not any(
            "Austin" in t for t in dropped
        )


def test_generated_chats_are_plausible_and_their_answers_verbatim() -> None:
    convo = conversation(7, sessions=6)
    assert convo.turns[0].stamp and all(t.speaker in convo.speakers for t in convo.turns)
    assert all(q.answer.lower() in convo.transcript.lower() for q in convo.questions)
    assert conversation(7, sessions=6).transcript == convo.transcript  # deterministic


def test_the_ledger_keeps_twice_what_tail_truncation_keeps_at_a_tenth() -> None:
    (ledger, tail) = asyncio.run(measure((1, 2), (0.10,)))[0.10]
    assert ledger.asked == tail.asked > 0
    assert share(ledger) >= 2 * share(tail), (ledger, tail)
