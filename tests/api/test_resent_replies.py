"""An upstream's answer, resent by a client as the official SDK dumps it, is stored as the reply
ctxc reads from the same answer: one canonical message, on both databases.

Agents append the answer to their history and resend it every turn; ctxc recognises the part it
already stores only if both read the same. The SDKs read the recorded answers here themselves,
whole (``model_validate``) and streamed (their stream helpers, from a local server sending the
recorded bytes), and dump them as a user would (``model_dump()``) and as the SDK sends a model
object it is given (``model_dump(mode="json", exclude_unset=True)``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import anthropic
import httpx
import openai
import pytest
from openai.types.chat import ChatCompletion

from app.domain.formats.anthropic import from_anthropic
from app.domain.formats.openai import from_openai
from app.domain.wire import ReplyStream, reply_of
from app.domain.wire.reply import Provider
from tests.adapters.stubs import Answer, StubServer
from tests.conftest import new_session
from tests.unit.test_wire import (
    ANTHROPIC_SEARCH_STREAM,
    ANTHROPIC_TEXT,
    ANTHROPIC_TEXT_STREAM,
    ANTHROPIC_THINKING_STREAM,
    ANTHROPIC_TOOL_STREAM,
    OPENAI_REFUSAL,
    OPENAI_TEXT,
    OPENAI_TEXT_STREAM,
    OPENAI_TOOL_CALL,
    OPENAI_TOOL_STREAM,
)

USER = {"role": "user", "content": "What is the weather in Paris?"}
MODEL = "ctxc-test-model"  # a name of our own: the SDKs warn for models they know are deprecated
Dump = Callable[[Any], Any]
DUMPS: dict[str, Dump] = {
    "model_dump": lambda model: model.model_dump(),
    "as the sdk sends it": lambda model: model.model_dump(mode="json", exclude_unset=True),
}


def stored(client: httpx.Client, provider: Provider, message: dict[str, Any]) -> dict[str, Any]:
    """The canonical message ctxc stores for ``message`` posted after a user turn."""
    sid = new_session(client, provider=provider)
    body = {"format": provider, "messages": [USER, message]}
    posted = client.post(f"/v1/sessions/{sid}/messages", json=body)
    assert posted.status_code == 201, posted.text
    items = client.get(f"/v1/sessions/{sid}/messages").json()["items"]
    assert [item["seq"] for item in items] == [1, 2]
    found: dict[str, Any] = items[1]["message"]
    return found


def read(provider: Provider, message: dict[str, Any]) -> dict[str, Any]:
    """The canonical message the format parser reads (what ctxc would store)."""
    [found] = from_openai([message]) if provider == "openai" else from_anthropic([message])
    return found.to_json()


def assert_stored_alike(
    client: httpx.Client, provider: Provider, resent: dict[str, Any], ours: dict[str, Any]
) -> None:
    expected = read(provider, ours)
    assert stored(client, provider, resent) == expected
    assert stored(client, provider, ours) == expected


@pytest.mark.parametrize("dump", DUMPS)
@pytest.mark.parametrize("body", [OPENAI_TEXT, OPENAI_TOOL_CALL, OPENAI_REFUSAL])
def test_an_openai_answer_resent_by_the_sdk_is_stored_as_its_reply(
    client: httpx.Client, body: dict[str, Any], dump: str
) -> None:
    resent = DUMPS[dump](ChatCompletion.model_validate(body).choices[0].message)
    assert_stored_alike(client, "openai", resent, reply_of("openai", body).message)


@pytest.mark.parametrize("dump", DUMPS)
def test_an_anthropic_answer_resent_by_the_sdk_is_stored_as_its_reply(
    client: httpx.Client, dump: str
) -> None:
    content = anthropic.types.Message.model_validate(ANTHROPIC_TEXT).content
    resent = {"role": "assistant", "content": [DUMPS[dump](block) for block in content]}
    assert_stored_alike(client, "anthropic", resent, reply_of("anthropic", ANTHROPIC_TEXT).message)


def served(data: bytes) -> StubServer:
    """A local upstream that answers every request with the recorded event stream ``data``."""
    return StubServer(lambda _: Answer(200, data, {"content-type": "text/event-stream"}))


def ours(provider: Provider, data: bytes) -> dict[str, Any]:
    stream = ReplyStream(provider)
    stream.feed(data)
    reply = stream.reply()
    assert reply is not None
    return reply.message


@pytest.mark.parametrize("dump", DUMPS)
@pytest.mark.parametrize("data", [OPENAI_TEXT_STREAM, OPENAI_TOOL_STREAM])
def test_an_openai_stream_the_sdk_assembled_and_resent_is_stored_as_its_reply(
    client: httpx.Client, data: bytes, dump: str
) -> None:
    with served(data) as upstream:
        sdk = openai.OpenAI(base_url=upstream.url, api_key="test", max_retries=0)
        with sdk.chat.completions.stream(model=MODEL, messages=[USER]) as stream:  # type: ignore[list-item]
            message = stream.get_final_completion().choices[0].message
        sdk.close()
    assert_stored_alike(client, "openai", DUMPS[dump](message), ours("openai", data))


@pytest.mark.parametrize("dump", DUMPS)
@pytest.mark.parametrize(
    "data",
    [
        ANTHROPIC_TEXT_STREAM,
        ANTHROPIC_TOOL_STREAM,
        ANTHROPIC_THINKING_STREAM,
        ANTHROPIC_SEARCH_STREAM,
    ],
)
def test_an_anthropic_stream_the_sdk_assembled_and_resent_is_stored_as_its_reply(
    client: httpx.Client, data: bytes, dump: str
) -> None:
    with served(data) as upstream:
        sdk = anthropic.Anthropic(base_url=upstream.url, api_key="test", max_retries=0)
        with sdk.messages.stream(model=MODEL, max_tokens=64, messages=[USER]) as stream:  # type: ignore[list-item]
            content = stream.get_final_message().content
        sdk.close()
    resent = {"role": "assistant", "content": [DUMPS[dump](block) for block in content]}
    assert_stored_alike(client, "anthropic", resent, ours("anthropic", data))
