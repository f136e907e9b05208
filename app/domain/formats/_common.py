"""Helpers shared by the provider converters: shape checks and provider hints."""

from __future__ import annotations

import copy
from collections.abc import Collection
from typing import Any, TypeVar

from app.domain.errors import FormatError, Path
from app.domain.messages import PROVIDER_KEYS, JSONObject, Message, TextPart

T = TypeVar("T")


def expect_object(value: Any, path: Path, what: str = "an object") -> JSONObject:
    """``value`` when it is a JSON object, else a FormatError at ``path``."""
    if not isinstance(value, dict):
        raise FormatError(path, f"expected {what}")
    return value


def expect_str(obj: JSONObject, key: str, path: Path) -> str:
    """``obj[key]`` when it is a string, else a FormatError at ``path + (key,)``."""
    value = obj.get(key)
    if not isinstance(value, str):
        missing = "missing" if key not in obj else "not a string"
        raise FormatError((*path, key), f"{key!r} is {missing}; expected a string")
    return value


def caller_metadata(obj: JSONObject, path: Path) -> JSONObject:
    """The caller's ``metadata`` of a provider message (a JSON object without provider keys)."""
    if "metadata" not in obj:
        return {}
    metadata = expect_object(obj["metadata"], (*path, "metadata"), "metadata to be an object")
    for key in PROVIDER_KEYS:
        if key in metadata:
            raise FormatError((*path, "metadata", key), f"{key!r} is reserved for provider fields")
    return clone(metadata)


def extra_fields(obj: JSONObject, known: Collection[str]) -> JSONObject:
    """The fields of ``obj`` that the canonical model does not hold, copied."""
    return {key: clone(value) for key, value in obj.items() if key not in known}


def hints(**fields: Any) -> JSONObject:
    """Provider hints without the unset ones (None, False or empty)."""
    return {key: value for key, value in fields.items() if _is_set(value)}


def _is_set(value: Any) -> bool:
    return value is not None and value is not False and not (isinstance(value, dict) and not value)


def part_metadata(provider: str, **fields: Any) -> JSONObject:
    """Part metadata holding only the provider hints that are set."""
    found = hints(**fields)
    return {provider: found} if found else {}


def add_extra(out: JSONObject, extra: Any) -> JSONObject:
    """``out`` with the remembered ``extra`` fields it does not already set."""
    if isinstance(extra, dict):
        for key, value in extra.items():
            out.setdefault(key, clone(value))
    return out


def clone(value: T) -> T:
    """A deep copy, so stored messages never share mutable JSON with callers."""
    return copy.deepcopy(value)


def set_fields(obj: JSONObject, keep: Collection[str] = ()) -> JSONObject:
    """The fields of ``obj`` that are not null (a null in ``keep`` means something: kept)."""
    return {key: value for key, value in obj.items() if value is not None or key in keep}


def without_nulls(value: Any, data: Collection[str] = ("input",)) -> Any:
    """``value`` without its null object fields, at any depth but inside the fields named in
    ``data`` (a tool ``input``: tool arguments, where a null is a value). The SDKs dump every
    field the API left out as None; the API reads a null optional field as absent, so both
    forms are one document."""
    if isinstance(value, dict):
        return {
            key: item if key in data else without_nulls(item, data)
            for key, item in value.items()
            if item is not None
        }
    if isinstance(value, list):
        return [without_nulls(item, data) for item in value]
    return value


def string_system(text: str, provider: str) -> Message:
    """A system prompt given as a plain string: one text part, the string form remembered under
    ``metadata[provider]["content"]`` so it is written back as a string."""
    metadata = {provider: {"content": "string"}}
    return Message(role="system", content=(TextPart(text=text),), metadata=metadata)
