"""Refuse query parameters an endpoint does not take.

FastAPI ignores them, so `GET /entities?limt=5` answered 200 with the default limit: a typo
that read as data. The API routers depend on `reject_unknown_query` so it is a 422 naming
the parameter and the ones the endpoint takes, as an unknown JSON field already is."""

from __future__ import annotations

from typing import Any

from fastapi import Request

from ..errors import ValidationError

__all__ = ["reject_unknown_query"]

# Per route: the query names its endpoint declares (aliases included), computed once.
_allowed_by_route: dict[int, frozenset[str]] = {}


def _query_names(dependant: Any) -> set[str]:
    """The endpoint's own query parameters and those of the dependencies it uses."""
    names = {p.alias for p in dependant.query_params}
    for sub in dependant.dependencies:
        names |= _query_names(sub)
    return names


def _allowed(route: Any) -> frozenset[str] | None:
    dependant = getattr(route, "dependant", None)
    if dependant is None:
        return None
    key = id(route)
    names = _allowed_by_route.get(key)
    if names is None:
        names = frozenset(_query_names(dependant))
        _allowed_by_route[key] = names
    return names


def reject_unknown_query(request: Request) -> None:
    if not request.query_params:  # the common case, and the hot path's
        return
    allowed = _allowed(request.scope.get("route"))
    if allowed is None:
        return
    unknown = sorted(set(request.query_params) - allowed)
    if unknown:
        takes = ", ".join(sorted(allowed)) if allowed else "none"
        raise ValidationError(
            unknown[0], f"is not a query parameter of this endpoint (it takes: {takes})"
        )
