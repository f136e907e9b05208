"""The client's answers and request keywords agree with the API's contract
(`openapi/openapi.json`), so a field added to or renamed in the API shows here first."""

from __future__ import annotations

import inspect
import json
from pathlib import Path
from typing import Any, get_type_hints

import pytest
from ctxc_client import AsyncClient, Client, bodies, models
from pydantic import BaseModel

OPENAPI = json.loads((Path(__file__).resolve().parents[2] / "openapi" / "openapi.json").read_text())
SCHEMAS: dict[str, Any] = OPENAPI["components"]["schemas"]

ANSWERS: dict[type[BaseModel], str] = {
    models.Session: "SessionRead",
    models.SessionPage: "SessionPage",
    models.AppendResult: "AppendResult",
    models.AppendedMessage: "AppendedMessage",
    models.MessageItem: "MessageItem",
    models.CanonicalPage: "CanonicalPage",
    models.ProviderPage: "ProviderPage",
    models.CompileResult: "CompileResult",
    models.CompileTokens: "CompileTokens",
    models.LeftOut: "LeftOutRead",
    models.Step: "StepRead",
    models.Omitted: "OmittedRead",
    models.Compaction: "CompactionRead",
    models.CompactionDetail: "CompactionDetail",
    models.ArchivedMessage: "ArchivedMessage",
    models.Cursor: "CursorRead",
    models.ToolCall: "ToolCallRead",
    models.ToolResult: "ToolResultRead",
    models.FieldDigest: "FieldDigest",
    models.Payload: "PayloadRead",
    models.TokenCountResult: "TokenCountResult",
    models.Provider: "ProviderRead",
    models.ProviderList: "ProviderList",
    models.FieldError: "FieldError",
    models.PromptFragment: "PromptFragment",
    models.ProfileOverrides: "ProfileOverrides",
    models.Calibration: "CalibrationRead",
    models.CountError: "CountError",
    models.RecallResult: "RecallResult",
    models.RecallPage: "RecallPage",
}
# Request keywords, with the fields a method takes as arguments of their own.
REQUESTS: dict[type, tuple[str, set[str]]] = {
    bodies.SessionCreate: ("SessionCreate", set()),
    bodies.SessionUpdate: ("SessionUpdate", set()),
    bodies.Append: ("MessagesAppend", {"messages"}),
    bodies.CompileRequest: ("CompileRequest", {"messages"}),
    bodies.SessionCompileRequest: ("SessionCompileRequest", set()),
    bodies.CursorAcknowledge: ("CursorAcknowledge", {"compile_id"}),
    bodies.CompactRequest: ("CompactRequest", {"kind"}),
    bodies.TokenCount: ("TokenCount", {"messages"}),
    bodies.Usage: ("Usage", set()),
    bodies.DynamicFragment: ("DynamicFragment", set()),
    bodies.PromptFragment: ("PromptFragment", set()),
    bodies.ProfileOverrides: ("ProfileOverrides", set()),
    bodies.Recall: ("RecallRequest", {"arguments"}),
}
# Operations the client leaves to plain HTTP: probes, metrics, the model catalogue, and the
# backup documents (export/import), whose shapes are documents, not answers to type; and the
# sidecar's endpoints, whose clients are the providers' own SDKs.
NOT_COVERED = {
    "healthz",
    "readyz",
    "metrics",
    "list_models",
    "export_session",
    "import_session",
    "sidecar_openai_chat",
    "sidecar_openai_responses",
    "sidecar_anthropic_messages",
    "sidecar_gemini_generate",
    "sidecar_gemini_stream",
}
METHODS = {
    "create_session": "create_session",
    "get_session": "get_session",
    "list_sessions": "list_sessions",
    "update_session": "update_session",
    "delete_session": "delete_session",
    "append_messages": "append_messages",
    "list_messages": "list_messages",
    "compile": "compile",
    "compile_session": "compile_session",
    "acknowledge_compile": "acknowledge",
    "reset_cursor": "reset_cursor",
    "compact_session": "compact",
    "list_compactions": "list_compactions",
    "get_compaction": "get_compaction",
    "get_tool_call": "get_tool_call",
    "get_payload": "get_payload",
    "count_tokens": "count_tokens",
    "list_providers": "list_providers",
    "stream_events": "events",
    "recall": "recall",
}


@pytest.mark.parametrize("model", ANSWERS, ids=lambda m: m.__name__)
def test_each_answer_model_has_the_fields_of_its_schema(model: type[BaseModel]) -> None:
    schema = SCHEMAS[ANSWERS[model]]
    assert set(model.model_fields) == set(schema["properties"])
    required = {name for name, field in model.model_fields.items() if field.is_required()}
    assert required <= set(schema.get("required", []))


@pytest.mark.parametrize("body", REQUESTS, ids=lambda b: b.__name__)
def test_each_request_takes_the_fields_of_its_schema(body: type) -> None:
    name, own = REQUESTS[body]
    assert set(get_type_hints(body)) | own == set(SCHEMAS[name]["properties"])


def test_every_operation_has_a_method_on_both_clients() -> None:
    operations = {op["operationId"] for path in OPENAPI["paths"].values() for op in path.values()}
    assert operations - NOT_COVERED == set(METHODS)
    for method in METHODS.values():
        sync, asynchronous = getattr(Client, method), getattr(AsyncClient, method)
        assert inspect.signature(sync).parameters.keys() == (
            inspect.signature(asynchronous).parameters.keys()
        )
