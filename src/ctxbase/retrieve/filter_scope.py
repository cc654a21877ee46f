"""The items a structured filter admits, as a search reads them: listed once when few,
else checked on the candidates the search finds (see FilterScope)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace

from ..store.base import ItemFilter, Store

__all__ = ["FilterScope", "first_admitted", "restricts"]

# Candidates checked against the store beyond those still wanted: only items changed since
# an index's read fail once its own screen has passed them.
_SLACK = 8


class FilterScope:
    """The items a structured filter admits, read only as far as a search needs them.

    A narrow filter (a session, a file) is listed once and checked in memory. A broad one (all
    sessions but the current one, everything but one type) would list most of a large project
    on every query, so it is checked only on the candidates a search actually finds."""

    LISTED = 1000  # at most this many ids are listed; above it, candidates are checked

    def __init__(
        self,
        store: Store,
        project_id: str,
        flt: ItemFilter,
        estimate: Callable[[str, ItemFilter], int | None] | None = None,
    ) -> None:
        """`estimate` counts what `flt` admits from memory (None: it cannot tell): a filter
        far above LISTED is then not listed (reading LISTED + 1 rows only to learn that)."""
        self.store, self.project_id, self.flt = store, project_id, flt
        self.ids: set[str] | None = None
        if _only_excludes(flt):  # other sessions' events: most of a project, never listed
            return
        n = estimate(project_id, flt) if estimate is not None else None
        if n is not None and n > 2 * self.LISTED:  # margin: items changed since its read
            return
        found = store.filter_item_ids(project_id, flt, limit=self.LISTED + 1)
        self.ids = found if len(found) <= self.LISTED else None

    def admits(self, ids: Iterable[str]) -> set[str]:
        wanted = list(ids)
        if self.ids is not None:
            return {i for i in wanted if i in self.ids}
        if not wanted:
            return set()
        return self.store.filter_item_ids(self.project_id, self.flt, among=wanted)


def first_admitted(
    found: Sequence[tuple[str, float]], limit: int, admits: Callable[[list[str]], set[str]]
) -> list[tuple[str, float]]:
    """The first `limit` of `found` (in order) that `admits` passes, asking it about as few
    as that takes: the rest of what is still wanted (plus a little slack) at a time."""
    hits: list[tuple[str, float]] = []
    start = 0
    while len(hits) < limit and start < len(found):
        window = found[start : start + limit - len(hits) + _SLACK]
        admitted = admits([i for i, _ in window])
        hits += [h for h in window if h[0] in admitted]
        start += len(window)
    return hits[:limit]


def _only_excludes(flt: ItemFilter) -> bool:
    """True for a filter that names no sessions, agents, types, owners, places or times to
    keep: at most kinds and sessions to leave out."""
    return flt.exclude_session_ids is not None and not restricts(
        replace(flt, kinds=None, exclude_session_ids=None)
    )


def restricts(flt: ItemFilter) -> bool:
    return any(
        v is not None
        for v in (
            flt.session_ids,
            flt.agent_ids,
            flt.agent_roles,
            flt.types,
            flt.kinds,
            flt.owner_ids,
            flt.repos,
            flt.path_prefix,
            flt.line_from,
            flt.line_to,
            flt.since,
            flt.until,
            flt.exclude_session_ids,
            flt.view,
        )
    )
