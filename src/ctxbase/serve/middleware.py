"""The ASGI layer around every request: request id, body size limit, paths naming nothing,
metrics, access log.

Written as plain ASGI (not BaseHTTPMiddleware) because it wraps every request, including
the hot assemble path.
"""

from __future__ import annotations

import json
import re
import time
import uuid
from typing import Any

from fastapi import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ..errors import CtxbaseError, NotFoundError
from .errors import RequestTooLargeError, error_body
from .logs import log_request
from .metrics import Metrics

__all__ = ["ServiceMiddleware"]

# No id holds a control character (model.ID_RULE), and the router would not see one at the
# end of a path segment: its patterns end in "$", which matches before a final newline, so
# ".../entities/n1%0A" would answer for "n1".
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


class ServiceMiddleware:
    def __init__(self, app: ASGIApp, *, metrics: Metrics, max_body_bytes: int) -> None:
        self.app = app
        self.metrics = metrics
        self.max_body_bytes = max_body_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        headers = dict(scope["headers"])
        rid = headers.get(b"x-request-id", b"").decode("latin-1")[:100] or uuid.uuid4().hex
        state: dict[str, Any] = scope.setdefault("state", {})
        state["request_id"] = rid
        seen: dict[str, Any] = {"status": 500, "context_id": None}
        rid_header = (b"x-request-id", rid.encode("latin-1"))

        async def send_wrapper(message: Message) -> None:
            if message["type"] == "http.response.start":
                seen["status"] = message["status"]
                for k, v in message.get("headers", ()):
                    if k == b"x-context-id":
                        seen["context_id"] = v.decode("latin-1")
                message["headers"] = [*message.get("headers", ()), rid_header]
            await send(message)

        limit = self.max_body_bytes
        try:
            declared = int(headers.get(b"content-length", b"0") or 0)
        except ValueError:
            declared = 0
        try:
            if declared > limit:
                too_large = f"request body is {declared} bytes, over the limit of {limit}"
                await _refuse(send_wrapper, RequestTooLargeError(too_large))
            elif found := _CONTROL.search(scope["path"]):
                said = f"U+{ord(found.group()):04X}"
                message = f"{scope['path']!r} names nothing: it holds {said}, which no id holds"
                await _refuse(send_wrapper, NotFoundError("path", scope["path"], message=message))
            else:
                received = 0

                async def receive_wrapper() -> Message:
                    nonlocal received
                    message = await receive()
                    if message["type"] == "http.request":
                        received += len(message.get("body", b""))
                        if received > limit:
                            # HTTPException: the one error FastAPI lets through from a body read
                            raise HTTPException(
                                413, f"request body is over the limit of {limit} bytes"
                            )
                    return message

                await self.app(scope, receive_wrapper, send_wrapper)
        finally:
            route = scope.get("route")
            # AssembleShortcut answers without routing and names its path in the state
            template = getattr(route, "path", None) or state.get("route_path") or "<unmatched>"
            self.metrics.observe(
                scope["method"], template, seen["status"], time.perf_counter() - started
            )
            log_request(
                request_id=rid,
                method=scope["method"],
                path=scope["path"],
                status=seen["status"],
                started=started,
                key_id=state.get("key_id"),
                context_id=seen["context_id"],
            )


async def _refuse(send: Send, error: CtxbaseError) -> None:
    """Answer `error` before any route runs (the connection is closed after it)."""
    status, body = error_body(error)
    raw = json.dumps(body).encode("utf-8")
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(raw)).encode()),
                (b"connection", b"close"),
            ],
        }
    )
    await send({"type": "http.response.body", "body": raw})
