"""Which units a search found that have no vector yet.

Rank fusion must not read such a unit's absence from the semantic lists as a rejection:
it was never compared (fusion.rrf_fuse `pending`).
"""

from __future__ import annotations

from collections.abc import Iterable

from ..store.base import Store

__all__ = ["PendingUnits"]


class PendingUnits:
    """The project's count of units without a vector for `model` (up to `cap`), and which
    of the units noted so far are among them.

    A search counts, and notes each keyword pass's hits, before the vector search that
    follows: a vector stored after that is not taken for one the search compared. When the
    project has every vector (the count is 0), noting reads nothing.
    """

    def __init__(self, store: Store, project_id: str, model: str, cap: int) -> None:
        self.store, self.project_id, self.model = store, project_id, model
        self.count = store.count_pending_embeddings(model, cap, project_id)
        self.ids: set[str] = set()
        self._checked: set[str] = set()

    def note(self, ids: Iterable[str]) -> None:
        """Read which of `ids` (not noted before) have no vector yet."""
        if not self.count:
            return
        new = [i for i in dict.fromkeys(ids) if i not in self._checked]
        if new:
            self._checked.update(new)
            self.ids.update(self.store.pending_among(self.project_id, self.model, new))
