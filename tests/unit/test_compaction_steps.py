"""The compaction decorators in a compiler: what they rewrite in the view, what they leave, what
they report, and how their parameters are checked."""

from __future__ import annotations

import json
from typing import Any

import pytest

from app.adapters.tokenizers import load_counter
from app.domain.compilers.base import Compiled, Item, Snapshot
from app.domain.compilers.registry import build
from app.domain.compilers.spec import parse_spec
from app.domain.errors import InvalidInput
from app.domain.messages import ImagePart, Message, TextPart, ToolResultPart
from app.domain.tokens import count_message
from tests.unit.compiler_builders import NOW, user
from tests.unit.test_tool_compaction import BIG, BIG_V2, call, result

ENCODER = load_counter().encoder("o200k_base")
LOG = "\n".join(f"{n:05d} INFO step {n} finished in {n % 97} ms" for n in range(3_000))


def count(message: Message) -> int:
    return count_message(message, ENCODER)


def compile_view(history: list[Message], *decorators: Any, **fields: Any) -> Compiled:
    stored = tuple(Item(n + 1, "messages", m, count(m)) for n, m in enumerate(history))
    fields = {"target": "openai", **fields}
    snapshot = Snapshot(items=stored, tenant="acme", now=NOW, count=count, **fields)
    spec = parse_spec({"base": "all_sections", "decorators": list(decorators)})
    return build(spec)(snapshot)


def note(tag: str) -> str:
    return " ".join(f"{tag}{n} because of reason {n * 7}" for n in range(30))


def rounds_of_reads() -> list[Message]:
    return [
        user("fix the bug"),
        call("c1", "read", path="a.py", note=note("x")),
        result("c1", BIG),
        call("c2", "read", path="a.py", note=note("y")),
        result("c2", BIG_V2),
        user("and now?"),
        call("c3", "read", path="a.py", note=note("z")),
        result("c3", BIG),
    ]


def test_tool_compaction_reports_what_it_saved_and_touched() -> None:
    history = rounds_of_reads()
    plain = compile_view(history)
    compiled = compile_view(history, "tool_compaction")
    [report] = compiled.steps
    assert report.name == "tool_compaction"
    assert report.call_ids == ("c1", "c2")
    assert report.seqs == (2, 3, 4, 5)
    assert report.tokens_saved == plain.tokens - compiled.tokens > 0
    assert {o.value for o in report.omitted} == {note("x"), note("y"), BIG, BIG_V2}


def test_the_newest_round_is_never_compacted() -> None:
    history = rounds_of_reads()[:5]  # c2's round is the newest: its group keeps it anyway
    history += [call("c4", "write", content=BIG), call("c5", "write", content=BIG_V2)]
    history += [result("c4", "ok"), result("c5", "ok")]
    merged = Message(role="assistant", content=(*history[5].content, *history[6].content))
    history = [*history[:5], merged, *history[7:]]
    compiled = compile_view(history, "tool_compaction")
    # c4 and c5 share a group, but they are the round being answered: both stay whole.
    assert [i.message for i in compiled.items][-3:] == history[-3:]
    assert compiled.steps[0].call_ids == ("c1",)


def test_a_rewrite_that_would_cost_tokens_is_not_made() -> None:
    # Just over the threshold: "[omitted]" plus the metadata outweighs the field.
    history = [
        call("c1", "run", cmd="a" * 101),
        result("c1", "ok"),
        call("c2", "run", cmd="b" * 101),
        result("c2", "ok"),
        user("next"),
    ]
    compiled = compile_view(history, "tool_compaction")
    assert [i.message for i in compiled.items] == history
    assert compiled.steps[0].tokens_saved == 0
    assert compiled.steps[0].call_ids == ()


def test_dedupe_is_its_own_reported_step() -> None:
    history = [
        call("c1", "cat", path="a"),
        result("c1", BIG),
        call("c2", "cat", path="b"),
        result("c2", BIG),
        user("next"),
    ]
    params = {"toolIdentifierFields": {"cat": ["path"]}, "dedupeIdenticalResults": True}
    compiled = compile_view(history, {"name": "tool_compaction", "params": params})
    assert [s.name for s in compiled.steps] == ["tool_compaction", "dedupe_identical_results"]
    assert compiled.steps[1].call_ids == ("c1",)
    content = compiled.items[1].message.tool_results[0].content
    assert isinstance(content, str)
    assert content.endswith("is identical to the result of the newer callId=c2.")


def test_the_report_covers_only_what_is_sent() -> None:
    from app.domain.compiling import Target, compile_request
    from app.domain.providers import PROFILES

    history = rounds_of_reads()
    stored = tuple(Item(n + 1, "messages", m, count(m)) for n, m in enumerate(history))
    snapshot = Snapshot(items=stored, tenant="acme", now=NOW, count=count)
    # Only the newest round fits: c1 and c2 are compacted, then trimmed away.
    budget = sum(i.tokens for i in stored[5:]) + 10
    limit = {"name": "token_limit", "params": {"max_tokens": budget, "keep_task": False}}
    spec = parse_spec({"base": "all_sections", "decorators": ["tool_compaction", limit]})
    output = compile_request(snapshot, build(spec), Target(PROFILES["gpt-4o"], 128_000))
    assert output.seqs == [6, 7, 8]
    [report] = output.steps
    assert (report.name, report.touched, report.tokens_saved) == ("tool_compaction", (), 0)


def test_pinned_messages_are_never_rewritten() -> None:
    history = rounds_of_reads()
    history[2] = history[2].model_copy(update={"metadata": {"pinned": True}})
    compiled = compile_view(history, "tool_compaction")
    assert compiled.items[2].message == history[2]
    assert compiled.steps[0].seqs == (4, 5)  # its round (the call too) stays whole


def test_small_identical_results_are_not_replaced_by_a_longer_reference() -> None:
    history = [
        call("c1", "cat", path="a"),
        result("c1", "same"),
        call("c2", "cat", path="b"),
        result("c2", "same"),
        user("next"),
    ]
    params = {"dedupeIdenticalResults": True}
    compiled = compile_view(history, {"name": "tool_compaction", "params": params})
    assert [i.message for i in compiled.items] == history


def previewed(compiled: Compiled, seq: int) -> str:
    item = next(i for i in compiled.items if i.seq == seq)
    content = item.message.tool_results[0].content
    assert isinstance(content, str)
    return content


def test_an_oversized_result_keeps_its_head_and_tail_and_says_where_the_rest_is() -> None:
    history = [call("c1", "logs"), result("c1", LOG), user("what failed?")]
    compiled = compile_view(history, "compact_tool_results", session_id="s 1")
    text = previewed(compiled, 2)
    assert text.startswith("00000 INFO step 0 finished")
    assert text.endswith("02999 INFO step 2999 finished in 89 ms")
    head, rest = text.split("\n[", 1)
    marker, tail = rest.split("]\n", 1)
    assert "GET /v1/sessions/s%201/tool-calls/c1?seq=2" in marker
    assert "characters of this" in marker
    assert count(compiled.items[1].message) < 1_100
    assert head.endswith("ms")  # cut at a line end
    [report] = compiled.steps
    assert report.name == "compact_tool_results"
    assert report.call_ids == ("c1",)
    assert [o.value for o in report.omitted] == [LOG]
    assert tail.startswith("0") and len(tail) < len(LOG) // 4


def test_a_stateless_preview_points_at_the_posted_history() -> None:
    history = [call("c1", "logs"), result("c1", LOG), user("what failed?")]
    text = previewed(compile_view(history, "compact_tool_results"), 2)
    assert "it is in the posted history" in text


def test_results_under_the_limit_and_the_newest_round_under_its_cap_stay_whole() -> None:
    history = [call("c1", "logs"), result("c1", "short"), call("c2", "logs"), result("c2", LOG)]
    assert count(history[3]) > 8_000  # the default newest_max_tokens
    spec = {"name": "compact_tool_results", "params": {"newest_max_tokens": 50_000}}
    compiled = compile_view(history, spec)
    assert [i.message for i in compiled.items] == history


def test_a_result_in_the_newest_round_over_its_cap_is_previewed() -> None:
    history = [call("c1", "logs"), result("c1", "short"), call("c2", "logs"), result("c2", LOG)]
    compiled = compile_view(history, "compact_tool_results")
    assert [i.message for i in compiled.items[:3]] == history[:3]
    assert 3_000 < compiled.items[3].tokens <= 8_000
    text = previewed(compiled, 4)
    assert text.startswith("00000 INFO") and text.endswith(LOG[-30:])
    [report] = compiled.steps[1:]
    assert report.name == "compact_tool_results_newest" and report.call_ids == ("c2",)
    assert [o.value for o in report.omitted] == [LOG]


def test_a_json_result_is_previewed_as_text() -> None:
    doc = json.dumps({"lines": LOG.splitlines()})
    history = [call("c1", "logs"), result("c1", doc), user("next")]
    compiled = compile_view(
        history,
        {
            "name": "compact_tool_results",
            "params": {"max_tokens": 500, "head_tokens": 50, "tail_tokens": 50},
        },
    )
    assert previewed(compiled, 2).startswith('{"lines": ["00000 INFO')
    assert compiled.tokens < 400


@pytest.mark.parametrize(
    ("params", "where"),
    [
        ({"inputTrimBytes": "100"}, "inputTrimBytes"),
        ({"outputTrimBytes": -1}, "outputTrimBytes"),
        ({"excludedTools": "bash"}, "excludedTools"),
        ({"toolIdentifierFields": {"read": "path"}}, "toolIdentifierFields"),
        ({"dedupeIdenticalResults": "yes"}, "dedupeIdenticalResults"),
        ({"inputTrimBytes": 1, "trimBytes": 2}, "trimBytes"),
    ],
)
def test_bad_tool_compaction_parameters_name_the_field(params: Any, where: str) -> None:
    spec = parse_spec({"decorators": [{"name": "tool_compaction", "params": params}]})
    with pytest.raises(InvalidInput) as err:
        build(spec)
    paths = [p for p, _ in err.value.problems]
    assert any(p[:4] == ("compiler", "decorators", 0, "params") and where in p for p in paths)


def test_head_and_tail_must_fit_under_the_limit() -> None:
    params = {"max_tokens": 100, "head_tokens": 60, "tail_tokens": 40}
    spec = parse_spec({"decorators": [{"name": "compact_tool_results", "params": params}]})
    with pytest.raises(InvalidInput) as err:
        build(spec)
    assert err.value.problems[0][0] == ("compiler", "decorators", 0, "params", "head_tokens")


def test_compaction_must_come_before_token_limit() -> None:
    spec = parse_spec({"decorators": ["token_limit", "tool_compaction"]})
    with pytest.raises(InvalidInput) as err:
        build(spec)
    assert err.value.problems[0][0] == ("compiler", "decorators", 1, "name")


def test_results_with_more_than_text_are_not_previewed() -> None:
    part = ToolResultPart(
        call_id="c1", content=(TextPart(text=LOG), ImagePart(url="https://example.com/x.png"))
    )
    history = [call("c1", "shot"), Message(role="tool", content=(part,)), user("next")]
    # Anthropic takes images in tool results (OpenAI's repair would have made it text).
    compiled = compile_view(history, "compact_tool_results", target="anthropic")
    assert compiled.items[1].message == history[1]
