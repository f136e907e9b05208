"""Tool payload compaction (seeds/002): the source's examples A-D and its rules, exactly."""

from __future__ import annotations

import copy
import hashlib
import json
from typing import Any

from app.domain.formats.convert import parse_messages
from app.domain.messages import ImagePart, Message, TextPart, ToolCallPart, ToolResultPart
from app.domain.tool_payloads.compaction import (
    PayloadRules,
    compact_tool_payloads,
    dedupe_results,
)
from bench.compaction import agent_session

BIG = "<?php\n" + "echo 'line';\n" * 500  # 6,506 bytes
BIG_V2 = "<?php\n" + "echo 'line two';\n" * 500
READ_IDS = {"read_file_content": ["path", "position", "length"]}


def sha(value: Any) -> str:
    return hashlib.sha256(
        json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode()
    ).hexdigest()


def call(call_id: str, name: str, **args: Any) -> Message:
    return Message(role="assistant", content=(ToolCallPart(id=call_id, name=name, arguments=args),))


def result(call_id: str, content: str) -> Message:
    return Message(role="tool", content=(ToolResultPart(call_id=call_id, content=content),))


def compacted_result(call_id: str, tool: str, fields: dict[str, Any]) -> Message:
    """The tool message the source expects once ``fields`` (name -> original) were omitted."""
    meta = {
        "thresholdBytes": 100,
        "omittedFields": {
            k: {
                "bytes": len(v.encode()) if isinstance(v, str) else len(json.dumps(v)),
                "sha256": sha(v),
            }
            for k, v in fields.items()
        },
    }
    text = (
        f"[tool_compaction] Tool result compacted for tool={tool}, callId={call_id}. "
        "Large fields omitted."
    )
    part = ToolResultPart(call_id=call_id, content=text, metadata={"_tool_compaction": meta})
    return Message(role="tool", content=(part,))


def run(messages: list[Message], **rules: Any) -> list[Message]:
    return list(compact_tool_payloads(messages, PayloadRules(**rules)).messages)


def test_example_a_the_older_identical_read_is_compacted_and_the_newest_kept_whole() -> None:
    args = {"path": "A.php", "position": 0, "length": 6000}
    history = [
        call("call_1", "read_file_content", **args),
        result("call_1", BIG),
        call("call_2", "read_file_content", **args),
        result("call_2", BIG),
    ]
    out = run(history, identifier_fields=READ_IDS)
    assert out == [
        history[0],  # every argument is an identifier: never trimmed
        compacted_result("call_1", "read_file_content", {"content": BIG}),
        history[2],
        history[3],
    ]
    meta = out[1].tool_results[0].metadata["_tool_compaction"]
    assert meta["omittedFields"]["content"]["bytes"] == len(BIG.encode()) == 6506


def test_example_b_other_position_or_length_is_another_group() -> None:
    history = [
        call("call_A", "read_file_content", path="A.php", position=0, length=6000),
        result("call_A", BIG),
        call("call_B", "read_file_content", path="A.php", position=6000, length=4000),
        result("call_B", BIG_V2),
    ]
    assert run(history, identifier_fields=READ_IDS) == history


def test_example_c_a_large_write_argument_is_omitted_and_the_path_kept() -> None:
    history = [
        call("call_1", "write_file_content", path="A.php", content=BIG),
        result("call_1", '{"status": "ok"}'),
        call("call_2", "write_file_content", path="A.php", content=BIG_V2),
        result("call_2", '{"status": "ok"}'),
    ]
    out = run(history, identifier_fields={"write_file_content": ["path"]})
    meta = {
        "thresholdBytes": 100,
        "omittedFields": {"content": {"bytes": len(BIG), "sha256": sha(BIG)}},
    }
    expected_args = {"path": "A.php", "content": "[omitted]", "_tool_compaction": meta}
    assert out[0].tool_calls[0].arguments == expected_args
    assert out[0].tool_calls[0].model_dump(exclude={"arguments"}) == (
        history[0].tool_calls[0].model_dump(exclude={"arguments"})
    )
    assert out[1:] == history[1:]  # the small result and the newest write are unchanged


def test_example_d_without_identifier_fields_every_call_of_a_tool_is_one_group() -> None:
    listing_src = "\n".join(f"src/file_{n}.py" for n in range(40))
    listing_tests = "\n".join(f"tests/test_{n}.py" for n in range(40))
    history = [
        call("c1", "list_files", directory="src"),
        result("c1", listing_src),
        call("c2", "list_files", directory="tests"),
        result("c2", listing_tests),
    ]
    out = run(history)
    assert out == [
        history[0],  # its only argument is small
        compacted_result("c1", "list_files", {"content": listing_src}),
        history[2],
        history[3],
    ]


def test_a_json_object_result_is_measured_field_by_field_and_shown_as_the_placeholder() -> None:
    # As the source does: only the large fields are omitted (and listed), and the visible
    # content becomes the placeholder, which carries no original data, small fields included.
    old = json.dumps({"status": "ok", "stdout": BIG, "exit": 0})
    history = [call("c1", "run"), result("c1", old), call("c2", "run"), result("c2", "fine")]
    out = run(history)
    stdout = {"stdout": BIG}
    assert out[1] == compacted_result("c1", "run", stdout)


def test_text_that_only_looks_like_json_is_one_content_field() -> None:
    for text in ("[" * 50_000 + "]" * 50_000, '{"vals": [NaN, ' + "1.5, " * 100 + "1]}"):
        history = [call("c1", "run"), result("c1", text), call("c2", "run"), result("c2", "x")]
        assert run(history)[1] == compacted_result("c1", "run", {"content": text})


def test_unparsed_arguments_are_a_group_of_their_own() -> None:
    raw = Message(role="assistant", content=(ToolCallPart(id="c1", name="read", arguments="{"),))
    history = [raw, result("c1", BIG), call("c2", "read", other=1), result("c2", BIG)]
    assert run(history, identifier_fields={"read": ["path"]}) == history


def test_a_previewed_result_is_not_compacted_again() -> None:
    part = ToolResultPart(call_id="c1", content=BIG, metadata={"_tool_result_preview": {}})
    history = [
        call("c1", "run"),
        Message(role="tool", content=(part,)),
        call("c2", "run"),
        result("c2", BIG),
    ]
    assert run(history) == history


def test_protect_latest_when_results_and_calls_of_one_group_interleave() -> None:
    # Two parallel calls of one group; c1's result arrives after c2's, so c1 is the newest
    # occurrence: its call and result stay whole, c2's are compacted.
    parallel = Message(
        role="assistant",
        content=(
            ToolCallPart(id="c1", name="grep", arguments={"pattern": "x" * 150}),
            ToolCallPart(id="c2", name="grep", arguments={"pattern": "y" * 150}),
        ),
    )
    history = [parallel, result("c2", BIG_V2), result("c1", BIG)]
    out = run(history)
    calls = out[0].tool_calls
    assert calls[0] == parallel.tool_calls[0]
    assert calls[1].arguments["pattern"] == "[omitted]"
    assert out[1] == compacted_result("c2", "grep", {"content": BIG_V2})
    assert out[2] == history[2]


def test_excluded_tools_are_never_touched() -> None:
    history = [
        call("c1", "bash", command="cat " + "x" * 200),
        result("c1", BIG),
        call("c2", "bash", command="cat " + "y" * 200),
        result("c2", BIG),
    ]
    assert run(history, excluded_tools=frozenset({"bash"})) == history
    assert run(history) != history


def test_identifier_fields_longer_than_the_threshold_are_never_trimmed() -> None:
    long_path = "/very/" + "deep/" * 60 + "file.py"
    history = [
        call("c1", "read", path=long_path, note="n" * 300),
        result("c1", "short"),
        call("c2", "read", path=long_path, note="m" * 300),
        result("c2", "short"),
    ]
    out = run(history, identifier_fields={"read": ["path"]})
    args = out[0].tool_calls[0].arguments
    assert isinstance(args, dict)
    assert args["path"] == long_path
    assert args["note"] == "[omitted]"
    assert list(args["_tool_compaction"]["omittedFields"]) == ["note"]


def test_missing_identifier_values_group_as_null() -> None:
    history = [
        call("c1", "read", other="a"),
        result("c1", BIG),
        call("c2", "read", other="b"),
        result("c2", BIG),
    ]
    out = run(history, identifier_fields={"read": ["path"]})
    assert out[1] == compacted_result("c1", "read", {"content": BIG})


def test_odd_payloads_are_left_as_they_are() -> None:
    raw_args = Message(
        role="assistant",
        content=(ToolCallPart(id="c1", name="run", arguments="{not json" + "x" * 300),),
    )
    image = ToolResultPart(
        call_id="c1",
        content=(TextPart(text=BIG), ImagePart(url="https://example.com/a.png")),
    )
    history = [
        raw_args,
        Message(role="tool", content=(image,)),
        call("c2", "run", cmd="x"),
        result("c2", BIG),
    ]
    assert run(history) == history


def test_a_call_without_a_result_is_never_compacted() -> None:
    history = [
        call("c1", "write", content=BIG),  # no result yet
        call("c2", "write", content=BIG_V2),
        result("c2", "ok"),
    ]
    assert run(history) == history


def test_kept_messages_stay_whole_and_still_protect_their_group() -> None:
    history = [
        call("c1", "run", cmd="a" * 200),
        result("c1", BIG),
        call("c2", "run", cmd="b" * 200),
        result("c2", BIG_V2),
    ]
    out = compact_tool_payloads(history, PayloadRules(), keep=frozenset({0, 1})).messages
    assert list(out) == history


def test_the_input_is_left_as_it_is() -> None:
    history = [
        call("c1", "write", path="a", content=BIG),
        result("c1", json.dumps({"out": BIG})),
        call("c2", "write", path="a", content=BIG_V2),
        result("c2", "ok"),
    ]
    before = copy.deepcopy([m.model_dump() for m in history])
    out = compact_tool_payloads(history, PayloadRules())
    assert [m.model_dump() for m in history] == before
    assert out.messages[0] is not history[0]
    assert out.messages[2] is history[2]  # untouched messages are the same objects


def test_the_compaction_lists_each_original_it_took_out() -> None:
    history = [
        call("c1", "write", path="a", content=BIG),
        result("c1", BIG_V2),
        call("c2", "write", path="b", content="small"),
        result("c2", "ok"),
    ]
    out = compact_tool_payloads(history, PayloadRules())
    found = [
        (i, o.call_id, o.side, o.field, o.value) for i, lost in out.omitted.items() for o in lost
    ]
    assert found == [(0, "c1", "arguments", "content", BIG), (1, "c1", "result", "content", BIG_V2)]
    assert all(o.sha256 == sha(o.value) for lost in out.omitted.values() for o in lost)


def test_identical_older_results_become_a_reference_to_the_newest() -> None:
    history = [
        call("c1", "cat", path="a"),
        result("c1", BIG),
        call("c2", "cat", path="b"),
        result("c2", BIG),
    ]
    rules = PayloadRules(identifier_fields={"cat": ["path"]})
    assert run(history, identifier_fields={"cat": ["path"]}) == history  # different groups
    out = dedupe_results(history, rules)
    text = (
        "[tool_compaction] Tool result for tool=cat, callId=c1 is identical to the result of "
        "the newer callId=c2."
    )
    meta = {"sameAs": "c2", "bytes": len(BIG), "sha256": sha(BIG)}
    part = ToolResultPart(call_id="c1", content=text, metadata={"_tool_compaction": meta})
    assert out.messages[1] == Message(role="tool", content=(part,))
    assert out.messages[3] == history[3]
    assert [o.value for o in out.omitted[1]] == [BIG]


def test_dedupe_leaves_compacted_results_alone() -> None:
    history = [call("c1", "cat"), result("c1", BIG), call("c2", "cat"), result("c2", BIG)]
    compacted = run(history)
    assert compacted != history
    assert list(dedupe_results(compacted, PayloadRules()).messages) == compacted


def test_the_same_parsed_messages_compact_as_fresh_ones_under_any_rules() -> None:
    """What a step works out for a part is remembered with the part object (a history the
    message cache holds is compacted on every compile): the rules are part of what is kept."""
    raw = agent_session(3, 40)
    kept = parse_messages("openai", raw)
    by_path = {"read_file": ("path",), "write_file": ("path",)}
    variants = [
        PayloadRules(),
        PayloadRules(input_trim_bytes=10_000, output_trim_bytes=50),
        PayloadRules(identifier_fields=by_path),
        PayloadRules(excluded_tools=frozenset({"read_file"})),
        PayloadRules(),
    ]
    for rules in [*variants, *reversed(variants)]:
        for step in (compact_tool_payloads, dedupe_results):
            again, fresh = step(kept, rules), step(parse_messages("openai", raw), rules)
            assert again == fresh
    assert kept == parse_messages("openai", raw)  # the input is left as it is


def test_what_is_remembered_of_a_part_goes_with_it() -> None:
    import gc

    from app.domain.tool_payloads import compaction as payloads

    gc.collect()
    before = len(payloads._MEMOS)
    messages = parse_messages("openai", agent_session(5, 30))
    dedupe_results(compact_tool_payloads(messages, PayloadRules()).messages, PayloadRules())
    assert len(payloads._MEMOS) > before
    del messages
    gc.collect()
    assert len(payloads._MEMOS) == before
