"""The extractive summariser: what it keeps, that it is repeatable, that it fits its budget, and
that no file path, URL or identifier of the input is ever missing from it."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from app.adapters.tokenizers import load_counter
from app.domain.messages import Message, TextPart, ToolCallPart, ToolResultPart
from app.domain.summaries import REASONS
from app.domain.summaries.extractive import summarize_extractive
from app.domain.summaries.facts import gather_facts
from app.domain.summaries.references import find_references
from tests.unit.compiler_builders import user

ENCODER = load_counter().encoder("o200k_base")
SETTINGS = settings(max_examples=150, deadline=None)


def assistant(text: str = "", *calls: ToolCallPart) -> Message:
    parts: tuple[Any, ...] = ((TextPart(text=text),) if text else ()) + calls
    return Message(role="assistant", content=parts)


def call(call_id: str, name: str, arguments: dict[str, Any] | str) -> ToolCallPart:
    return ToolCallPart(id=call_id, name=name, arguments=arguments)


def result(call_id: str, text: str, is_error: bool | None = None) -> Message:
    part = ToolResultPart(call_id=call_id, content=text, is_error=is_error)
    return Message(role="tool", content=(part,))


FAILURE = "FAILED tests/test_app.py::test_boot - KeyError: 'port'"


def build_failure() -> list[Message]:
    return [
        user("Fix the failing build in src/app.py. You must not touch .github/workflows/ci.yml."),
        assistant(
            "Let me look. I'll read the file first.",
            call("call_1", "read_file", {"path": "src/app.py", "limit": 200}),
        ),
        result("call_1", "import os\nport = int(os.environ['CTXC_PORT'])\n"),
        assistant("", call("call_2", "bash", {"command": "pytest -x"})),
        result("call_2", f"collected 3 items\n{FAILURE}", is_error=True),
        assistant("The root cause is a missing default. I will default to 8080 instead."),
    ]


def test_a_build_failure_keeps_goal_errors_decisions_ledger_and_references() -> None:
    summary = summarize_extractive(build_failure(), "session_compaction", 10_000)
    assert summary.splitlines()[0] == (
        "[ctxc extractive summary of 6 messages; reason: session_compaction]"
    )
    assert "- Fix the failing build in src/app.py. You must not touch" in summary
    assert "- bash [call_2]: FAILED tests/test_app.py::test_boot - KeyError: 'port'" in summary
    assert "- I'll read the file first." in summary
    assert "- The root cause is a missing default." in summary
    assert "- read_file(path=src/app.py, limit=200) [call_1] -> ok: import os (+1 more line)" in (
        summary
    )
    assert "- bash(command=pytest -x) [call_2] -> error: collected 3 items (+1 more line)" in (
        summary
    )
    assert "Files: src/app.py, .github/workflows/ci.yml, tests/test_app.py" in summary
    assert "Identifiers: os.environ, CTXC_PORT, test_boot, KeyError, read_file, call_1, bash" in (
        summary
    )
    assert "left out" not in summary


def test_constraints_later_in_a_long_request_are_kept_as_their_own_lines() -> None:
    long = "Please refactor the parser. " + "It has grown over the years. " * 12
    long += "Never change the public API. Keep Python 3.11 support."
    facts = gather_facts([user(long)])
    assert facts.goals[0].startswith("Please refactor the parser.")
    assert facts.goals[0].endswith("…")
    assert facts.goals[1:] == (
        "constraint: Never change the public API.",
        "constraint: Keep Python 3.11 support.",
    )


def test_errors_come_from_error_results_and_error_lines_but_not_from_zero_failures() -> None:
    history = [
        user("It crashes with TypeError: bad operand"),
        assistant("", call("c1", "run", {"cmd": "make"}), call("c2", "run", {"cmd": "pytest"})),
        result("c1", "permission denied: ./configure", is_error=True),
        result("c2", "12 passed, 0 failed\nall good"),
        assistant("", call("c3", "grep", "raw args")),
        result("c3", "", is_error=True),
    ]
    assert gather_facts(history).errors == (
        "user: It crashes with TypeError: bad operand",
        "run [c1]: permission denied: ./configure",
        "grep [c3]: (no text)",
    )


def test_the_ledger_lists_calls_in_order_with_their_outcome() -> None:
    history = [
        result("c0", "old output"),  # its call was compacted before
        assistant(
            "",
            call(
                "c1",
                "write",
                {"content": "x" * 500, "path": "a.md", "mode": "w", "extra": {"k": 1}},
            ),
        ),
        result("c1", "wrote 500 bytes"),
        assistant("", call("c2", "search", "free text query")),
    ]
    assert gather_facts(history).ledger == (
        "(call not in this part) [c0] -> ok: old output",
        f"write(path=a.md, content={'x' * 59}…, mode=w, …) [c1] -> ok: wrote 500 bytes",
        "search(free text query) [c2] -> no result in this part",
    )


def test_prose_is_cut_to_the_budget_from_both_ends_of_each_section_in_turn() -> None:
    history = [user(f"Goal number {n} is to ship.") for n in range(1, 7)]
    full = summarize_extractive(history, "reactive_micro", 10_000)
    minimal = summarize_extractive(history, "reactive_micro", 0)
    line = len("- Goal number 1 is to ship.\n")
    budget = len(minimal) + len("Goals and constraints:\n") + 2 * line
    cut = summarize_extractive(history, "reactive_micro", budget)
    assert len(minimal) < len(cut) <= budget < len(full)
    assert "Goal number 1 " in cut and "Goal number 6 " in cut
    assert "Goal number 3 " not in cut
    assert "[4 lines of prose left out to fit the budget]" in cut


def test_an_empty_history_has_only_a_header() -> None:
    assert summarize_extractive([], "reactive_full", 100) == (
        "[ctxc extractive summary of 0 messages; reason: reactive_full]"
    )


# Planted references, generated so that a scanner splitting on the separators finds them whole.
LOWER = "abcdefghijklmnopqrstuvwxyz"
UPPER = LOWER.upper()
DIGITS = "0123456789"


def chars(alphabet: str, low: int = 1, high: int = 6) -> st.SearchStrategy[str]:
    return st.text(alphabet=alphabet, min_size=low, max_size=high)


segments = st.builds(str.__add__, chars(LOWER, 1, 1), chars(LOWER + DIGITS + "_-", 0, 7))
paths = st.builds(
    lambda lead, parts, name, ext: lead + "/".join([*parts, f"{name}.{ext}"]),
    st.sampled_from(["", "/", "./", "../", "~/"]),
    st.lists(segments, min_size=1, max_size=3),
    segments,
    st.sampled_from(["py", "md", "json", "ts", "yaml", "rs", "txt"]),
)
file_names = st.builds(lambda n, e: f"{n}.{e}", segments, st.sampled_from(["py", "toml", "go"]))
urls = st.builds(
    lambda host, parts, query: f"https://{host}.example.org/" + "/".join(parts) + query,
    segments,
    st.lists(segments, max_size=3),
    st.sampled_from(["", "?q=1", "?a=b&c=d", "#frag"]),
)
identifiers = st.one_of(
    st.builds(lambda a, b: f"{a}_{b}", chars(LOWER), chars(LOWER + DIGITS + "_", 1, 8)),
    st.builds(
        lambda a, b, c, d: a + b + c + d,
        chars(UPPER, 1, 1),
        chars(LOWER),
        chars(UPPER, 1, 1),
        chars(LOWER + DIGITS),
    ),
    st.builds(
        lambda a, b, c: a + b + c,
        chars(LOWER, 1, 5),
        chars(UPPER, 1, 1),
        chars(LOWER + UPPER + DIGITS),
    ),
    st.builds(
        lambda a, b, c: a + b + c,
        chars("abcdef", 1, 1),
        chars("0123456789abcdef", 5, 38),
        chars(DIGITS, 1, 1),
    ),
    st.integers(1, 99_999).map(lambda n: f"#{n}"),
    st.builds(lambda a, n: f"{a}-{n}", chars(UPPER, 2, 5), st.integers(0, 99_999)),
)
references = st.one_of(paths, file_names, urls, identifiers)
fillers = st.sampled_from(["the", "fix", "and then", "we", "read", "it", "Hello", "42", "ok"])
separators = st.sampled_from([" ", ", ", "\n", " (", ") ", ": ", " - ", "; "])


@st.composite
def texts(draw: st.DrawFn, planted: list[str]) -> str:
    words = draw(st.lists(st.one_of(fillers, references), max_size=8))
    planted += [
        w
        for w in words
        if w not in ("the", "fix", "and then", "we", "read", "it", "Hello", "42", "ok")
    ]
    out = ""
    for word in words:
        out += word + draw(separators)
    return out


@st.composite
def histories(draw: st.DrawFn) -> tuple[list[Message], list[str]]:
    planted: list[str] = []
    history: list[Message] = []
    for n in range(draw(st.integers(0, 6))):
        history.append(user(draw(texts(planted))))
        call_id = draw(st.sampled_from([f"call_{n}", f"toolu_0{n}XyZ", f"c{n} odd id"]))
        arguments = draw(
            st.one_of(
                st.builds(lambda p, t: {"path": p, "note": t}, paths, texts(planted)),
                texts(planted),
            )
        )
        planted += [arguments["path"]] if isinstance(arguments, dict) else []
        parts = (TextPart(text=draw(texts(planted))), call(call_id, "do_it", arguments))
        history.append(Message(role="assistant", content=parts))
        history.append(result(call_id, draw(texts(planted)), draw(st.sampled_from([None, True]))))
        planted.append(call_id)
    return history, planted


@SETTINGS
@given(histories(), st.sampled_from(REASONS))
def test_every_planted_path_url_and_identifier_is_in_the_summary_when_they_fit(
    case: tuple[list[Message], list[str]], reason: Any
) -> None:
    history, planted = case
    summary = summarize_extractive(history, reason, 1_000_000)
    assert [ref for ref in planted if ref not in summary] == []
    assert "references left out" not in summary


def kept_references(summary: str) -> list[str]:
    lines = [
        line
        for line in summary.splitlines()
        if line.startswith(("Files: ", "URLs: ", "Identifiers: "))
    ]
    return [v for line in lines for v in line.split(": ", 1)[1].split(", ")]


@SETTINGS
@given(histories(), st.integers(0, 800), st.booleans())
def test_a_summary_stays_within_its_budget_keeping_the_best_ranked_references(
    case: tuple[list[Message], list[str]], budget: int, tokens: bool
) -> None:
    history, _ = case
    count = ENCODER.count if tokens else len
    summary = summarize_extractive(history, "session_compaction", budget, count)
    minimal = summarize_extractive(history, "session_compaction", 0, count)
    assert count(summary) <= max(budget, count(minimal))
    ranked = gather_facts(history).references.ranked
    kept = set(kept_references(summary))
    # The references kept are the best ranked ones, and the rest are counted as left out.
    assert kept == set(ranked[: len(kept)])
    left = len(ranked) - len(kept)
    assert (f"[{left} references left out" in summary) == (left > 0)


def test_references_are_ranked_by_mentions_then_paths_first_then_by_the_latest_mention() -> None:
    history = [
        user("Read src/a.py and src/b.py, then src/c.py."),
        user("src/b.py again; also src/c.py."),
        user("Finally src/d.py calls run_all."),
    ]
    assert gather_facts(history).references.ranked == (
        "src/c.py",
        "src/b.py",
        "src/d.py",
        "src/a.py",
        "run_all",
    )


def test_a_reference_heavy_history_is_cut_to_the_budget_in_tokens() -> None:
    history = [
        result(f"call_{n}", " ".join(f"src/area_{n}/module_{k}.py" for k in range(20)))
        for n in range(300)
    ]
    summary = summarize_extractive(history, "session_compaction", 2_000, ENCODER.count)
    assert 1_500 <= ENCODER.count(summary) <= 2_000
    # The latest mentions rank first among equals: the newest files are kept.
    kept = kept_references(summary)
    assert "src/area_299/module_19.py" in kept and "src/area_0/module_0.py" not in kept
    assert "references left out to fit the budget" in summary


@settings(max_examples=50, deadline=None)
@given(histories(), st.integers(0, 2_000))
def test_the_same_history_always_gives_the_same_summary(
    case: tuple[list[Message], list[str]], budget: int
) -> None:
    history, _ = case
    copy = [Message.model_validate(m.to_json()) for m in history]
    first = summarize_extractive(history, "reactive_full", budget)
    assert summarize_extractive(copy, "reactive_full", budget) == first


def test_references_of_the_input_are_found_in_tool_arguments_and_results() -> None:
    history = build_failure()
    found = find_references([m.text for m in history])
    assert "tests/test_app.py" not in found.paths  # only in a tool result, not in any text part
    assert "tests/test_app.py" in gather_facts(history).references.paths
