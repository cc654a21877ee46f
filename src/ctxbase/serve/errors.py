"""Errors of the service and the SDK, and their HTTP mapping.

One table maps each stable error `code` to an HTTP status, so the server and the remote SDK
agree: the server turns an exception into `{"error": {"code", "message", "field"}}`, the SDK
turns that body back into the same exception class.
"""

from __future__ import annotations

from typing import Any

from ..errors import (
    ConflictError,
    CtxbaseError,
    EmbedderUnavailableError,
    NotFoundError,
    StorageError,
    ValidationError,
)

__all__ = [
    "STATUS_BY_CODE",
    "AuthenticationError",
    "PermissionDeniedError",
    "RateLimitedError",
    "RemoteError",
    "RequestTooLargeError",
    "error_body",
    "exception_from_body",
]


class AuthenticationError(CtxbaseError):
    """No API key, a malformed one, an unknown one or a revoked one."""

    code = "unauthorized"


class PermissionDeniedError(CtxbaseError):
    """The key may see the project but its role does not allow the operation."""

    code = "forbidden"


class RateLimitedError(CtxbaseError):
    """The key has used up its request allowance; retry after `retry_after` seconds."""

    code = "rate_limited"

    def __init__(self, message: str, retry_after: float = 1.0) -> None:
        self.retry_after = retry_after
        super().__init__(message)


class RequestTooLargeError(CtxbaseError):
    """The request body (or a batch) is over the server's limit."""

    code = "too_large"

    def __init__(self, message: str, field: str = "body") -> None:
        self.field = field
        super().__init__(message)


class RemoteError(CtxbaseError):
    """An error the SDK got from the server that has no more specific class."""

    def __init__(self, code: str, message: str, status: int, field: str | None = None) -> None:
        self.code = code  # instance value: whatever the server said
        self.status = status
        self.field = field
        super().__init__(message)


STATUS_BY_CODE: dict[str, int] = {
    ValidationError.code: 422,
    "budget_too_small": 422,
    NotFoundError.code: 404,
    ConflictError.code: 409,
    "illegal_transition": 409,
    AuthenticationError.code: 401,
    PermissionDeniedError.code: 403,
    RateLimitedError.code: 429,
    RequestTooLargeError.code: 413,
    StorageError.code: 503,
    EmbedderUnavailableError.code: 503,
    "method_not_allowed": 405,
    "internal": 500,
}


def error_body(exc: CtxbaseError) -> tuple[int, dict[str, Any]]:
    """HTTP status and JSON body for a library or service error."""
    code = exc.code
    err: dict[str, Any] = {"code": code, "message": str(exc), "field": None}
    if isinstance(exc, ValidationError):
        err["message"] = f"{exc.field}: {exc.message}"
        err["field"] = exc.field
    elif isinstance(exc, NotFoundError):
        err["kind"] = exc.kind
        err["id"] = exc.item_id
        err["ids"] = list(exc.ids)
    elif isinstance(exc, RequestTooLargeError):
        err["field"] = exc.field
    elif code == "budget_too_small":
        err["field"] = "max_tokens"
        err["max_tokens"] = getattr(exc, "max_tokens", None)
        err["input_tokens"] = getattr(exc, "input_tokens", None)
        err["minimum"] = getattr(exc, "minimum", None)
    return STATUS_BY_CODE.get(code, 400), {"error": err}


def exception_from_body(status: int, body: Any) -> CtxbaseError:
    """The exception a server answer stands for (the inverse of `error_body`)."""
    err = body.get("error") if isinstance(body, dict) else None
    if not isinstance(err, dict):
        return RemoteError("http_error", f"HTTP {status}: {str(body)[:200]}", status)
    code = str(err.get("code", "error"))
    message = str(err.get("message", ""))
    field = err.get("field")
    if code == ValidationError.code:
        prefix = f"{field}: "
        text = message[len(prefix) :] if field and message.startswith(prefix) else message
        # The SDK sends keyword options inside the body's "options": its caller passed
        # `top_k=`, so the error names `top_k`, as the embedded library does.
        name = str(field or "input").removeprefix("options.") or "options"
        return ValidationError(name, text)
    if code == NotFoundError.code and "kind" in err:
        ids = err.get("ids")
        return NotFoundError(
            str(err["kind"]),
            str(err.get("id", "")),
            ids=[str(i) for i in ids] if isinstance(ids, list) else (),
            message=message or None,
        )
    if code == "budget_too_small" and isinstance(err.get("max_tokens"), int):
        from ..assemble.budget import BudgetTooSmall

        least = err.get("minimum")
        return BudgetTooSmall(
            int(err["max_tokens"]),
            int(err.get("input_tokens") or 0),
            least if isinstance(least, int) else None,
        )
    simple: dict[str, type[CtxbaseError]] = {
        ConflictError.code: ConflictError,
        "illegal_transition": ConflictError,
        StorageError.code: StorageError,
        EmbedderUnavailableError.code: EmbedderUnavailableError,
        AuthenticationError.code: AuthenticationError,
        PermissionDeniedError.code: PermissionDeniedError,
    }
    if code in simple:
        return simple[code](message)
    if code == RateLimitedError.code:
        return RateLimitedError(message)
    if code == RequestTooLargeError.code:
        return RequestTooLargeError(message, str(field or "body"))
    return RemoteError(code, message, status, None if field is None else str(field))
