"""The ledger summariser, on the domain alone: classification, subjects and replacement, merging
across chained summaries, the exact budget, determinism and linear work."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from app.adapters.tokenizers import load_counter
from app.domain.messages import Message, TextPart, ToolCallPart, ToolResultPart
from app.domain.summaries.entries import statement_entry
from app.domain.summaries.ledger import gather, merge, slack, summarize_ledger
from app.domain.summaries.subjects import slot_of, subject_of

COUNT = load_counter().encoder("o200k_base").count


def said(*texts: str) -> list[Message]:
    roles = ("user", "assistant")
    return [Message(role=roles[n % 2], content=(TextPart(text=t),)) for n, t in enumerate(texts)]


def kind(text: str) -> str | None:
    entry = statement_entry(text, ())
    return entry.kind if entry is not None else None


def test_statements_are_typed_by_their_label_or_their_cues() -> None:
    assert kind("SAFETY RULE: Never disclose the vault code abc-12.") == "rule"
    assert kind("TODO: wire the retry budget") == "goal"
    assert kind("USER PREFERENCE: short answers") == "preference"
    assert kind("Do not touch the CI config.") == "rule"
    assert kind("Next step is the token refresh.") == "goal"
    assert kind("I would rather get metric units.") == "preference"
    assert kind("Traceback: KeyError in loader") == "error"
    assert kind("I'll read the port from the environment.") == "decision"
    assert kind("The staging URL is https://qa.internal/v2.") == "fact"
    assert kind("Renamed fetch_all in src/app/io.py") == "file"
    assert kind("Discussing caching headers for the asset route.") == "note"
    assert kind("Load test had no errors on the small cluster.") == "note"


def test_acknowledgements_are_no_entries_and_labels_leave_the_text() -> None:
    assert statement_entry("Acknowledged. Continuing with the plan.", ()) is None
    assert statement_entry("Done.", ()) is None
    entry = statement_entry("HARD CONSTRAINT: Budget cap is $400 total.", (7,))
    assert entry is not None and (entry.text, entry.seqs) == ("Budget cap is $400 total.", (7,))


def test_a_subject_masks_values_and_names() -> None:
    assert subject_of("Budget cap is $400 total.") == subject_of("Budget cap is $850 total.")
    assert subject_of("The owner is Ada Lovelace now") == subject_of("The owner is Alan Turing now")
    assert subject_of("The production database is Postgres") != subject_of(
        "The staging database is MySQL"
    )


def test_a_subject_keeps_what_names_the_thing_and_masks_the_value() -> None:
    assert subject_of("svc-1 listens on port 8001") != subject_of("svc-2 listens on port 8002")
    assert subject_of("Host db-7 runs Postgres 15") != subject_of("Host db-9 runs Postgres 16")
    assert subject_of("vault code is abc-12") == subject_of("vault code is xyz-34")
    assert subject_of("Deploy region: us-east-1") == subject_of("Deploy region: eu-west-2")
    assert subject_of("On 2027-03-01 the cap is $400") == subject_of("On 2027-04-02 the cap is $9")
    assert subject_of("Reviewing the parser. (turn 3.0)") == subject_of(
        "Reviewing the parser. (turn 10.2)"
    )  # no verb: every value is masked


def test_different_subjects_stay_apart_and_restated_values_replace() -> None:
    history = said(
        "svc-1 listens on port 8001.",
        "svc-2 listens on port 8002.",
        "The deploy region is us-east-1.",
        "Worker pool-a uses 4 GiB of memory.",
        "Worker pool-b uses 8 GiB of memory.",
        "The deploy region is eu-west-2.",
        "svc-1 listens on port 9001.",
    )
    ledger = summarize_ledger(history, 500, COUNT, range(1, 8))
    assert [e.text for e in ledger.loss.replaced] == [
        "The deploy region is us-east-1.",
        "svc-1 listens on port 8001.",
    ]
    for kept in (
        "svc-2 listens on port 8002.",
        "svc-1 listens on port 9001.",
        "pool-a",
        "pool-b",
        "eu-west-2",
    ):
        assert kept in ledger.text


def test_state_slots_match_paraphrases_and_keep_scopes_apart() -> None:
    assert slot_of("Report all times in UTC.") == slot_of("From now on, report times in Pacific")
    assert slot_of("Project budget cap is $800 total.") == slot_of(
        "Quick update: keep project spend under five hundred dollars."
    )
    assert slot_of("Project spending ceiling is $500.") != slot_of(
        "Conference spending ceiling is $300."
    )
    assert slot_of("Launch deadline is 2027-03-04.") == slot_of("The launch date moved to May 9.")
    assert slot_of("Release approver is Ada Byron") != slot_of("Design reviewer is Ada Byron")
    assert slot_of("The webhook retries three times before dead-lettering.") is None


def test_a_later_value_replaces_an_earlier_one_and_duplicates_fold() -> None:
    history = said(
        "FACT: Budget cap is $400 total.",
        "RULE: Never push to main.",
        "FACT: The staging database is MySQL 8 in us-west-2.",
        "RULE: Never push to main.",
        "FACT: Budget cap is $850 total.",
        "FACT: The production database is Postgres 15 in eu-north-1.",
    )
    ledger = summarize_ledger(history, 500, COUNT, range(1, 7))
    assert "$850" in ledger.text and "$400" not in ledger.text
    assert "MySQL 8" in ledger.text and "Postgres 15" in ledger.text  # distinct subjects
    assert ledger.text.count("Never push to main.") == 1
    assert "Never push to main. @2,4" in ledger.text
    assert [(e.text, e.seqs) for e in ledger.loss.replaced] == [("Budget cap is $400 total.", (1,))]
    assert [e.text for e in ledger.loss.merged] == ["Never push to main."]
    assert ledger.loss.counts() == {"kept": 3, "merged": 1, "replaced": 1, "dropped": 0}


def test_a_paraphrased_update_replaces_the_slot_and_keeps_the_higher_kind() -> None:
    history = said(
        "HARD CONSTRAINT: Report all times in UTC.",
        "Noted.",
        "From now on, report all times in Pacific time.",
    )
    ledger = summarize_ledger(history, 200, COUNT, (1, 2, 3))
    assert ledger.text == "Rules:\nFrom now on, report all times in Pacific time. @3"


def test_a_chained_summary_is_merged_entry_by_entry_not_re_summarised() -> None:
    first = summarize_ledger(
        said("RULE: Never push to main.", "FACT: Budget cap is $400 total.", "Fixing the parser."),
        300,
        COUNT,
        (1, 2, 3),
    )
    block = "Constraints (verbatim, checked):\n- [sha256:0123456789ab] Never push to main.\n\n"
    summary = Message(
        role="user",
        content=(TextPart(text=f"[Summary of the earlier conversation]\n{block}{first.text}"),),
        metadata={"summarized_seqs": [1, 3]},
    )
    later = said("FACT: Budget cap is $850 total.", "Done.")
    second = summarize_ledger([summary, *later], 300, COUNT, (3, 4, 5))
    assert second.text == (
        "Rules:\nNever push to main. @1\nFacts:\nBudget cap is $850 total. @4\n"
        "Notes:\nFixing the parser. @3"
    )
    assert "sha256" not in second.text  # the constraints block is re-derived elsewhere
    assert [e.seqs for e in second.loss.replaced] == [(2,)]


def test_tool_calls_and_failed_results_are_entries() -> None:
    call = ToolCallPart(id="call_1", name="read_file", arguments={"path": "src/app.py"})
    failed = ToolResultPart(
        call_id="call_1", content="FileNotFoundError: src/app.py", is_error=True
    )
    history = [Message(role="assistant", content=(call,)), Message(role="tool", content=(failed,))]
    entries, _ = gather(history, (4, 5))
    assert [(e.kind, e.text, e.seqs) for e in entries] == [
        ("file", "src/app.py: read_file -> error: FileNotFoundError: src/app.py [read_file]", (4,)),
        ("error", "src/app.py: error: FileNotFoundError: src/app.py", (5,)),
    ]


def test_ranking_keeps_rules_before_notes_and_points_at_what_it_left_out() -> None:
    notes = [f"Reviewing the {letters(n)} module of the loader today." for n in range(30)]
    history = said(*notes, "RULE: Never disclose the key abc-123.")
    ledger = summarize_ledger(history, 60, COUNT, range(1, 32))
    assert COUNT(ledger.text) <= 60
    assert ledger.text.startswith("Rules:\nNever disclose the key abc-123.")
    assert ledger.loss.dropped and all(e.kind == "note" for e in ledger.loss.dropped)


@settings(max_examples=60, deadline=None)
@given(
    budget=st.integers(min_value=0, max_value=400),
    texts=st.lists(
        st.sampled_from(
            [
                "RULE: Never disclose the vault code qq-12.",
                "FACT: Budget cap is $512 total.",
                "Next step is writing the migration script for the users table.",
                "User prefers a single decisive recommendation.",
                "Done.",
                "The staging API base URL is https://qa.internal/v2.",
                "ERROR: KeyError 'port'",
                "I'll switch the loader to src/loader/io.py instead.",
                "Reading the logs.",
                "x" * 300,
                "Ünïcödé ✓ line with 2027-03-04 and $9,999.",
            ]
        ),
        max_size=40,
    ),
)
def test_the_ledger_is_never_over_its_budget_and_is_deterministic(
    budget: int, texts: list[str]
) -> None:
    history = said(*texts)
    ledger = summarize_ledger(history, budget, COUNT, range(1, len(texts) + 1))
    assert COUNT(ledger.text) <= budget
    assert summarize_ledger(history, budget, COUNT, range(1, len(texts) + 1)) == ledger
    counts = ledger.loss.counts()
    live = len(merge(gather(history)[0]).live)
    assert counts["kept"] + counts["merged"] + counts["dropped"] == live


def letters(k: int) -> str:
    """A distinct lowercase word for each ``k`` (values are masked in subjects, words are not)."""
    out = ""
    while True:
        k, r = divmod(k, 26)
        out += chr(97 + r)
        if not k:
            return out


def test_work_grows_linearly_with_the_history() -> None:
    calls = 0

    def counting(text: str) -> int:
        nonlocal calls
        calls += 1
        return COUNT(text)

    sizes = []
    for n in (500, 2_000):
        calls = 0
        lines = [f"FACT: Service {letters(k)} listens on port {1000 + k}." for k in range(n)]
        summarize_ledger(said(*lines), 1_000, counting, range(1, n + 1))
        sizes.append(calls)
    assert sizes[1] <= 4 * sizes[0] + 50  # counts per entry, not per pair of entries


def test_a_chain_whose_budget_shrinks_by_less_than_the_slack_keeps_every_entry() -> None:
    lines = [f"FACT: The {letters(k)} service listens on port {8000 + k}." for k in range(40)]
    budget = 320
    ledger = summarize_ledger(said(*lines), budget, COUNT, range(1, 41))
    kept = {e.text for e in (*ledger.loss.kept, *ledger.loss.merged)}
    assert ledger.loss.dropped and kept  # the budget is full
    seq = 41
    for shrink in range(1, slack(budget)):
        summary = Message(
            role="user",
            content=(TextPart(text=f"[Summary of the earlier conversation]\n{ledger.text}"),),
            metadata={"summarized_seqs": [1, seq - 1]},
        )
        news = said(f"FACT: The {letters(100 + shrink)} queue holds {900 + shrink} jobs.", "Done.")
        seqs = (seq - 1, seq, seq + 1)
        ledger = summarize_ledger([summary, *news], budget - shrink, COUNT, seqs)
        seq += 2
        assert COUNT(ledger.text) <= budget - shrink
        now = {e.text for e in (*ledger.loss.kept, *ledger.loss.merged)}
        assert kept <= now, shrink  # no incumbent gave way to a smaller budget or a newcomer
        kept = now
