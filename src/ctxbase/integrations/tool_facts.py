"""Facts for the agent tools: found by `search_memory`, removed by `forget`.

A fact is a state row (key -> current value, versioned), not a search item: the keyword
and vector indexes never hold it. So `search_memory` matches the query's words against
the *current* facts of the scopes the tools write (the project's, and the sessions'),
and a superseded value (only in the history) or a deleted fact (no row) never comes
back. `forget` deletes facts by key, or every fact of a forgotten session; a soft delete
is a recorded change (`fact_history`, `rollback_fact` bring a value back), a hard one
removes the fact with its whole history.

Works over an embedded base (one store read for every scope) and over the remote client
(one `get_facts` per scope, for the most recently updated sessions).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Literal

from ..contextbase import ContextBase
from ..errors import NotFoundError
from ..model import StateFact
from ..retrieve.tokenize import index_terms, query_terms

if TYPE_CHECKING:
    from .tools import ToolScope

__all__ = [
    "DEFAULT_SESSION",
    "delete_facts",
    "fact_text",
    "facts_not_found",
    "matching_facts",
    "session_facts",
]

DEFAULT_SESSION = "memory"  # remember's default session
REMOTE_SESSIONS = 50  # sessions whose facts a search over the remote client reads
LOCAL_SESSIONS = 2000  # ... over an embedded base (one statement)

FactScope = Literal["session", "project"]


def fact_text(fact: StateFact) -> str:
    value = fact.value if isinstance(fact.value, str) else json.dumps(fact.value)
    return f"{fact.key}: {value}"


def _read(scope: ToolScope, pairs: list[tuple[str, str]]) -> list[StateFact]:
    pid = scope.project_id
    if isinstance(scope.cb, ContextBase):
        from ..assemble.state import live  # expired facts are not current (get_facts's rule)

        found = scope.cb.store.get_states(pid, pairs)
        return live(f for pair in pairs for f in found.get(pair, []))
    out: list[StateFact] = []
    for kind, ident in pairs:
        facts = scope.cb.get_facts(scope_id=ident, scope=kind, project=pid)
        out.extend(facts.values())
    return out


def _pairs(scope: ToolScope, session_id: str | None) -> list[tuple[str, str]]:
    pairs: list[tuple[str, str]] = [("project", scope.project_id)]
    if session_id is not None:
        return [*pairs, ("session", session_id)]
    cap = LOCAL_SESSIONS if isinstance(scope.cb, ContextBase) else REMOTE_SESSIONS
    # the scope's own project: empty before anything is remembered
    listed = scope.cb.list_sessions(project=scope.project_id, new_project=True)
    sessions = sorted(listed, key=lambda s: -s.updated_at)
    ids = dict.fromkeys([DEFAULT_SESSION, *(s.session_id for s in sessions[:cap])])
    return [*pairs, *(("session", i) for i in ids)]


def matching_facts(
    scope: ToolScope, query: str, session_id: str | None, limit: int
) -> list[dict[str, Any]]:
    """The current facts whose key or value shares words with the query, best first
    (score: the share of the query's words the fact holds). Without `session_id`, the
    project's facts and every session's; with it, the project's and that session's."""
    wanted = set(query_terms(query))
    if not wanted or limit < 1:
        return []
    scored: list[tuple[float, StateFact]] = []
    for fact in _read(scope, _pairs(scope, session_id)):
        shared = wanted & set(index_terms(fact_text(fact)))
        if shared:
            scored.append((len(shared) / len(wanted), fact))
    scored.sort(key=lambda sf: (-sf[0], -sf[1].updated_at))
    hits = []
    for score, fact in scored[:limit]:
        hit: dict[str, Any] = {
            "kind": "fact",
            "key": fact.key,
            "value": fact.value,
            "scope": fact.scope,
            "score": round(score, 4),
            "version": fact.version,
        }
        if fact.scope == "session":
            hit["session_id"] = fact.scope_id
        hits.append(hit)
    return hits


def delete_facts(
    scope: ToolScope,
    keys: list[str],
    fact_scope: FactScope,
    session_id: str | None,
    *,
    hard: bool = False,
) -> tuple[list[str], list[str]]:
    """Delete `keys` from the project's facts or from one session's (default 'memory'):
    (deleted, not found). A soft delete keeps the old values in the fact's history; `hard`
    removes them too (and the history of a fact deleted before, which counts as deleted)."""
    pid = scope.project_id
    scope_id = pid if fact_scope == "project" else (session_id or DEFAULT_SESSION)
    deleted: list[str] = []
    missing: list[str] = []
    for key in dict.fromkeys(keys):
        gone = scope.cb.delete_fact(
            key,
            scope_id=scope_id,
            scope=fact_scope,
            cause=f"forgotten by {scope.agent_id}",
            project=pid,
            hard=hard,
        )
        (deleted if gone else missing).append(key)
    return deleted, missing


def facts_not_found(
    scope: ToolScope, missing: list[str], fact_scope: FactScope, session_id: str | None
) -> NotFoundError:
    """The error of a forget by key that found none of the keys (`missing`)."""
    session = session_id or DEFAULT_SESSION
    where = "" if fact_scope == "project" else f"session {session!r} of "
    keys = ", ".join(repr(k) for k in missing)
    return NotFoundError(
        "fact",
        missing[0],
        ids=missing,
        message=f"nothing to forget: no fact {keys} in {where}project "
        f"{scope.project_id!r} (fact_scope={fact_scope!r})",
    )


def session_facts(scope: ToolScope, session_id: str) -> list[str]:
    """The keys of one session's current facts."""
    return [f.key for f in _read(scope, [("session", session_id)])]
