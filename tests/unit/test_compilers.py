"""The worked examples of seeds/000 (compilers) and seeds/003 (context providers), by name."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta

import pytest

from app.domain.compilers.base import Compiled, Compiler, Item, Snapshot
from app.domain.compilers.builtins import all_sections, current_tool_trace, selected_sections
from app.domain.compilers.context import BUILTIN_PROVIDERS, context_providers
from app.domain.compilers.registry import BUILTINS, build
from app.domain.compilers.spec import DEFAULT_SPEC, parse_spec
from app.domain.errors import InvalidInput, UnknownName
from app.domain.messages import INFERENCE_ORDER, Message
from tests.unit.compiler_builders import (
    NOW,
    assistant,
    items,
    left,
    seqs,
    snapshot,
    texts,
    tool,
    user,
)

# One store with every section: stored in seq order, sections interleaved.
SECTIONED = items(
    user("first question"),  # 1
    ("buffer", user("scratch note")),  # 2
    assistant("first answer"),  # 3
    ("summary", user("summary of earlier work")),  # 4
    ("notes", user("a custom section")),  # 5
    user("second question"),  # 6
)


def compile_spec(raw: object, snap: Snapshot) -> Compiled:
    return build(parse_spec(raw))(snap)


# --- seeds/000: sections and the built-in compilers -------------------------------------------


def test_inference_order_is_summary_then_buffer_then_messages() -> None:
    assert INFERENCE_ORDER == ("summary", "buffer", "messages")


def test_compilers_send_sections_in_inference_order() -> None:
    compiled = current_tool_trace()(snapshot(SECTIONED))
    assert seqs(compiled) == [4, 2, 1, 3, 6]


def test_the_default_compiler_is_current_tool_trace() -> None:
    assert DEFAULT_SPEC.base.name == "current_tool_trace"
    assert seqs(build(DEFAULT_SPEC)(snapshot(SECTIONED))) == [4, 2, 1, 3, 6]


def trace_history() -> tuple[Item, ...]:
    return items(
        user("plan the release"),  # 1
        assistant("", "a1", is_trace=True, execution_id="exec-1"),  # 2
        tool("a1", is_trace=True, execution_id="exec-1"),  # 3
        assistant("release planned"),  # 4
        user("now ship it"),  # 5
        assistant("", "b1", is_trace=True, execution_id="exec-2"),  # 6
        tool("b1", is_trace=True, execution_id="exec-2"),  # 7
    )


def test_current_tool_trace_keeps_conversation_and_the_current_executions_traces() -> None:
    compiled = current_tool_trace()(snapshot(trace_history(), execution_id="exec-2"))
    assert seqs(compiled) == [1, 4, 5, 6, 7]


def test_current_tool_trace_leaves_out_traces_of_previous_executions() -> None:
    compiled = current_tool_trace()(snapshot(trace_history(), execution_id="exec-2"))
    assert left(compiled, "trace") == [2, 3]


def test_between_executions_no_trace_message_is_sent() -> None:
    compiled = current_tool_trace()(snapshot(trace_history(), execution_id=None))
    assert seqs(compiled) == [1, 4, 5]
    assert left(compiled, "trace") == [2, 3, 6, 7]


def test_a_trace_without_an_execution_id_is_never_current() -> None:
    stored = items(user("q"), user("orphan trace", is_trace=True))
    assert seqs(current_tool_trace()(snapshot(stored, execution_id="exec-1"))) == [1]


def test_a_falsy_is_trace_flag_is_conversation() -> None:
    stored = items(user("a", is_trace=False), user("b", is_trace=0), user("c", is_trace=None))
    assert seqs(current_tool_trace()(snapshot(stored))) == [1, 2, 3]


def test_current_tool_trace_reads_other_sections_only_when_named() -> None:
    assert left(current_tool_trace()(snapshot(SECTIONED)), "section") == [5]
    named = current_tool_trace(["notes", "messages"])(snapshot(SECTIONED))
    assert seqs(named) == [5, 1, 3, 6]


def test_all_sections_sends_every_message_unfiltered() -> None:
    assert seqs(all_sections()(snapshot(SECTIONED))) == [4, 2, 1, 3, 6, 5]
    assert seqs(all_sections()(snapshot(trace_history()))) == [1, 2, 3, 4, 5, 6, 7]


def test_all_sections_can_send_the_store_in_seq_order() -> None:
    assert seqs(all_sections("seq")(snapshot(SECTIONED))) == [1, 2, 3, 4, 5, 6]


def test_selected_sections_default_is_the_inference_order() -> None:
    assert seqs(selected_sections()(snapshot(SECTIONED))) == [4, 2, 1, 3, 6]


def test_selected_sections_sends_the_named_sections_in_the_given_order() -> None:
    assert seqs(selected_sections(["summary", "messages"])(snapshot(SECTIONED))) == [4, 1, 3, 6]
    assert seqs(selected_sections(["messages", "summary"])(snapshot(SECTIONED))) == [1, 3, 6, 4]


def test_selected_sections_skips_a_missing_section_silently() -> None:
    compiled = selected_sections(["summary", "archive", "messages"])(snapshot(SECTIONED))
    assert seqs(compiled) == [4, 1, 3, 6]
    assert compiled.warnings == ()


def test_selected_sections_with_an_empty_list_sends_the_default_section_only() -> None:
    compiled = selected_sections([])(snapshot(SECTIONED))
    assert seqs(compiled) == [1, 3, 6]
    assert left(compiled, "section") == [2, 4, 5]


def test_selected_sections_does_not_filter_traces() -> None:
    assert seqs(selected_sections([])(snapshot(trace_history()))) == [1, 2, 3, 4, 5, 6, 7]


# --- seeds/000: custom compilers and decorators -----------------------------------------------
# The source's trimming decorators have no opening task: these examples turn keep_task off.


def recent_messages(max_messages: int = 20) -> Compiler:
    """The seed's RecentMessagesCompiler: the last N stored messages."""

    def compile_recent(snap: Snapshot) -> Compiled:
        return Compiled(snap.items[-max_messages:])

    return compile_recent


def test_a_custom_compiler_is_registered_and_chosen_by_name() -> None:
    registry = BUILTINS.with_base("recent_messages", recent_messages)
    stored = items(*(user(f"m{n}") for n in range(30)))
    compiled = build(parse_spec({"base": {"name": "recent_messages"}}), registry)(snapshot(stored))
    assert seqs(compiled) == list(range(11, 31))
    assert "recent_messages" not in BUILTINS.bases


def test_the_recent_messages_example_is_a_window_of_the_last_n_messages() -> None:
    stored = items(*(user(f"m{n}") for n in range(30)))
    spec = {"decorators": [{"name": "window", "params": {"messages": 20, "keep_task": False}}]}
    assert seqs(compile_spec(spec, snapshot(stored))) == list(range(11, 31))


def test_the_token_limit_example_keeps_the_newest_messages_that_fit() -> None:
    stored = items(user("a"), user("b"), user("c"), user("d"), tokens=[3000, 1000, 2000, 1500])
    spec = {
        "decorators": [{"name": "token_limit", "params": {"max_tokens": 4000, "keep_task": False}}]
    }
    compiled = compile_spec(spec, snapshot(stored))
    assert texts(compiled) == ["c", "d"]
    assert left(compiled, "token_limit") == [1, 2]


def test_the_token_limit_stops_at_the_first_message_that_does_not_fit() -> None:
    stored = items(user("small old"), user("big"), user("new"), tokens=[100, 5000, 1000])
    spec = {
        "decorators": [{"name": "token_limit", "params": {"max_tokens": 2000, "keep_task": False}}]
    }
    assert texts(compile_spec(spec, snapshot(stored))) == ["new"]


def test_decorating_the_default_compiler_keeps_its_trace_filtering() -> None:
    spec = {"decorators": [{"name": "token_limit", "params": {"max_tokens": 10_000}}]}
    compiled = compile_spec(spec, snapshot(trace_history(), execution_id="exec-2"))
    assert seqs(compiled) == [1, 4, 5, 6, 7]


def test_stacked_decorators_each_wrap_the_previous_one() -> None:
    secret = "key sk-abcdefghijklmnopqrstuvwxyz123456"
    snap = snapshot(items(user("hello")), ephemeral=(user(secret),))
    redacted_doc = compile_spec({"decorators": ["inject", "redact"]}, snap)
    raw_doc = compile_spec({"decorators": ["redact", "inject"]}, snap)
    assert texts(redacted_doc)[0] == "key [REDACTED]"
    assert texts(raw_doc)[0] == secret


def test_stacked_window_and_token_limit_apply_in_list_order() -> None:
    stored = items(*(user(f"m{n}") for n in range(10)), tokens=10)
    spec = {
        "decorators": [
            {"name": "window", "params": {"messages": 5, "keep_task": False}},
            {"name": "token_limit", "params": {"max_tokens": 30, "keep_task": False}},
        ]
    }
    compiled = compile_spec(spec, snapshot(stored))
    assert seqs(compiled) == [8, 9, 10]
    assert left(compiled, "window") == [1, 2, 3, 4, 5]
    assert left(compiled, "token_limit") == [6, 7]


def test_injected_documents_come_before_the_conversation_and_are_never_stored() -> None:
    docs = (user("Relevant documents:\nrelease notes v2"),)
    snap = snapshot(items(user("what changed?")), ephemeral=docs)
    compiled = compile_spec({"decorators": ["inject"]}, snap)
    assert texts(compiled) == ["Relevant documents:\nrelease notes v2", "what changed?"]
    assert [(i.seq, i.section) for i in compiled.items] == [(0, "ephemeral"), (1, "messages")]
    assert len(snap.items) == 1


# --- seeds/003: context providers and the pipeline --------------------------------------------


def providers_spec(*names: str, keys: Sequence[str] = ()) -> dict[str, object]:
    params = {"names": list(names), "metadata_keys": list(keys)}
    return {"decorators": [{"name": "providers", "params": params}]}


def test_the_identity_provider_gives_tenant_session_and_date() -> None:
    snap = snapshot(items(user("hi")), session_id="s-1")
    compiled = compile_spec(providers_spec("identity"), snap)
    assert texts(compiled)[0] == "Tenant: acme\nSession: s-1\nDate: 2025-03-01T12:30:00+00:00"
    assert compiled.items[0].message.role == "user"
    assert (compiled.items[0].seq, compiled.items[0].section) == (0, "provider")


def test_a_stateless_compile_has_no_session_line() -> None:
    compiled = compile_spec(providers_spec("identity"), snapshot(items(user("hi"))))
    assert texts(compiled)[0] == "Tenant: acme\nDate: 2025-03-01T12:30:00+00:00"


def test_provider_messages_are_computed_fresh_for_every_compile() -> None:
    stored = items(user("hi"))
    compiler = build(parse_spec(providers_spec("identity")))
    first = compiler(snapshot(stored))
    later = compiler(snapshot(stored, now=NOW + timedelta(days=1)))
    assert texts(first)[0].endswith("2025-03-01T12:30:00+00:00")
    assert texts(later)[0].endswith("2025-03-02T12:30:00+00:00")


def test_the_metadata_provider_lists_the_chosen_keys_in_order() -> None:
    snap = snapshot(items(user("hi")), metadata={"team": "infra", "flags": ["a"], "secret": "x"})
    compiled = compile_spec(providers_spec("metadata", keys=["flags", "team", "absent"]), snap)
    assert texts(compiled)[0] == 'Session metadata:\nflags: ["a"]\nteam: infra'


def test_the_metadata_provider_says_nothing_when_no_chosen_key_is_set() -> None:
    compiled = compile_spec(providers_spec("metadata", keys=["absent"]), snapshot(items(user())))
    assert seqs(compiled) == [1]


def test_providers_come_in_the_configured_order() -> None:
    snap = snapshot(items(user("hi")), metadata={"team": "infra"})
    first = compile_spec(providers_spec("metadata", "identity", keys=["team"]), snap)
    assert texts(first)[0].startswith("Session metadata")
    assert texts(first)[1].startswith("Tenant: acme")


def echo_last_user(snap: Snapshot, history: Sequence[Item], keys: Sequence[str]) -> Message:
    """A provider that reads the history it is given."""
    last = [i.message.text for i in history if i.message.role == "user"][-1]
    return user(f"Last question: {last}")


def test_pipeline_runs_transforms_then_providers_on_the_rewritten_history_then_prepends() -> None:
    catalog = {**BUILTIN_PROVIDERS, "echo": echo_last_user}
    registry = BUILTINS.with_decorator("providers", context_providers(catalog))
    params = {"names": ["identity", "echo"]}
    spec = parse_spec({"decorators": ["redact", {"name": "providers", "params": params}]})
    stored = items(user("token is sk-abcdefghijklmnopqrstuvwxyz123456"))
    compiled = build(spec, registry)(snapshot(stored))
    assert [i.section for i in compiled.items] == ["provider", "provider", "messages"]
    assert texts(compiled)[1] == "Last question: token is [REDACTED]"
    assert texts(compiled)[2] == "token is [REDACTED]"


def test_the_metadata_provider_needs_keys() -> None:
    with pytest.raises(InvalidInput) as caught:
        build(parse_spec(providers_spec("metadata")))
    assert caught.value.problems[0][0] == (
        "compiler",
        "decorators",
        0,
        "params",
        "metadata_keys",
    )


def test_an_unknown_provider_is_named_with_its_field() -> None:
    with pytest.raises(UnknownName) as caught:
        build(parse_spec(providers_spec("identity", "weather")))
    assert caught.value.field == "compiler.decorators[0].params.names[1]"
    assert caught.value.available == ("identity", "metadata")
