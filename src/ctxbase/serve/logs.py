"""Structured JSON logs: one object per line, with the request id and context id."""

from __future__ import annotations

import json
import logging
import sys
import time
from typing import Any

__all__ = ["LOGGER_NAME", "JsonFormatter", "configure_logging", "log_request"]

LOGGER_NAME = "ctxbase.serve"
log = logging.getLogger(LOGGER_NAME)
_FIELDS = ("request_id", "context_id", "method", "path", "status", "duration_ms", "key_id")


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "ts": round(record.created, 6),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        for name in _FIELDS:
            value = record.__dict__.get(name)
            if value is not None:
                out[name] = value
        if record.exc_info:
            out["exc"] = self.formatException(record.exc_info)
        return json.dumps(out, ensure_ascii=False)


class _StderrHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """Writes to the process's stderr as it is when a record comes, not as it was when
    logging was configured: a host that swaps sys.stderr (a test harness capturing one
    run's output, then closing it) keeps the service's later records."""

    def __init__(self) -> None:
        super().__init__()

    @property
    def stream(self) -> Any:
        return sys.stderr

    @stream.setter
    def stream(self, value: Any) -> None:
        pass  # always the current sys.stderr


def configure_logging(level: str = "info") -> None:
    """JSON lines on stderr for the service's loggers (ctxbase.*)."""
    handler = _StderrHandler()
    handler.setFormatter(JsonFormatter())
    root = logging.getLogger("ctxbase")
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    root.propagate = False


def log_request(
    *,
    request_id: str,
    method: str,
    path: str,
    status: int,
    started: float,
    key_id: str | None,
    context_id: str | None,
) -> None:
    if not log.isEnabledFor(logging.INFO):
        return
    log.info(
        "request",
        extra={
            "request_id": request_id,
            "method": method,
            "path": path,
            "status": status,
            "duration_ms": round((time.perf_counter() - started) * 1000, 3),
            "key_id": key_id,
            "context_id": context_id,
        },
    )
