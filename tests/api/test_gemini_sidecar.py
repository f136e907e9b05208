"""The Gemini sidecar end to end: the official SDK (google-genai) and httpx as the agent's client
against a real `ctxc` server forwarding to a real local stand-in of the Gemini API
(tests/upstream_gemini.py), on each database: a function-calling loop stored and compacted,
thought signatures byte-exact, other paths forwarded, bad input refused in Google's shape."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from google import genai
from google.genai import types

from app.domain.validity import request_problems
from app.settings import Settings
from tests.conftest import METRICS_TOKEN, LiveServer, make_key, row_counts, scrape
from tests.upstream_gemini import GeminiUpstream

KEY = "AIza-test-key"
MODEL = "gemini-3-pro-preview"
TOOLS = [
    {
        "functionDeclarations": [
            {
                "name": "read_file",
                "description": "Read a file",
                "parameters": {
                    "type": "object",
                    "properties": {"path": {"type": "string"}},
                    "required": ["path"],
                },
            }
        ]
    }
]


@dataclass(frozen=True)
class Gemini:
    url: str
    key: str
    upstream: GeminiUpstream
    database_url: str

    def client(self, session: str | None = None, window: int | None = None) -> httpx.Client:
        headers = {"X-Ctxc-Api-Key": self.key, "x-goog-api-key": KEY}
        if session:
            headers["X-Ctxc-Session"] = session
        if window:
            headers["X-Ctxc-Context-Window"] = str(window)
        return httpx.Client(base_url=f"{self.url}/gemini", headers=headers, timeout=60)

    def ctxc(self) -> httpx.Client:
        return httpx.Client(
            base_url=self.url, headers={"Authorization": f"Bearer {self.key}"}, timeout=60
        )


@pytest.fixture(scope="module")
def gemini(database_url: str) -> Iterator[Gemini]:
    with GeminiUpstream(api_key=KEY) as upstream:
        settings = Settings(
            database_url=database_url,
            auth="keys",
            gemini_upstream=upstream.url,
            upstream_timeout_seconds=10,
            metrics_token=METRICS_TOKEN,
        )
        key = make_key(database_url, f"gemini-{uuid.uuid4().hex[:6]}")
        with LiveServer(settings) as server:
            yield Gemini(server.url, key, upstream, database_url)


@pytest.fixture
def up(gemini: Gemini) -> Iterator[GeminiUpstream]:
    upstream = gemini.upstream
    upstream.requests.clear()
    upstream.window = 1_000_000
    yield upstream
    assert upstream.problems == []
    for seen in upstream.requests:  # every request ctxc forwarded is one Gemini accepts
        if seen.path.endswith("Content"):
            body = seen.body
            problems = request_problems("gemini", body.get("systemInstruction"), body["contents"])
            assert problems == [], body


def streamed(answer: httpx.Response) -> dict[str, Any]:
    """A ``alt=sse`` answer's content, merged as Gemini CLI merges it (thoughts left out)."""
    parts: list[dict[str, Any]] = []
    for line in answer.text.splitlines():
        if not line.startswith("data: "):
            continue
        chunk = json.loads(line[6:])
        for part in chunk["candidates"][0]["content"]["parts"]:
            if part.get("thought"):
                continue
            last = parts[-1] if parts else {}
            if "text" in part and last.get("text") and "functionCall" not in part:
                last["text"] += part["text"]
            else:
                parts.append(dict(part))
    return {"role": "model", "parts": parts}


def agent_loop(gemini: Gemini, session: str, turns: int, window: int) -> list[Any]:
    """A function-calling agent as Gemini CLI runs one: its whole ``contents`` resent each turn,
    the model's turns as it received them (without thoughts), every other turn streamed."""
    contents: list[Any] = []
    system = {"parts": [{"text": "You are a coding agent."}]}
    with gemini.client(session, window) as client:
        for turn in range(turns):
            ask = f"Turn {turn}: explain module {turn}. " * 8
            contents.append({"role": "user", "parts": [{"text": ask}]})
            while True:
                stream = len(contents) % 2 == 0
                body = {"contents": contents, "systemInstruction": system, "tools": TOOLS}
                if stream:
                    path = f"/v1beta/models/{MODEL}:streamGenerateContent?alt=sse"
                    answer = client.post(path, json=body)
                    assert answer.status_code == 200, answer.text
                    content = streamed(answer)
                else:
                    answer = client.post(f"/v1beta/models/{MODEL}:generateContent", json=body)
                    assert answer.status_code == 200, answer.text
                    found = answer.json()["candidates"][0]["content"]
                    content = {
                        **found,
                        "parts": [p for p in found["parts"] if not p.get("thought")],
                    }
                assert answer.headers["x-ctxc-session"] == session
                contents.append(content)
                calls = [p["functionCall"] for p in content["parts"] if "functionCall" in p]
                if not calls:
                    break
                contents.append(
                    {
                        "role": "user",
                        "parts": [
                            {
                                "functionResponse": {
                                    "name": c["name"],
                                    "response": {
                                        "output": f"contents of module {turn}\n"
                                        + "code line\n" * 60
                                    },
                                }
                            }
                            for c in calls
                        ],
                    }
                )
    return contents


def test_a_function_calling_loop_is_stored_and_compacted(
    gemini: Gemini, up: GeminiUpstream
) -> None:
    session = f"gemini-{uuid.uuid4().hex[:8]}"
    contents = agent_loop(gemini, session, turns=10, window=3_000)
    posted = [r for r in up.requests if r.path.endswith("Content")]
    assert len(posted) == 20
    # Every signed call went back with the signature issued for it (the stand-in refuses a
    # call without one, and notes a changed one): the model turns ctxc sent are its stored ones.
    signed = [
        p
        for r in posted
        for c in r.body["contents"]
        if c["role"] == "model"
        for p in c["parts"]
        if "functionCall" in p
    ]
    assert signed and all(up.wire.issued.get(p["thoughtSignature"]) for p in signed)
    assert len(posted[-1].body["contents"]) < len(contents) / 2  # the older part summarised
    with gemini.ctxc() as c:
        compactions = c.get(f"/v1/sessions/{session}/compactions").json()["items"]
        assert compactions
        assert c.get(f"/v1/sessions/{session}:fork-1").status_code == 404
        messages = c.get(f"/v1/sessions/{session}/messages", params={"limit": 1000}).json()
    roles = [m["message"]["role"] for m in messages["items"]]
    assert roles[0] == "system" and "assistant" in roles and "tool" in roles
    with gemini.ctxc() as c:
        metrics = scrape(c).text
    assert 'ctxc_sidecar_turns_total{outcome="stored",provider="gemini"}' in metrics


def test_the_upstream_gets_the_stored_signatures_and_thoughts_byte_exact(
    gemini: Gemini, up: GeminiUpstream
) -> None:
    session = f"gemini-sig-{uuid.uuid4().hex[:8]}"
    agent_loop(gemini, session, turns=2, window=100_000)
    posted = [r for r in up.requests if r.path.endswith("Content")]
    last = posted[-1].body["contents"]
    # The model turns as the upstream gave them: thought parts included (the agent dropped
    # them), each signature the one issued.
    models = [c for c in last if c["role"] == "model"]
    assert len(models) == 3
    for content in models:
        assert content["parts"][0]["thought"] is True
        signature = content["parts"][-1]["thoughtSignature"]
        assert signature in up.wire.issued


def test_an_upstream_overflow_is_compacted_and_retried(gemini: Gemini, up: GeminiUpstream) -> None:
    session = f"gemini-over-{uuid.uuid4().hex[:8]}"
    contents = agent_loop(gemini, session, turns=4, window=100_000)
    # The provider's window is smaller than the one ctxc was told: its real 400, then a retry.
    up.window = up.tokens(up.requests[-1].body) * 6 // 10
    contents.append({"role": "user", "parts": [{"text": "Now sum it up."}]})
    system = {"parts": [{"text": "You are a coding agent."}]}  # the agent's, as every turn
    body = {"contents": contents, "systemInstruction": system, "tools": TOOLS}
    with gemini.client(session, 100_000) as client:
        answer = client.post(f"/v1beta/models/{MODEL}:generateContent", json=body)
    assert answer.status_code == 200, answer.text
    assert answer.headers["x-ctxc-retried"] == "prompt_too_long"
    refused, retried = up.requests[-2:]
    assert up.tokens(refused.body) > up.window >= up.tokens(retried.body)
    with gemini.ctxc() as c:
        assert c.get(f"/v1/sessions/{session}/compactions").json()["items"]


def test_other_paths_are_forwarded_with_the_key(gemini: Gemini, up: GeminiUpstream) -> None:
    with httpx.Client(
        base_url=f"{gemini.url}/gemini", timeout=30, headers={"X-Ctxc-Api-Key": gemini.key}
    ) as client:
        listed = client.get("/v1beta/models", params={"key": KEY})
        assert listed.status_code == 200 and listed.json()["models"]
        one = client.get(f"/v1beta/models/{MODEL}", headers={"x-goog-api-key": KEY})
        assert one.status_code == 200 and one.json()["name"].startswith("models/")
        hi = {"contents": [{"role": "user", "parts": [{"text": "hi"}]}]}
        counted = client.post(f"/v1beta/models/{MODEL}:countTokens", params={"key": KEY}, json=hi)
        assert counted.status_code == 200 and counted.json()["totalTokens"] > 0
        refused = client.get("/v1beta/models")
        assert refused.status_code == 403
        assert refused.json()["error"]["status"] == "PERMISSION_DENIED"
        head = client.head("/v1beta/models", params={"key": KEY})
        assert head.status_code == 200
    assert [r.query for r in up.requests][:1] == [f"key={KEY}"]
    assert up.requests[1].headers["x-goog-api-key"] == KEY


def test_the_key_in_the_query_reaches_the_upstream(gemini: Gemini, up: GeminiUpstream) -> None:
    with httpx.Client(
        base_url=f"{gemini.url}/gemini", timeout=30, headers={"X-Ctxc-Api-Key": gemini.key}
    ) as client:
        body = {"contents": [{"role": "user", "parts": [{"text": "hi"}]}]}
        answer = client.post(
            f"/v1beta/models/{MODEL}:streamGenerateContent",
            params={"alt": "sse", "key": KEY},
            json=body,
        )
        assert answer.status_code == 200 and answer.text.startswith("data: ")
        wrong = client.post(
            f"/v1beta/models/{MODEL}:generateContent", params={"key": "AIza-wrong"}, json=body
        )
        assert wrong.status_code == 400
        assert wrong.json()["error"]["message"] == "API key not valid. Please pass a valid API key."
        # Without alt=sse the stream is Gemini's JSON array of chunks, passed on whole.
        array = client.post(
            f"/v1beta/models/{MODEL}:streamGenerateContent", params={"key": KEY}, json=body
        )
        assert array.status_code == 200 and isinstance(array.json(), list)
    assert up.requests[0].query == f"alt=sse&key={KEY}"


@pytest.mark.parametrize(
    ("body", "field"),
    [
        (b"{not json", None),
        (b"[]", None),
        (b'{"contents": []}', "contents"),
        (b'{"contents": [{"role": "system", "parts": [{"text": "x"}]}]}', "contents[0].role"),
        (b'{"contents": [{"role": "user", "parts": "x"}]}', "contents[0].parts"),
    ],
)
def test_bad_input_gets_googles_error_shape_and_stores_nothing(
    gemini: Gemini, up: GeminiUpstream, body: bytes, field: str | None
) -> None:
    before = row_counts(gemini.database_url)
    session = f"gemini-bad-{uuid.uuid4().hex[:8]}"
    with gemini.client(session) as client:
        answer = client.post(
            f"/v1beta/models/{MODEL}:generateContent",
            content=body,
            headers={"content-type": "application/json"},
        )
    assert answer.status_code == 400, answer.text
    error = answer.json()["error"]
    assert error["code"] == 400 and error["status"] == "INVALID_ARGUMENT" and error["message"]
    if field is not None:
        [violation] = error["details"][0]["fieldViolations"]
        assert violation["field"].startswith(field.split(".")[0])
    assert up.requests == []
    assert row_counts(gemini.database_url) == before


def sdk(gemini: Gemini, session: str, window: int) -> genai.Client:
    """The official Gemini SDK (google-genai) pointed at the sidecar, no retries."""
    headers = {
        "X-Ctxc-Api-Key": gemini.key,
        "X-Ctxc-Session": session,
        "X-Ctxc-Context-Window": str(window),
    }
    options = types.HttpOptions(
        base_url=f"{gemini.url}/gemini",
        headers=headers,
        retry_options=types.HttpRetryOptions(attempts=1),
    )
    return genai.Client(api_key=KEY, http_options=options)


def test_the_official_sdks_chat_with_function_calls_is_managed(
    gemini: Gemini, up: GeminiUpstream
) -> None:
    session = f"gemini-sdk-{uuid.uuid4().hex[:8]}"
    declaration = types.FunctionDeclaration(
        name="read_file",
        description="Read a file",
        parameters_json_schema=TOOLS[0]["functionDeclarations"][0]["parameters"],
    )
    config = types.GenerateContentConfig(
        system_instruction="You are a coding agent.",
        tools=[types.Tool(function_declarations=[declaration])],
        automatic_function_calling=types.AutomaticFunctionCallingConfig(disable=True),
    )
    client = sdk(gemini, session, 3_000)
    chat = client.chats.create(model=MODEL, config=config)
    for turn in range(8):
        answer = chat.send_message(f"Turn {turn}: explain module {turn}. " * 8)
        while answer.function_calls:
            output = f"contents of module {turn}\n" + "code line\n" * 60
            reply = {"output": output}
            results = [
                types.Part.from_function_response(name=c.name or "", response=reply)
                for c in answer.function_calls
            ]
            answer = chat.send_message(results)
        assert answer.text == "Done: the task is complete."
    # The SDK decodes each signature to bytes and encodes it again: the upstream still got
    # every one as issued (it refuses a call without one, and notes a changed one).
    posted = [r for r in up.requests if r.path.endswith("Content")]
    assert len(posted) == 16
    with gemini.ctxc() as c:
        assert c.get(f"/v1/sessions/{session}/compactions").json()["items"]
        assert c.get(f"/v1/sessions/{session}:fork-1").status_code == 404
    # A streamed call with the SDK: the answer streamed through, and stored.
    other = sdk(gemini, f"{session}-stream", 100_000)  # (a client closes once collected)
    streamed = other.models.generate_content_stream(
        model=MODEL, contents="Say hello.", config=types.GenerateContentConfig()
    )
    assert "".join(chunk.text or "" for chunk in streamed) == "Done: the task is complete."
    with gemini.ctxc() as c:
        items = c.get(f"/v1/sessions/{session}-stream/messages").json()["items"]
    assert [m["message"]["role"] for m in items] == ["user", "assistant"]
