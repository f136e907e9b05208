"""OpenAPI for routes that read their JSON body themselves (to hash it before parsing it)."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from pydantic import BaseModel
from pydantic.json_schema import models_json_schema

from app.api.problems import Problem, problem_content

REF = "#/components/schemas/{model}"


def json_body(model: type[BaseModel]) -> dict[str, Any]:
    """The ``openapi_extra`` of such a route: its body is ``model`` (see ``document``)."""
    schema = {"$ref": REF.format(model=model.__name__)}
    return {"requestBody": {"required": True, "content": {"application/json": {"schema": schema}}}}


def document(app: FastAPI, *models: type[BaseModel]) -> None:
    """Put ``models`` (and what they refer to) and ``Problem`` in the app's schema components;
    every error answer is a problem (FastAPI's own 422 shape is never returned)."""
    generate = app.openapi
    models = (*models, Problem)

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            schema = generate()
            _, found = models_json_schema([(m, "validation") for m in models], ref_template=REF)
            components = schema.setdefault("components", {}).setdefault("schemas", {})
            for name, value in found.get("$defs", {}).items():
                components.setdefault(name, value)
            _problems_only(schema)
        return app.openapi_schema or {}

    app.openapi = openapi  # type: ignore[method-assign]


def _problems_only(schema: dict[str, Any]) -> None:
    """FastAPI's default 422 (a shape `app.api.problems` never answers) as the problem it is."""
    fastapi_422 = {
        "application/json": {"schema": {"$ref": REF.format(model="HTTPValidationError")}}
    }
    for item in schema.get("paths", {}).values():
        for operation in item.values():
            answer = operation.get("responses", {}).get("422")
            if answer is not None and answer.get("content") == fastapi_422:
                answer["content"] = problem_content()
    components = schema["components"]["schemas"]
    for unused in ("HTTPValidationError", "ValidationError"):
        components.pop(unused, None)
