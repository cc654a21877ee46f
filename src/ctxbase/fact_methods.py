"""Facts of `ContextBase`: the state layer's versioned key -> value records, by scope.

The same calls as the remote SDK's (`set_fact`, `get_facts`, `fact_history`,
`rollback_fact`, `delete_fact`), over `assemble.state`, which the REST routes call too; a
`ContextManager` offers the same facts scoped to one session. The state layer is imported
on first use: a base that never touches facts loads no fact extraction.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .assemble.state import Scope
    from .components import Components
    from .model import StateFact
    from .store.base import StateChange

__all__ = ["FactMethods"]


class FactMethods:
    """Mixed into `ContextBase` (a `ComponentsSource`: the state functions take it)."""

    components: Components

    def _pid(self, project: str | None) -> str:
        raise NotImplementedError

    def set_fact(
        self,
        key: str,
        value: Any,
        *,
        scope_id: str,
        scope: Scope = "task",
        cause: str | None = None,
        project: str | None = None,
        ttl: float | None = None,
    ) -> StateFact:
        """Write one fact: a new version, with the old value kept in the history. `ttl`
        (seconds): unless written again within it, the fact expires (out of contexts and
        `get_facts`, marked `expired` in `fact_history`)."""
        from .assemble import state

        state.check_scope_open(self, scope, scope_id, self._pid(project))
        return state.set_fact(
            self,
            key,
            value,
            scope_id=scope_id,
            scope=scope,
            cause=cause,
            project=self._pid(project),
            ttl=ttl,
        )

    def get_facts(
        self, *, scope_id: str, scope: Scope = "task", project: str | None = None
    ) -> dict[str, StateFact]:
        """The current facts of one scope, by key (expired ones left out)."""
        from .assemble import state

        return state.get_facts(self, scope_id=scope_id, scope=scope, project=self._pid(project))

    def fact_history(
        self,
        key: str | None = None,
        *,
        scope_id: str,
        scope: Scope = "task",
        project: str | None = None,
    ) -> list[StateChange]:
        """Every change of the scope's facts (or of one key), oldest first per key."""
        from .assemble import state

        return state.fact_history(
            self, key, scope_id=scope_id, scope=scope, project=self._pid(project)
        )

    def rollback_fact(
        self,
        key: str,
        to_version: int,
        *,
        scope_id: str,
        scope: Scope = "task",
        cause: str | None = None,
        project: str | None = None,
    ) -> StateFact | None:
        """Make the fact's value at `to_version` current again, as one more recorded change
        (None: it did not exist then, and is deleted)."""
        from .assemble import state

        state.check_scope_open(self, scope, scope_id, self._pid(project))
        return state.rollback_fact(
            self,
            key,
            to_version,
            scope_id=scope_id,
            scope=scope,
            cause=cause,
            project=self._pid(project),
        )

    def delete_fact(
        self,
        key: str,
        *,
        scope_id: str,
        scope: Scope = "task",
        cause: str | None = None,
        project: str | None = None,
        hard: bool = False,
    ) -> bool:
        """Delete one fact (kept in its history: `rollback_fact` brings a value back); False
        when the scope holds no such key. `hard=True` removes it with its whole history, so
        no old value can be read back or rolled back (False when neither held the key)."""
        from .assemble import state

        return state.delete_fact(
            self,
            key,
            scope_id=scope_id,
            scope=scope,
            cause=cause,
            project=self._pid(project),
            hard=hard,
        )
