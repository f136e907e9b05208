"""Timestamps a client may send: with a UTC offset, and an instant both databases can hold."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated

from pydantic import AfterValidator, Strict


def _storable(value: datetime) -> datetime:
    if value.utcoffset() is None:
        raise ValueError("give the time with a UTC offset (for example 2026-01-02T03:04:05Z)")
    try:
        value.astimezone(UTC)
    except OverflowError:
        raise ValueError("the time in UTC falls outside the years 1 to 9999") from None
    return value


# Stored as the UTC instant with the offset it came with, so it reads back exactly as sent.
# Not strict: JSON has no time type, the text is parsed (the request models are strict).
StorableTime = Annotated[datetime, Strict(False), AfterValidator(_storable)]
