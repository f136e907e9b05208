"""The checked-in OpenAPI document is the one the app generates."""

from __future__ import annotations

import json
from pathlib import Path

from app.main import create_app
from app.settings import Settings

DOCUMENT = Path(__file__).resolve().parents[2] / "openapi" / "openapi.json"


def generate() -> str:
    spec = create_app(Settings()).openapi()
    return json.dumps(spec, indent=2, sort_keys=True) + "\n"


def test_openapi_document_is_current() -> None:
    assert DOCUMENT.read_text() == generate(), "stale: run `make openapi`"


def test_every_operation_has_an_id_and_a_description() -> None:
    spec = json.loads(generate())
    for path, item in spec["paths"].items():
        for method, operation in item.items():
            assert operation.get("operationId"), (method, path)
            assert operation.get("description") or operation.get("summary"), (method, path)


if __name__ == "__main__":
    DOCUMENT.write_text(generate())
