"""The compaction-conformance-kit benchmark's adapter (bench/compaction_kit.py) runs: one seed, one
round, through the service's summariser and fold, within the kit's character budget."""

from __future__ import annotations

import asyncio
from typing import Any

from compaction_kit import build_random_session

from app.adapters.summarizers import summarizer_from_settings
from app.adapters.tokenizers import load_counter
from app.domain.messages import SUMMARY_SECTION
from app.services.compaction.summarising import SUMMARY_HEADER
from app.settings import Settings
from bench.compaction_kit import CTXC, Tally, measure
from bench.kit_ctxc import CtxcChain, new_turns, text_of

COUNTER = load_counter()


def _context() -> dict[str, Any]:
    return {"counter": COUNTER, "summarizer": summarizer_from_settings(Settings(), COUNTER)}


def test_one_round_leaves_the_system_prompt_the_current_prompt_and_one_summary() -> None:
    session, _ = build_random_session(1)
    turns = session.transcript()
    budget = len(text_of(turns)) // 5
    per_char = COUNTER.encoder("o200k_base").count(text_of(turns)) / len(text_of(turns))

    async def compacted() -> tuple[str, CtxcChain]:
        chain = CtxcChain(_context()["summarizer"], COUNTER, budget, per_char)
        chain.add(turns)
        return await chain.compact(), chain

    text, chain = asyncio.run(compacted())
    assert len(text) <= budget
    assert [i.message.role for i in chain.history] == ["system", "user", "user"]
    assert [i.section for i in chain.history].count(SUMMARY_SECTION) == 1
    assert SUMMARY_HEADER in text
    before = chain.history[-1].seq
    chain.add(new_turns(1, 2))
    assert [i.seq for i in chain.history[-6:]] == list(range(before + 1, before + 7))


def test_one_seed_one_round_is_measured_on_the_kits_three_corpora() -> None:
    tally: Tally = asyncio.run(measure(CTXC, 0.3, [1], 1, _context()))
    assert tally.canaries == 20  # the randomized corpus: 20 canaries a session
    assert tally.conflicts > 0 and tally.pairs > 0  # the semantic corpora
    assert tally.compliant and 0.5 < tally.worst <= 1
    assert 0 < tally.survival(1) <= 1
