"""Logs: one JSON object per line on stderr, each line of a request carrying that request's id."""

from __future__ import annotations

import json
import logging
from contextvars import ContextVar
from datetime import UTC, datetime
from typing import Any

# The id of the request being served (set by `app.api.middleware.RequestId`); a context
# variable, so worker threads (`anyio.to_thread`) and the tasks a request starts see it too.
REQUEST_ID: ContextVar[str | None] = ContextVar("ctxc_request_id", default=None)


class RequestIdFilter(logging.Filter):
    """Stamps each record with the current request's id (None outside a request)."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.request_id = REQUEST_ID.get()
        return True


class JsonFormatter(logging.Formatter):
    """One JSON object per log line (structured logs)."""

    FIELDS = ("request_id", "method", "path", "route", "status", "ms")

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        line |= {k: v for k in self.FIELDS if (v := getattr(record, k, None)) is not None}
        if record.exc_info:
            line["exc"] = self.formatException(record.exc_info)
        return json.dumps(line)


def json_handler() -> logging.Handler:
    """A stderr handler writing JSON lines stamped with the request id."""
    handler = logging.StreamHandler()
    handler.setFormatter(JsonFormatter())
    handler.addFilter(RequestIdFilter())
    return handler
