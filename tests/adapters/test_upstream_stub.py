"""The local upstream (tests/upstreams.py) speaks OpenAI and Anthropic as the official SDKs expect:
answers, streams, tool calls, usage and errors parse into the SDKs' own types and exceptions."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import anthropic
import httpx
import openai
import pytest

from app.adapters.tokenizers import load_encoding
from tests.upstreams import DEFAULT_TEXT, Delay, Drop, Error, Stall, Text, ToolCall, Upstream

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "read_file",
            "description": "Read a file.",
            "parameters": {
                "type": "object",
                "properties": {"path": {"type": "string"}, "lines": {"type": "integer"}},
                "required": ["path"],
            },
        },
    }
]
ANTHROPIC_TOOLS = [
    {
        "name": "read_file",
        "description": "Read a file.",
        "input_schema": TOOLS[0]["function"]["parameters"],
    }
]
PROMPT = [{"role": "user", "content": "Read the README."}]
ANTHROPIC_VERSION = {"anthropic-version": "2023-06-01"}


@pytest.fixture(scope="module")
def up() -> Iterator[Upstream]:
    with Upstream() as upstream:
        yield upstream


@pytest.fixture(autouse=True)
def empty_script(up: Upstream) -> Iterator[None]:
    up.script.clear()
    yield
    up.script.clear()


@contextmanager
def sdk_clients(upstream: Upstream) -> Iterator[tuple[openai.OpenAI, anthropic.Anthropic]]:
    """The official SDK clients on ``upstream``, retries off (each error is seen as sent)."""
    with (
        openai.OpenAI(base_url=upstream.openai_base, api_key="sk-test-key", max_retries=0) as gpt,
        anthropic.Anthropic(
            base_url=upstream.anthropic_base, api_key="sk-ant-test", max_retries=0
        ) as claude,
    ):
        yield gpt, claude


@pytest.fixture
def gpt(up: Upstream) -> Iterator[openai.OpenAI]:
    with sdk_clients(up) as (client, _):
        yield client


@pytest.fixture
def claude(up: Upstream) -> Iterator[anthropic.Anthropic]:
    with sdk_clients(up) as (_, client):
        yield client


def prompt_tokens(**prompt: Any) -> int:
    """The documented counting rule: o200k_base over the compact JSON of tools, system, messages."""
    text = json.dumps(prompt, separators=(",", ":"), ensure_ascii=False)
    return len(load_encoding("o200k_base").encode_ordinary(text))


def test_openai_text_answer_parses_with_usage_counted_by_the_documented_rule(
    up: Upstream, gpt: openai.OpenAI
) -> None:
    up.script.append(Text("Here it is."))
    completion = gpt.chat.completions.create(model="gpt-4o", messages=PROMPT)
    [choice] = completion.choices
    assert (choice.message.content, choice.finish_reason) == ("Here it is.", "stop")
    assert completion.model == "gpt-4o"
    usage = completion.usage
    assert usage is not None and usage.prompt_tokens_details is not None
    assert usage.prompt_tokens == prompt_tokens(messages=PROMPT)
    assert usage.total_tokens == usage.prompt_tokens + usage.completion_tokens
    assert usage.prompt_tokens_details.cached_tokens == 0
    seen = up.requests[-1]
    assert seen.path == "/v1/chat/completions"
    assert seen.headers["authorization"] == "Bearer sk-test-key"
    assert seen.body["messages"] == PROMPT


def test_openai_default_agent_calls_the_first_tool_then_answers_its_result(
    up: Upstream, gpt: openai.OpenAI
) -> None:
    first = gpt.chat.completions.create(model="gpt-4o", messages=PROMPT, tools=TOOLS)
    assert first.choices[0].finish_reason == "tool_calls"
    [call] = first.choices[0].message.tool_calls or []
    assert call.type == "function" and call.id
    assert (call.function.name, json.loads(call.function.arguments)) == (
        "read_file",
        {"path": "example"},
    )
    history = [
        *PROMPT,
        first.choices[0].message.model_dump(exclude_none=True),
        {"role": "tool", "tool_call_id": call.id, "content": "# README"},
    ]
    second = gpt.chat.completions.create(model="gpt-4o", messages=history, tools=TOOLS)
    assert (second.choices[0].message.content, second.choices[0].finish_reason) == (
        DEFAULT_TEXT,
        "stop",
    )


def test_openai_stream_ends_with_a_usage_chunk_only_when_asked(
    up: Upstream, gpt: openai.OpenAI
) -> None:
    up.script.extend([Text(chars=100), Text(chars=100)])
    with_usage = list(
        gpt.chat.completions.create(
            model="gpt-4o",
            messages=PROMPT,
            stream=True,
            stream_options={"include_usage": True},
        )
    )
    *answer, last = with_usage
    assert last.choices == [] and last.usage is not None and last.usage.completion_tokens > 0
    assert all(chunk.usage is None for chunk in answer)
    assert len("".join(c.choices[0].delta.content or "" for c in answer)) == 100
    assert answer[-1].choices[0].finish_reason == "stop"
    plain = list(gpt.chat.completions.create(model="gpt-4o", messages=PROMPT, stream=True))
    assert all(chunk.choices for chunk in plain) and len(plain) == len(answer)


def test_openai_streamed_tool_call_arrives_in_index_keyed_pieces(
    up: Upstream, gpt: openai.OpenAI
) -> None:
    up.script.append(ToolCall("read_file", {"path": "docs/guide.md", "lines": 40}))
    chunks = list(
        gpt.chat.completions.create(
            model="gpt-4o",
            messages=PROMPT,
            tools=TOOLS,
            stream=True,
        )
    )
    calls = [call for c in chunks for call in c.choices[0].delta.tool_calls or []]
    assert {call.index for call in calls} == {0} and calls[0].id and calls[0].type == "function"
    pieces = [
        call.function.arguments for call in calls if call.function and call.function.arguments
    ]
    assert len(pieces) > 2
    assert json.loads("".join(pieces)) == {"path": "docs/guide.md", "lines": 40}
    assert chunks[-1].choices[0].finish_reason == "tool_calls"
    with gpt.chat.completions.stream(model="gpt-4o", messages=PROMPT, tools=TOOLS) as stream:
        [call] = stream.get_final_completion().choices[0].message.tool_calls or []
    assert call.function.name == "read_file"


@pytest.mark.parametrize(
    ("kind", "error", "status"),
    [
        ("overflow", openai.BadRequestError, 400),
        ("rate_limit", openai.RateLimitError, 429),
        ("server", openai.InternalServerError, 500),
        ("overloaded", openai.InternalServerError, 503),
    ],
)
def test_openai_errors_raise_the_sdks_own_exceptions(
    up: Upstream, gpt: openai.OpenAI, kind: Any, error: type[openai.APIStatusError], status: int
) -> None:
    up.script.append(Error(kind, retry_after=2))
    with pytest.raises(error) as raised:
        gpt.chat.completions.create(model="gpt-4o", messages=PROMPT)
    assert raised.value.status_code == status
    assert raised.value.response.headers["x-request-id"]
    if kind == "overflow":
        assert raised.value.code == "context_length_exceeded"
        assert raised.value.message.startswith("Error code: 400 - ")
        assert "This model's maximum context length is" in raised.value.message
    if kind == "rate_limit":
        assert raised.value.response.headers["retry-after"] == "2"
        assert raised.value.code == "rate_limit_exceeded"


def test_a_prompt_over_the_window_gets_the_real_overflow_errors() -> None:
    long = [{"role": "user", "content": "word " * 400}]
    count = prompt_tokens(messages=long)
    with Upstream(window=100) as small, sdk_clients(small) as (gpt, claude):
        small.script.append(Text("kept"))
        with pytest.raises(openai.BadRequestError) as too_long:
            gpt.chat.completions.create(model="gpt-4o", messages=long)
        assert too_long.value.body == {
            "message": f"This model's maximum context length is 100 tokens. However, your "
            f"messages resulted in {count} tokens. Please reduce the length of the messages.",
            "type": "invalid_request_error",
            "param": "messages",
            "code": "context_length_exceeded",
        }
        with pytest.raises(anthropic.BadRequestError) as too_long_too:
            claude.messages.create(model="claude-x", max_tokens=50, messages=long)
        assert too_long_too.value.body["error"] == {  # type: ignore[index]
            "type": "invalid_request_error",
            "message": f"prompt is too long: {count} tokens > 100 maximum",
        }
        assert list(small.script) == [Text("kept")]  # refused before any step is consumed


def test_openai_needs_a_bearer_key_and_the_configured_one() -> None:
    with Upstream(api_key="sk-right-key-1234") as keyed, sdk_clients(keyed) as (gpt, _):
        bare = httpx.post(f"{keyed.openai_base}/chat/completions", json={})
        assert bare.status_code == 401
        assert bare.json()["error"]["message"].startswith("You didn't provide an API key.")
        with pytest.raises(openai.AuthenticationError) as wrong:
            gpt.chat.completions.create(model="gpt-4o", messages=PROMPT)
        assert wrong.value.code == "invalid_api_key"
        assert "sk-****-key" in wrong.value.message
        right = gpt.with_options(api_key="sk-right-key-1234")
        assert right.chat.completions.create(model="gpt-4o", messages=PROMPT).choices


def test_async_openai_streams_the_answer(up: Upstream) -> None:
    up.script.append(Text("streamed for an async client"))

    async def run() -> str:
        async with openai.AsyncOpenAI(base_url=up.openai_base, api_key="k", max_retries=0) as c:
            stream = await c.chat.completions.create(model="m", messages=PROMPT, stream=True)
            return "".join([chunk.choices[0].delta.content or "" async for chunk in stream])

    assert asyncio.run(run()) == "streamed for an async client"


def test_a_repeated_long_prefix_is_reported_cached(up: Upstream, gpt: openai.OpenAI) -> None:
    long = [{"role": "system", "content": "rules " * 2000}, *PROMPT]
    first = gpt.chat.completions.create(model="gpt-cache", messages=long)
    longer = [*long, {"role": "assistant", "content": "ok"}, {"role": "user", "content": "more"}]
    second = gpt.chat.completions.create(model="gpt-cache", messages=longer)
    assert first.usage and first.usage.prompt_tokens_details
    assert second.usage and second.usage.prompt_tokens_details
    assert first.usage.prompt_tokens_details.cached_tokens == 0
    cached = second.usage.prompt_tokens_details.cached_tokens or 0
    assert 1024 <= cached <= first.usage.prompt_tokens and cached % 128 == 0


def test_anthropic_text_and_tool_use_answers_parse(
    up: Upstream, claude: anthropic.Anthropic
) -> None:
    call = claude.messages.create(
        model="claude-x", max_tokens=100, messages=PROMPT, tools=ANTHROPIC_TOOLS
    )
    [block] = call.content
    assert call.stop_reason == "tool_use" and block.type == "tool_use"
    assert (block.name, block.input) == ("read_file", {"path": "example"})
    assert call.usage.input_tokens == prompt_tokens(tools=ANTHROPIC_TOOLS, messages=PROMPT)
    assert (call.usage.cache_read_input_tokens, call.usage.cache_creation_input_tokens) == (0, 0)
    history = [
        *PROMPT,
        {"role": "assistant", "content": [block.model_dump()]},
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": block.id, "content": "# README"}],
        },
    ]
    answer = claude.messages.create(
        model="claude-x", max_tokens=100, messages=history, tools=ANTHROPIC_TOOLS
    )
    assert answer.stop_reason == "end_turn"
    assert [b.text for b in answer.content if b.type == "text"] == [DEFAULT_TEXT]
    assert up.requests[-1].path == "/v1/messages"


def test_anthropic_stream_sends_every_event_kind_and_parses(
    up: Upstream, claude: anthropic.Anthropic
) -> None:
    up.script.extend([Text(chars=50), ToolCall(arguments={"path": "a/long/path/to/read.md"})])
    with claude.messages.stream(model="claude-x", max_tokens=100, messages=PROMPT) as stream:
        message = stream.get_final_message()
    assert message.stop_reason == "end_turn" and message.usage.output_tokens > 1
    assert len(message.content[0].text) == 50
    events = list(
        claude.messages.create(
            model="claude-x",
            max_tokens=100,
            messages=PROMPT,
            tools=ANTHROPIC_TOOLS,
            stream=True,
        )
    )
    kinds = [event.type for event in events]
    assert kinds[:2] == ["message_start", "content_block_start"]
    assert kinds[-3:] == ["content_block_stop", "message_delta", "message_stop"]
    deltas = [event.delta for event in events if event.type == "content_block_delta"]
    partial = [delta.partial_json for delta in deltas if delta.type == "input_json_delta"]
    assert len(partial) > 2 and json.loads("".join(partial)) == {"path": "a/long/path/to/read.md"}
    delta = next(event for event in events if event.type == "message_delta")
    assert delta.delta.stop_reason == "tool_use" and delta.usage.output_tokens > 0


def test_anthropic_ping_comes_between_block_start_and_deltas(up: Upstream) -> None:
    headers = {"x-api-key": "k", **ANTHROPIC_VERSION}
    body = {"model": "claude-x", "max_tokens": 10, "messages": PROMPT, "stream": True}
    with httpx.stream("POST", f"{up.url}/v1/messages", json=body, headers=headers) as response:
        events = [line[7:] for line in response.iter_lines() if line.startswith("event: ")]
        assert response.headers["content-type"].startswith("text/event-stream")
    assert events[:4] == ["message_start", "content_block_start", "ping", "content_block_delta"]


@pytest.mark.parametrize(
    ("kind", "error", "status", "type_"),
    [
        ("overflow", anthropic.BadRequestError, 400, "invalid_request_error"),
        ("rate_limit", anthropic.RateLimitError, 429, "rate_limit_error"),
        ("server", anthropic.InternalServerError, 500, "api_error"),
        ("overloaded", anthropic.OverloadedError, 529, "overloaded_error"),
    ],
)
def test_anthropic_errors_raise_the_sdks_own_exceptions(
    up: Upstream,
    claude: anthropic.Anthropic,
    kind: Any,
    error: type[anthropic.APIStatusError],
    status: int,
    type_: str,
) -> None:
    up.script.append(Error(kind, retry_after=0.5))
    with pytest.raises(error) as raised:
        claude.messages.create(model="claude-x", max_tokens=10, messages=PROMPT)
    assert raised.value.status_code == status
    body: Any = raised.value.body
    assert body["type"] == "error" and body["error"]["type"] == type_
    assert body["request_id"] == raised.value.response.headers["request-id"]
    if kind == "overflow":
        assert body["error"]["message"].startswith("prompt is too long: ")
    if kind == "rate_limit":
        assert raised.value.response.headers["retry-after"] == "0.5"


def test_anthropic_needs_a_key_and_a_version(up: Upstream) -> None:
    body = {"model": "claude-x", "max_tokens": 10, "messages": PROMPT}
    no_key = httpx.post(f"{up.url}/v1/messages", json=body, headers=ANTHROPIC_VERSION)
    assert (no_key.status_code, no_key.json()["error"]) == (
        401,
        {"type": "authentication_error", "message": "x-api-key header is required"},
    )
    no_version = httpx.post(f"{up.url}/v1/messages", json=body, headers={"x-api-key": "k"})
    assert (no_version.status_code, no_version.json()["error"]) == (
        400,
        {"type": "invalid_request_error", "message": "anthropic-version: header is required"},
    )
    both = httpx.post(
        f"{up.url}/v1/messages", json=body, headers={"x-api-key": "k", **ANTHROPIC_VERSION}
    )
    assert both.status_code == 200 and both.json()["type"] == "message"


def test_async_anthropic_streams_the_answer(up: Upstream) -> None:
    up.script.append(Text("async answer", provider="anthropic"))

    async def run() -> str:
        async with (
            anthropic.AsyncAnthropic(
                base_url=up.anthropic_base, api_key="k", max_retries=0
            ) as client,
            client.messages.stream(model="claude-x", max_tokens=10, messages=PROMPT) as stream,
        ):
            return await stream.get_final_text()

    assert asyncio.run(run()) == "async answer"


def test_anthropic_reports_cache_reads_for_a_marked_prompt(
    up: Upstream, claude: anthropic.Anthropic
) -> None:
    system = [{"type": "text", "text": "rules " * 2000, "cache_control": {"type": "ephemeral"}}]
    first = claude.messages.create(
        model="claude-cache", max_tokens=10, system=system, messages=PROMPT
    )
    second = claude.messages.create(
        model="claude-cache", max_tokens=10, system=system, messages=PROMPT
    )
    count = prompt_tokens(system=system, messages=PROMPT)
    for usage in (first.usage, second.usage):
        parts = [
            usage.input_tokens,
            usage.cache_read_input_tokens,
            usage.cache_creation_input_tokens,
        ]
        assert sum(part or 0 for part in parts) == count
    assert first.usage.cache_read_input_tokens == 0 and first.usage.cache_creation_input_tokens
    assert second.usage.cache_read_input_tokens == first.usage.cache_creation_input_tokens


def test_an_error_mid_stream_comes_as_each_providers_error_event(
    up: Upstream, gpt: openai.OpenAI, claude: anthropic.Anthropic
) -> None:
    up.script.append(Error("server", after_chunks=2, provider="openai"))
    stream = gpt.chat.completions.create(model="gpt-4o", messages=PROMPT, stream=True)
    with pytest.raises(openai.APIError) as broken:
        list(stream)
    assert broken.value.body == {
        "message": "The server had an error while processing your request. Sorry about that!",
        "type": "server_error",
        "param": None,
        "code": None,
    }
    up.script.append(Error("overloaded", after_chunks=3, provider="anthropic"))
    with (
        pytest.raises(anthropic.APIStatusError) as overloaded,
        claude.messages.stream(model="claude-x", max_tokens=10, messages=PROMPT) as events,
    ):
        for _ in events:
            pass
    assert overloaded.value.status_code == 200  # the stream had begun
    assert overloaded.value.body["error"] == {  # type: ignore[index]
        "type": "overloaded_error",
        "message": "Overloaded",
    }


def test_a_step_for_one_provider_waits_for_its_request(
    up: Upstream, gpt: openai.OpenAI, claude: anthropic.Anthropic
) -> None:
    up.script.append(Text("for claude", provider="anthropic"))
    answer = gpt.chat.completions.create(model="gpt-4o", messages=PROMPT)
    assert answer.choices[0].message.content == DEFAULT_TEXT
    message = claude.messages.create(model="claude-x", max_tokens=10, messages=PROMPT)
    assert message.content[0].text == "for claude"


def test_a_client_that_leaves_a_stalled_stream_is_recorded_cancelled(
    up: Upstream, gpt: openai.OpenAI
) -> None:
    before = len(up.cancelled)
    up.script.append(Stall(after_chunks=2, seconds=30, then=Text(chars=200)))
    stream = gpt.chat.completions.create(model="gpt-4o", messages=PROMPT, stream=True)
    first = next(iter(stream))
    assert first.choices[0].delta.role == "assistant"
    stream.close()
    assert up.wait_cancelled(before + 1)[-1] is up.requests[-1]


def test_a_client_that_leaves_a_long_stream_midway_is_recorded_cancelled(
    up: Upstream, claude: anthropic.Anthropic
) -> None:
    before = len(up.cancelled)
    up.script.append(Text(chars=2_000_000))
    with claude.messages.stream(model="claude-x", max_tokens=10, messages=PROMPT) as stream:
        for _, event in zip(range(5), stream, strict=False):
            assert event.type
    assert up.wait_cancelled(before + 1)[-1] is up.requests[-1]


def test_a_patient_client_gets_the_whole_stalled_stream(
    up: Upstream, claude: anthropic.Anthropic
) -> None:
    up.script.append(Stall(after_chunks=3, seconds=0.2, then=Text("slow but complete")))
    with claude.messages.stream(model="claude-x", max_tokens=10, messages=PROMPT) as stream:
        assert stream.get_final_text() == "slow but complete"


def test_a_delay_makes_a_short_timeout_client_give_up_and_is_recorded(
    up: Upstream, gpt: openai.OpenAI, claude: anthropic.Anthropic
) -> None:
    before = len(up.cancelled)
    up.script.append(Delay(30))
    with pytest.raises(openai.APITimeoutError):
        gpt.with_options(timeout=0.5).chat.completions.create(model="gpt-4o", messages=PROMPT)
    up.wait_cancelled(before + 1)
    up.script.append(Delay(30, then=Error("overloaded")))
    with pytest.raises(anthropic.APITimeoutError):
        claude.with_options(timeout=0.5).messages.create(
            model="claude-x", max_tokens=10, messages=PROMPT
        )
    up.wait_cancelled(before + 2)


def test_a_dropped_stream_breaks_the_clients_read_and_is_not_a_cancel(
    up: Upstream, gpt: openai.OpenAI, claude: anthropic.Anthropic
) -> None:
    before = len(up.cancelled)
    up.script.append(Drop(after_chunks=3, then=Text(chars=300)))
    stream = gpt.chat.completions.create(model="gpt-4o", messages=PROMPT, stream=True)
    with pytest.raises((httpx.RemoteProtocolError, openai.APIConnectionError)):
        list(stream)
    up.script.append(Drop(after_chunks=0))
    with pytest.raises(anthropic.APIConnectionError):
        claude.messages.create(model="claude-x", max_tokens=10, messages=PROMPT)
    assert len(up.cancelled) == before
