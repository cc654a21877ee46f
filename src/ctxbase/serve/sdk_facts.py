"""The remote SDK's fact requests (`FactCalls`, mixed into sdk_calls.Calls): the signatures
of ContextBase.set_fact, get_facts, fact_history, rollback_fact and delete_fact."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..model import StateFact
from ..store.base import StateChange
from ..validation import check_json

if TYPE_CHECKING:
    from .sdk_calls import Call

__all__ = ["FactCalls"]


class FactCalls:
    """Supplies the state layer's fact calls to `Calls`."""

    def _path(self, project: str | None, *parts: str) -> str:
        raise NotImplementedError

    def set_fact(
        self,
        key: str,
        value: Any,
        *,
        scope_id: str,
        scope: str = "task",
        cause: str | None = None,
        project: str | None = None,
        ttl: float | None = None,
    ) -> Call[StateFact]:
        from .sdk_calls import Call

        check_json("value", value)  # as embedded: a set or bytes is named, not a TypeError
        params = {"key": key, "scope_id": scope_id, "scope": scope}
        body: dict[str, Any] = {"value": value, "cause": cause}
        if ttl is not None:  # a server without fact ttls still takes a fact without one
            body["ttl"] = ttl
        return Call(
            "PUT",
            self._path(project, "state"),
            StateFact.model_validate,
            params=params,
            body=body,
        )

    def get_facts(
        self, *, scope_id: str, scope: str = "task", project: str | None = None
    ) -> Call[dict[str, StateFact]]:
        from .sdk_calls import Call

        return Call(
            "GET",
            self._path(project, "state"),
            lambda r: {k: StateFact.model_validate(v) for k, v in r.items()},
            params={"scope_id": scope_id, "scope": scope},
        )

    def fact_history(
        self,
        key: str | None = None,
        *,
        scope_id: str,
        scope: str = "task",
        project: str | None = None,
    ) -> Call[list[StateChange]]:
        from .sdk_calls import Call

        params = {"scope_id": scope_id, "scope": scope}
        if key is not None:
            params["key"] = key
        return Call(
            "GET",
            self._path(project, "state", "history"),
            lambda r: [StateChange(**c) for c in r],
            params=params,
        )

    def rollback_fact(
        self,
        key: str,
        to_version: int,
        *,
        scope_id: str,
        scope: str = "task",
        cause: str | None = None,
        project: str | None = None,
    ) -> Call[StateFact | None]:
        from .sdk_calls import Call

        return Call(
            "POST",
            self._path(project, "state", "rollback"),
            lambda r: None if r["fact"] is None else StateFact.model_validate(r["fact"]),
            params={"key": key, "scope_id": scope_id, "scope": scope},
            body={"to_version": to_version, "cause": cause},
        )

    def delete_fact(
        self,
        key: str,
        *,
        scope_id: str,
        scope: str = "task",
        cause: str | None = None,
        project: str | None = None,
        hard: bool = False,
    ) -> Call[bool]:
        """Delete one fact (kept in its history); `hard=True` (admin keys) removes it with
        its whole history."""
        from .sdk_calls import Call

        params = {"key": key, "scope_id": scope_id, "scope": scope}
        if cause is not None:
            params["cause"] = cause
        if hard:
            params["hard"] = "true"
        return Call(
            "DELETE", self._path(project, "state"), lambda r: bool(r["deleted"]), params=params
        )
