"""OpenAPI for routes that read their JSON body themselves (to hash it before parsing it)."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from pydantic import BaseModel
from pydantic.json_schema import models_json_schema

REF = "#/components/schemas/{model}"


def json_body(model: type[BaseModel]) -> dict[str, Any]:
    """The ``openapi_extra`` of such a route: its body is ``model`` (see ``document``)."""
    schema = {"$ref": REF.format(model=model.__name__)}
    return {"requestBody": {"required": True, "content": {"application/json": {"schema": schema}}}}


def document(app: FastAPI, *models: type[BaseModel]) -> None:
    """Put ``models`` (and what they refer to) in the app's schema components."""
    generate = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            schema = generate()
            _, found = models_json_schema([(m, "validation") for m in models], ref_template=REF)
            components = schema.setdefault("components", {}).setdefault("schemas", {})
            for name, value in found.get("$defs", {}).items():
                components.setdefault(name, value)
        return app.openapi_schema or {}

    app.openapi = openapi  # type: ignore[method-assign]
