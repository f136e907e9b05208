"""A coding agent's work survives the default ledger summary: on the project's real coding
transcripts (beside the repository; skipped where there are none), the summary of a default
full compaction keeps at least 90% of the file paths the replaced part's tool calls named and
at least half of its tool calls (tool and main argument on one line), and no stale action."""

from __future__ import annotations

import pytest

from app.domain.messages import Message, TextPart, ToolCallPart, ToolResultPart
from app.domain.summaries.entries import statement_entry
from app.domain.summaries.ledger import summarize_ledger
from bench.coding_summary import CODING, TRANSCRIPTS, measure


@pytest.mark.skipif(not TRANSCRIPTS.is_dir(), reason="no transcripts beside the repository")
@pytest.mark.parametrize("path", CODING)
def test_the_summary_keeps_the_files_and_calls_of_a_real_session(path: str) -> None:
    c = measure(path)
    assert c.taken > 0 and c.paths > 0 and c.calls > 0
    assert c.paths_kept * 10 >= c.paths * 9
    assert c.calls_kept * 2 >= c.calls
    assert c.stale == 0


def call(n: int, name: str, **arguments: object) -> Message:
    return Message(
        role="assistant", content=(ToolCallPart(id=f"c{n}", name=name, arguments=arguments),)
    )


def result(n: int, text: str, error: bool = False) -> Message:
    part = ToolResultPart(call_id=f"c{n}", content=text, is_error=error)
    return Message(role="tool", content=(part,))


def test_a_files_latest_action_and_a_commands_latest_outcome_replace_the_older() -> None:
    history = [
        Message(role="user", content=(TextPart(text="Fix the parser in src/p.c"),)),
        call(1, "str_replace_editor", command="view", path="src/p.c"),
        result(1, "int main() {}"),
        call(2, "execute_bash", command="make test"),
        result(2, "error: undefined foo\n[The command completed with exit code 2.]"),
        call(3, "str_replace_editor", command="str_replace", path="src/p.c", old_str="a"),
        result(3, "The file src/p.c has been edited."),
        call(4, "execute_bash", command="make test"),
        result(4, "all passed\n[The command completed with exit code 0.]"),
    ]
    text = summarize_ledger(history, 500).text
    assert "src/p.c: str_replace -> ok [str_replace_editor]" in text
    assert "src/p.c: view" not in text
    assert "$ make test -> exit 0 [execute_bash]" in text
    assert "exit 2" not in text  # the failure was fixed: no open error


def test_an_open_error_is_kept_and_the_shapes_of_other_agents_are_read() -> None:
    history = [
        call(1, "Read", file_path="/r/a.rs"),
        result(1, "fn a() {}"),
        call(2, "exec_command", cmd=["bash", "-lc", "cargo build"]),
        result(2, "error[E0425]: cannot find value\nProcess exited with code 101"),
        call(3, "apply_patch", input="*** Begin Patch\n*** Update File: src/b.rs\n@@\n"),
        result(3, "Done"),
        call(4, "run_shell_command", command="ls"),
        result(4, "ok"),
    ]
    text = summarize_ledger(history, 500).text
    assert "/r/a.rs: Read -> ok [Read]" in text
    assert "src/b.rs: apply_patch -> ok [apply_patch]" in text
    assert "$ cargo build -> exit 101: error[E0425]: cannot find value [exec_command]" in text
    assert "Errors:\n$ cargo build: exit 101" in text


def test_narration_is_a_note_and_a_choice_stays_a_decision() -> None:
    for said in (
        "Let's explore the `src` directory.",
        "Let me look at big08.txt",
        "Now I'll view the file again.",
    ):
        entry = statement_entry(said, ())
        assert entry is not None and entry.kind == "note", said
    entry = statement_entry("I'll make the parser reject empty input instead.", ())
    assert entry is not None and entry.kind == "decision"
