"""The recall tool over HTTP, on both databases: a compile with the ``recall`` decorator offers
the tool and names its pointers; the recall endpoint answers the model's call page by page, the
pages joining to exactly the stored original; the answer appended back compiles provider-valid."""

from __future__ import annotations

import json
from typing import Any

import httpx
import openai
import pytest

from app.adapters.tokenizers import load_encoding
from app.domain.recall import definition
from tests.api.test_compile import valid
from tests.api.test_originals import FILE_V1, LOG, SPEC, agent_history, by_call, call, result
from tests.conftest import Api, new_session, row_counts
from tests.upstreams import DEFAULT_TEXT, ToolCall, Upstream

RECALL_SPEC = {"decorators": [*SPEC["decorators"], "recall"]}
# Several bytes a character, combined characters, CRLF and lone CR line ends.
MULTI_BYTE = "".join(
    f"{n:04d} naïve café 日本語のテキスト 🙂👩‍👩‍👧 e\u0301 ∑x²\r\n" if n % 3 else f"{n} Ω\r"
    for n in range(700)
)
O200K = load_encoding("o200k_base")


def stored(client: httpx.Client, history: list[dict[str, Any]], **fields: Any) -> str:
    sid = new_session(client, provider=fields.pop("provider", "gpt-4o"), **fields)
    posted = client.post(f"/v1/sessions/{sid}/messages", json={"messages": history})
    assert posted.status_code == 201, posted.text
    return sid


def compiled(client: httpx.Client, sid: str, **body: Any) -> dict[str, Any]:
    response = client.post(f"/v1/sessions/{sid}/compile", json=body)
    assert response.status_code == 200, response.text
    return valid(response.json())


def recall(client: httpx.Client, sid: str, **body: Any) -> dict[str, Any]:
    response = client.post(f"/v1/sessions/{sid}/recall", json=body)
    assert response.status_code == 200, response.text
    answer: dict[str, Any] = response.json()
    return answer


def text_of(answer: dict[str, Any]) -> str:
    found = answer["result"]
    shaped = {
        "openai": lambda: found["content"],
        "anthropic": lambda: found["content"],
        "responses": lambda: found["output"],
        "gemini": lambda: next(iter(found["functionResponse"]["response"].values())),
    }
    text: str = shaped[answer["format"]]()
    return text


def named_call(text: str, after: str) -> dict[str, Any]:
    """The arguments of the recall call ``text`` names right after ``after``."""
    start = text.index(after) + len(after)
    args, _ = json.JSONDecoder().raw_decode(text[start:])
    assert isinstance(args, dict)
    return args


def read_whole(
    client: httpx.Client, sid: str, args: dict[str, Any], max_tokens: int, fmt: str = "openai"
) -> tuple[str, int]:
    """The original, read page by page as a model would: following each page's last line."""
    pages: list[str] = []
    for _ in range(10_000):
        answer = recall(
            client,
            sid,
            format=fmt,
            tool_call_id="call_recall",
            arguments=args,
            max_tokens=max_tokens,
        )
        assert not answer["is_error"], answer
        text, page = text_of(answer), answer["page"]
        assert page["offset"] == sum(len(p) for p in pages)
        shown = text[: page["chars"]]
        assert len(O200K.encode(shown, disallowed_special=())) <= max_tokens
        pages.append(shown)
        if page["next_offset"] is None:
            return "".join(pages), len(pages)
        args = named_call(text[page["chars"] :], "the next page: ctxc_recall ")
        assert args["offset"] == page["next_offset"]
    raise AssertionError("no last page")


def test_a_compile_with_recall_offers_the_tool_and_names_each_pointer(
    client: httpx.Client,
) -> None:
    sid = stored(client, agent_history())
    plain = compiled(client, sid, compiler=SPEC)
    assert "tools" not in plain
    mine = [{"type": "function", "function": {"name": "run_tests", "parameters": {}}}]
    answer = compiled(client, sid, compiler=RECALL_SPEC, tools=mine)
    assert answer["tools"] == [*mine, definition("openai")]
    sent = by_call(answer["messages"])
    assert sent["r1"]["result"].endswith(' The original: ctxc_recall {"call_id": "r1", "seq": 3}')
    assert named_call(sent["t1"]["result"], "The original: ctxc_recall ") == {
        "call_id": "t1",
        "seq": 7,
    }
    # The preview of the newest round's result names the tool instead of the HTTP path.
    assert 'the whole text: ctxc_recall {"call_id": "t2", "seq": 12}' in sent["t2"]["result"]
    assert "/tool-calls/" not in json.dumps(answer["messages"])
    # The tool's tokens are in the total, and the budget.
    with_mine = compiled(client, sid, compiler=SPEC, tools=mine)
    added = answer["tokens"]["total"] - with_mine["tokens"]["total"]
    assert added >= len(O200K.encode(json.dumps(definition("openai"))))
    # The tools sent back are not doubled.
    again = compiled(client, sid, compiler=RECALL_SPEC, tools=answer["tools"])
    assert again["tools"] == answer["tools"]


@pytest.mark.parametrize("max_tokens", [64, 500, 32_000])
def test_recalled_pages_join_to_exactly_the_stored_original(
    client: httpx.Client, max_tokens: int
) -> None:
    history = [
        {"role": "user", "content": "read it twice"},
        call("a1", "read_file", path="x.txt"),
        result("a1", MULTI_BYTE),
        call("a2", "read_file", path="x.txt"),
        result("a2", "short now"),
        {"role": "user", "content": "next"},
    ]
    sid = stored(client, [*agent_history(), *history])
    answer = compiled(client, sid, compiler=RECALL_SPEC)
    sent = by_call(answer["messages"])
    for call_id, original in (("a1", MULTI_BYTE), ("t1", LOG), ("r1", FILE_V1)):
        args = named_call(sent[call_id]["result"], "The original: ctxc_recall ")
        text, pages = read_whole(client, sid, args, max_tokens)
        assert text.encode() == original.encode()
        if max_tokens == 64:
            assert pages > 10
        if max_tokens == 32_000:
            assert pages == 1
    args = named_call(sent["t2"]["result"], "the whole text: ctxc_recall ")
    assert read_whole(client, sid, args, 500)[0] == LOG


def test_a_message_comes_back_by_its_seq_archived_or_not(client: httpx.Client) -> None:
    """A reduced round's cut text names the message by seq alone; its pages join to the text as
    first stored, also once a compaction archived it."""
    history = [
        {"role": "user", "content": "explain"},
        {"role": "assistant", "content": MULTI_BYTE},
        *[{"role": r, "content": f"turn {n}"} for n in range(6) for r in ("user", "assistant")],
        {"role": "user", "content": "next"},
    ]
    sid = stored(client, history)
    text, pages = read_whole(client, sid, {"seq": 2}, 300)
    assert text.encode() == MULTI_BYTE.encode() and pages > 1
    done = client.post(f"/v1/sessions/{sid}/compact", json={"kind": "full"})
    assert done.status_code == 201, done.text
    assert done.json()["seq_from"] <= 2 <= done.json()["seq_to"]
    assert read_whole(client, sid, {"seq": 2}, 300)[0] == MULTI_BYTE


def test_an_omitted_argument_comes_back_by_its_sha256(client: httpx.Client) -> None:
    history = [
        {"role": "user", "content": "write it twice"},
        call("w1", "write_file", path="a.py", content=MULTI_BYTE),
        result("w1", "ok"),
        call("w2", "write_file", path="a.py", content=FILE_V1),
        result("w2", "ok"),
        {"role": "user", "content": "done?"},
    ]
    sid = stored(client, history)
    spec = {
        "decorators": [
            {
                "name": "tool_compaction",
                "params": {"toolIdentifierFields": {"write_file": ["path"]}},
            },
            "recall",
        ]
    }
    answer = compiled(client, sid, compiler=spec)
    args = by_call(answer["messages"])["w1"]["arguments"]
    sha = args["_tool_compaction"]["omittedFields"]["content"]["sha256"]
    for fmt in ("openai", "anthropic", "responses", "gemini"):
        text, _ = read_whole(client, sid, {"sha256": sha}, 300, fmt)
        assert text == MULTI_BYTE


@pytest.mark.parametrize("provider", ["gpt-4o", "anthropic", "gemini", "openai-responses"])
def test_the_answer_appended_back_compiles_provider_valid(
    client: httpx.Client, provider: str
) -> None:
    sid = stored(client, agent_history(), provider=provider)
    fmt = {"gpt-4o": "openai", "openai-responses": "responses"}.get(provider, provider)
    answer = compiled(client, sid, compiler=RECALL_SPEC)
    assert answer["format"] == fmt and answer["tools"] == [definition(fmt)]
    args = {"call_id": "t1", "seq": 7}
    got = recall(client, sid, tool_call_id="toolu_recall1", arguments=args)  # the session's shape
    assert got["format"] == fmt and not got["is_error"]
    if fmt == "openai":
        turn = [
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "toolu_recall1",
                        "type": "function",
                        "function": {"name": "ctxc_recall", "arguments": json.dumps(args)},
                    }
                ],
            },
            got["result"],
        ]
    elif fmt == "responses":
        call = {
            "type": "function_call",
            "call_id": "toolu_recall1",
            "name": "ctxc_recall",
            "arguments": json.dumps(args),
        }
        turn = [call, got["result"]]
    elif fmt == "gemini":
        call = {"functionCall": {"id": "toolu_recall1", "name": "ctxc_recall", "args": args}}
        turn = [{"role": "model", "parts": [call]}, {"role": "user", "parts": [got["result"]]}]
    else:
        use = {"type": "tool_use", "id": "toolu_recall1", "name": "ctxc_recall", "input": args}
        turn = [
            {"role": "assistant", "content": [use]},
            {"role": "user", "content": [got["result"]]},
        ]
    posted = client.post(f"/v1/sessions/{sid}/messages", json={"format": fmt, "messages": turn})
    assert posted.status_code == 201, posted.text
    after = compiled(client, sid, compiler=RECALL_SPEC)  # valid() checks the provider's rules
    last = after["messages"][-1]
    sent = {
        "openai": lambda: last["content"],
        "anthropic": lambda: last["content"][0]["content"],
        "gemini": lambda: last["parts"][0]["functionResponse"]["response"]["output"],
        "responses": lambda: last["output"],
    }[fmt]()
    assert sent == text_of(got) and sent.startswith(LOG[:1000])


def test_a_pointer_to_nothing_is_a_tool_error_not_a_404(api: Api, client: httpx.Client) -> None:
    sid = stored(client, agent_history())
    before = row_counts(api.database_url)
    wrong: list[tuple[Any, str]] = [
        ({"call_id": "nope"}, "no tool call 'nope' in this session"),
        ({"call_id": "t1", "seq": 9}, "no tool call 't1' at seq 9"),
        ({"sha256": "a" * 64}, "no payload with sha256"),
        ({"call_id": "t1", "offset": 10**9}, "past the end of the text"),
        ("{not json", "not a JSON object"),
        ({}, "give call_id"),
        ({"seq": 99}, "no message at seq 99"),
        ({"call_id": "t1", "seq": "three"}, "seq must be a whole number"),
        ({"call_id": "t\u0000"}, "call_id must be"),
        ('{"call_id": "t\\u0000"}', "call_id must be"),
    ]
    for args, said in wrong:
        for fmt in ("openai", "anthropic", "responses", "gemini"):
            got = recall(client, sid, format=fmt, tool_call_id="c9", arguments=args)
            assert got["is_error"] and got["page"] is None
            assert said in text_of(got), (args, text_of(got))
            if fmt == "anthropic":
                assert got["result"]["is_error"] is True
            if fmt == "gemini":
                assert "error" in got["result"]["functionResponse"]["response"]
    # A string of arguments, as OpenAI gives them, works like the object.
    got = recall(client, sid, tool_call_id="c9", arguments='{"call_id": "w1", "seq": 5}')
    assert text_of(got) == json.dumps({"status": "ok", "bytes": len(FILE_V1.replace("one", "two"))})
    assert row_counts(api.database_url) == before


def test_a_malformed_body_is_a_422_naming_the_field(client: httpx.Client) -> None:
    sid = stored(client, agent_history())
    args = {"call_id": "t1"}
    for body, field in [
        ({"tool_call_id": "c1"}, "arguments"),
        ({"arguments": args}, "tool_call_id"),
        ({"tool_call_id": "c1", "arguments": args, "max_tokens": 10**6}, "max_tokens"),
        ({"tool_call_id": "c1", "arguments": args, "format": "xml"}, "format"),
        ({"tool_call_id": "c1", "arguments": args, "name": "bad name"}, "name"),
        ({"tool_call_id": "c1", "arguments": [1]}, "arguments"),
        ({"tool_call_id": "c1", "arguments": args, "extra": 1}, "extra"),
    ]:
        response = client.post(f"/v1/sessions/{sid}/recall", json=body)
        assert response.status_code == 422, (body, response.text)
        assert field in response.text
    # Gemini's calls may have no id.
    got = recall(client, sid, format="gemini", arguments=args)
    assert "id" not in got["result"]["functionResponse"] and not got["is_error"]
    missing = client.post("/v1/sessions/nope/recall", json={"tool_call_id": "c", "arguments": args})
    assert missing.status_code == 404


def test_another_tenants_session_is_not_found(api: Api, client: httpx.Client) -> None:
    sid = stored(client, agent_history())
    with api.client(api.key_b) as other:
        response = other.post(
            f"/v1/sessions/{sid}/recall", json={"tool_call_id": "c", "arguments": {"call_id": "t1"}}
        )
    assert response.status_code == 404


def test_recall_needs_a_session_and_the_outer_place(client: httpx.Client) -> None:
    posted = client.post(
        "/v1/compile",
        json={"messages": agent_history(), "provider": "gpt-4o", "compiler": RECALL_SPEC},
    )
    assert posted.status_code == 422
    assert "compiler.decorators[3].params" in posted.text and "stored session" in posted.text
    sid = stored(client, agent_history())
    early = {"decorators": ["recall", "token_limit"]}
    response = client.post(f"/v1/sessions/{sid}/compile", json={"compiler": early})
    assert response.status_code == 422
    assert "compiler.decorators[0].name" in response.text
    assert "recall must come after token_limit" in response.text


def test_a_model_calls_the_tool_through_the_openai_sdk_and_the_next_compile_carries_it(
    client: httpx.Client,
) -> None:
    sid = stored(client, agent_history())
    mine = [
        {
            "type": "function",
            "function": {"name": "run_tests", "parameters": {"type": "object", "properties": {}}},
        }
    ]
    answer = compiled(client, sid, compiler=RECALL_SPEC, tools=mine)
    # The model reads the pointer in the placeholder and calls the tool with it.
    args = named_call(by_call(answer["messages"])["t1"]["result"], "The original: ctxc_recall ")
    with (
        Upstream() as upstream,
        openai.OpenAI(base_url=upstream.openai_base, api_key="sk-test", max_retries=0) as gpt,
    ):
        upstream.script.append(ToolCall(name="ctxc_recall", arguments=args))
        reply = gpt.chat.completions.create(
            model="gpt-4o", messages=answer["messages"], tools=answer["tools"]
        )
        offered = upstream.requests[-1].body["tools"]
        assert [t["function"]["name"] for t in offered] == ["run_tests", "ctxc_recall"]
        message = reply.choices[0].message
        assert message.tool_calls is not None
        called = message.tool_calls[0]
        assert called.type == "function" and called.function.name == "ctxc_recall"
        # The caller runs the call through ctxc, as it got it (the arguments' JSON text).
        got = recall(client, sid, tool_call_id=called.id, arguments=called.function.arguments)
        assert not got["is_error"] and got["result"]["tool_call_id"] == called.id
        turn = [
            {"role": "assistant", "content": None, "tool_calls": [called.model_dump()]},
            got["result"],
        ]
        posted = client.post(f"/v1/sessions/{sid}/messages", json={"messages": turn})
        assert posted.status_code == 201, posted.text
        after = compiled(client, sid, compiler=RECALL_SPEC, tools=answer["tools"])
        assert after["messages"][-2]["tool_calls"][0]["id"] == called.id
        assert after["messages"][-1] == got["result"]
        assert LOG.startswith(got["result"]["content"][: got["page"]["chars"]])
        final = gpt.chat.completions.create(
            model="gpt-4o", messages=after["messages"], tools=after["tools"]
        )
        assert final.choices[0].message.content == DEFAULT_TEXT
