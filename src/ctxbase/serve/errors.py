"""Errors of the service and the SDK, and their HTTP mapping.

One table maps each stable error `code` to an HTTP status, so the server and the remote SDK
agree: the server turns an exception into `{"error": {"code", "message", "field", "type",
"details"}}`, the SDK turns that body back into the same exception class: `type` names the
class the library raised (`IllegalTransition`, `UnknownProjectError`, ...), `details` its
attributes, so a caller's `except` clause catches the same thing embedded and remote.
"""

from __future__ import annotations

from enum import Enum
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
    elif isinstance(exc, ConflictError) and exc.field:
        err["field"] = exc.field
    err["type"] = type(exc).__name__
    err["details"] = _details(exc)
    return STATUS_BY_CODE.get(code, 400), {"error": err}


def _plain(value: Any) -> Any:
    """`value` as JSON, or `_SKIP` when it has no JSON form (an object of its own)."""
    if isinstance(value, Enum):
        value = value.value
    if value is None or isinstance(value, str | int | float | bool):
        return value
    if isinstance(value, list | tuple):
        items = [_plain(v) for v in value]
        return _SKIP if any(i is _SKIP for i in items) else items
    return _SKIP


_SKIP = object()


def _details(exc: CtxbaseError) -> dict[str, Any]:
    """The exception's public attributes that have a JSON form (`kind`, `known`, `repo`...)."""
    out: dict[str, Any] = {}
    for name, value in vars(exc).items():
        if name.startswith("_"):
            continue
        plain = _plain(value)
        if plain is not _SKIP:
            out[name] = plain
    return out


def _error_classes() -> dict[str, type[CtxbaseError]]:
    """Every error class of the library by name, for the SDK to raise the one the server
    named. The modules defining the library's own classes are imported first, so a class
    is known even when the client process has not used that part of the library."""
    from .. import idempotency  # noqa: F401
    from ..assemble import budget, facts, lifecycle, policy_issues  # noqa: F401
    from ..capture import bus  # noqa: F401

    found: dict[str, type[CtxbaseError]] = {}
    todo: list[type[CtxbaseError]] = [CtxbaseError]
    while todo:
        cls = todo.pop()
        if cls.__module__.startswith("ctxbase.") and not cls.__name__.startswith("_"):
            found.setdefault(cls.__name__, cls)
        todo.extend(cls.__subclasses__())
    return found


def _as_named_class(base: CtxbaseError, err: dict[str, Any]) -> CtxbaseError:
    """`base` as the class the server named, when that class is a kind of `base`'s (or
    has the code `base` left generic), with the attributes the server sent."""
    name = err.get("type")
    if not isinstance(name, str) or name == type(base).__name__:
        return base
    cls = _error_classes().get(name)
    if cls is None or cls is RemoteError:
        return base
    generic = isinstance(base, RemoteError) and getattr(cls, "code", None) == base.code
    if not (issubclass(cls, type(base)) or generic):
        return base
    exc = cls.__new__(cls)  # its __init__ builds the message; the server's is kept
    details = err.get("details")
    if isinstance(details, dict):
        vars(exc).update({k: v for k, v in details.items() if k.isidentifier()})
    if not generic:
        vars(exc).update(vars(base))  # what the SDK made of the body (a renamed field)
    exc.args = base.args
    return exc


def exception_from_body(status: int, body: Any) -> CtxbaseError:
    """The exception a server answer stands for (the inverse of `error_body`): the class
    the library raised, with its message and attributes."""
    err = body.get("error") if isinstance(body, dict) else None
    if not isinstance(err, dict):
        return RemoteError("http_error", f"HTTP {status}: {str(body)[:200]}", status)
    return _as_named_class(_base_exception(status, err), err)


def _base_exception(status: int, err: dict[str, Any]) -> CtxbaseError:
    """The exception of the body's `code`: the base class of its kind."""
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
