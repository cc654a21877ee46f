"""Entities with an expiry time, out of searches and assemblies once it has passed.

An entity whose `properties["expires_at"]` (epoch seconds) is at or before the time of
the read is expired: a search leaves it out (considered, marked `expired`, dropped
"expired: past its expires_at", whatever the confidence floor), and an assembly leaves it
out however it was reached (`Gatherer.drop_withdrawn`). The store keeps it and reads it
back (`get_entity`, `list_entities`): whoever set the expiry decides when the row goes
(the LangGraph store's `sweep_ttl`); until then nobody else sees it. A write that moves
`expires_at` out (a refresh on read) shows it again.

Checked when read, not swept before reads: an expiry is then right for every reader
however many write and read at once (no window between the time passing and a sweep, no
sweeper to race), and it costs one read of the candidates' entity rows per search,
remembered while the project's index generation stands (every write moves it on).
"""

from __future__ import annotations

import math
import threading
from collections.abc import Collection, Mapping
from typing import TYPE_CHECKING, Any

from ..store.base import Store

if TYPE_CHECKING:
    from .search import Candidate

__all__ = ["EXPIRED_REASON", "EXPIRES_AT", "KnownExpiries", "expires_at", "mark_expired"]

EXPIRES_AT = "expires_at"  # the entity property: epoch seconds
EXPIRED_REASON = "expired: past its expires_at"


def expires_at(properties: Mapping[str, Any]) -> float | None:
    """The expiry an entity's properties carry, None when there is none (or it is no
    finite number)."""
    value = properties.get(EXPIRES_AT)
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


class KnownExpiries:
    """Per project, entity id -> its expiry (None: none), while the project's index
    generation stands. Bounded: past `limit` ids it starts again."""

    def __init__(self, limit: int = 100_000) -> None:
        self.limit = limit
        self._lock = threading.Lock()
        self._held: dict[str, tuple[int, dict[str, float | None]]] = {}

    def of(self, store: Store, project_id: str, ids: Collection[str]) -> dict[str, float | None]:
        """The expiries of `ids` that are entities of the project (events are not)."""
        from .synced import generation  # numpy: not for the commands that only list

        gen = generation(store, project_id)
        with self._lock:
            held_gen, held = self._held.get(project_id, (gen, {}))
            known = dict(held) if held_gen == gen else {}
        missing = [i for i in dict.fromkeys(ids) if i not in known]
        if missing:
            known.update(dict.fromkeys(missing))  # events, and entities hidden since
            for entity in store.get_entities(project_id, missing):
                known[entity.id] = expires_at(entity.properties)
            with self._lock:
                if len(known) > self.limit:
                    known = {i: known[i] for i in ids if i in known}
                self._held[project_id] = (gen, known)
        return {i: known[i] for i in ids if known.get(i) is not None}

    def drop(self, project_id: str) -> int:
        """Forget what is held of a project (after a hard forget); the ids dropped."""
        with self._lock:
            return len(self._held.pop(project_id, (0, {}))[1])


def mark_expired(
    store: Store, project_id: str, cands: Collection[Candidate], known: KnownExpiries, now: float
) -> None:
    """Mark the candidates of an expired entity (the entity, or a chunk of it) and drop
    them: an expired item is gone as a deleted one is, whatever the confidence floor."""
    owners = {c.item.owner_id for c in cands if c.item.kind != "event"}
    if not owners:
        return
    when = known.of(store, project_id, owners)
    for c in cands:
        at = when.get(c.item.owner_id)
        if at is not None and at <= now:
            c.expired = True
            if c.dropped is None:
                c.dropped = EXPIRED_REASON
