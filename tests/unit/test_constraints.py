"""Constraints carried verbatim with a checksum (the block's format, reading it back, marks and
their problems), and the ledger's sections checked on an LLM's answer."""

from __future__ import annotations

import hashlib

import pytest

from app.domain.messages import Message, TextPart
from app.domain.summaries import constraints as marks
from app.domain.summaries.sections import Unstructured, check_sections

HEADER = "[Summary of the earlier conversation]\n"


def said(text: str, **metadata: object) -> Message:
    return Message(role="user", content=(TextPart(text=text),), metadata=metadata)


def test_the_block_has_exactly_the_agreed_format() -> None:
    rule = "Never push to main."
    digest = hashlib.sha256(rule.encode()).hexdigest()[:12]
    assert marks.block([marks.Constraint(rule)]) == (
        f"Constraints (verbatim, checked):\n- [sha256:{digest}] Never push to main.\n\n"
    )
    assert marks.block([]) == ""


def test_a_block_reads_back_exactly_even_with_line_breaks_and_backslashes() -> None:
    texts = ["Use C:\\temp\\n only", "two\nlines\r\nhere", "plain"]
    block = marks.block([marks.Constraint(t) for t in texts])
    assert block.count("\n") == len(texts) + 2  # one line each, then the blank line
    assert [c.text for c in marks.carried(block + "Goals:\n- x")] == texts


def test_an_altered_constraint_is_named_by_its_checksum() -> None:
    block = marks.block([marks.Constraint("Keep the API stable."), marks.Constraint("No sudo.")])
    altered = block.replace("Keep the API stable.", "Keep the API flexible.")
    with pytest.raises(marks.Lost) as lost:
        marks.carried(altered)
    assert lost.value.checksums == (marks.checksum("Keep the API stable."),)


def test_a_block_counts_only_where_it_opens_the_summary() -> None:
    late = "Goals:\n- x\n" + marks.block([marks.Constraint("No sudo.")])
    assert marks.carried(late) == []


def test_whole_messages_fragments_and_earlier_summaries_are_gathered_once_in_order() -> None:
    earlier = said(HEADER + marks.block([marks.Constraint("A")]) + "Goals:\n- g")
    messages = [
        earlier,
        said("Rule B, and more words.", constraints=["Rule B"]),
        said("C whole", constraint=True),
        said("A", constraint=True),  # already carried
        said("not marked"),
    ]
    assert [c.text for c in marks.gather(messages, HEADER)] == ["A", "Rule B", "C whole"]


def test_marking_problems_are_located() -> None:
    message = said("keep it short", constraints=["keep it", "missing", 3, ""])
    assert marks.marking_problems(message) == [
        (("metadata", "constraints", 1), "does not occur in the message's text"),
        (("metadata", "constraints", 2), "must be a non-empty string"),
        (("metadata", "constraints", 3), "must be a non-empty string"),
    ]
    assert marks.marking_problems(said("x", constraint="yes")) == [
        (("metadata", "constraint"), "must be true or false")
    ]
    many = said("a", constraints=["a"] * (marks.MAX_FRAGMENTS + 1))
    assert marks.marking_problems(many)[0][0] == ("metadata", "constraints")


def test_missing_names_what_a_summary_does_not_carry() -> None:
    kept, dropped = marks.Constraint("kept"), marks.Constraint("dropped")
    text = marks.block([kept]) + "Goals:\n- g"
    assert marks.missing(text, [kept, dropped]) == [dropped.checksum]


LEDGER = """\
Goals:
- Fix the flaky test in tests/test_sync.py (#1)
Current values:
- port: 8080 (#12, #40)
  which replaced 8000
Files and identifiers:
- src/pkg/module_0.py (#3)
"""


def test_the_ledgers_sections_pass_with_their_entry_counts() -> None:
    assert check_sections(LEDGER) == {
        "Goals:": 1,
        "Current values:": 1,
        "Files and identifiers:": 1,
    }
    assert check_sections("**Goals:**\n- a\n## Errors:\n- b") == {"Goals:": 1, "Errors:": 1}
    echoed = marks.block([marks.Constraint("No sudo.")]) + LEDGER
    assert sum(check_sections(echoed).values()) == 3


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("The port was fixed.", "text before the first section"),
        ("Goals:\n- a\nmore", "a line outside any entry"),
        ("Goals:\n- a\nSummary:\n- b", "an unknown section"),
        ("Goals:\nNotes:\n- a", "an unknown section"),
        ("Goals:\nDecisions:\n", "no entries"),
        ("", "no entries"),
    ],
)
def test_answers_without_the_sections_are_refused_with_the_reason(text: str, why: str) -> None:
    with pytest.raises(Unstructured, match=why):
        check_sections(text)
