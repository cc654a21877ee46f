"""What the keyword and vector indexes read from a store: rows and the deltas since a
marker (the storage protocol's index records, re-exported by store.base)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # vectors are numpy arrays; a command that reads no vector never loads it
    import numpy as np
    import numpy.typing as npt

__all__ = ["KeywordDelta", "KeywordHit", "KeywordRow", "VectorBlock", "VectorDelta", "VectorRow"]


@dataclass(frozen=True, slots=True)
class KeywordHit:
    item_id: str
    score: float  # higher is better (negated FTS rank)


@dataclass(frozen=True, slots=True)
class KeywordRow:
    """What the keyword index holds for an active item: its own terms and the terms of its
    live context (empty when the context is hidden), each space-joined, and what structured
    filters read of it (`kind` None: not given, the store alone applies filters). None of
    these change while the row is stored: an item that changes is stored again as a new
    row, which `KeywordDelta.removals` counts. `seq` is the row's change number: a new one,
    above every number handed out before, whenever the row enters the index (stored,
    replaced, restored, or its context words changed); `KeywordDelta.removed` names rows
    by it."""

    item_id: str
    terms: str
    context_terms: str
    kind: str | None = None
    type: str = ""
    session_id: str | None = None
    agent_id: str | None = None
    agent_role: str | None = None
    ts: float = 0.0
    latest: bool = True
    seq: int = 0


@dataclass(frozen=True, slots=True)
class KeywordDelta:
    """The active items of a project stored after `marker` of an earlier delta (0: all),
    `marker` to pass next time, and `removals`, a count that moves whenever one of the
    project's items is removed, hidden, restored or has its indexed terms changed in place
    (a reader that sees it move reloads). A replaced item comes back as a new row.

    `removed`: the change numbers (`KeywordRow.seq`) of rows that left the index after
    `marker` of the earlier delta: removed, hidden, replaced, or renumbered because their
    context words changed (they come back in `rows` under a new number). A reader applies
    them in place instead of reloading; it may be told of a row it never held, or of one
    twice. None: the store cannot tell (its record of removals was cut short since: its
    oldest rows past Store.keyword_log_limit are dropped, and a whole-project forget drops
    it all)."""

    rows: list[KeywordRow]
    marker: int
    removals: int
    removed: list[int] | None = None


@dataclass(frozen=True, slots=True)
class VectorRow:
    item_id: str
    vector: npt.NDArray[np.float32]


@dataclass(frozen=True, slots=True)
class VectorDelta:
    """The active vectors of a (project, model) stored after `marker` of an earlier delta:
    `rows` new or replaced since then, `marker` to pass next time, and `removals`, a count
    that moves whenever one of the project's vectors or items is removed, hidden or
    restored (a reader that sees it move reloads)."""

    rows: list[VectorRow]
    marker: int
    removals: int


@dataclass(frozen=True, slots=True)
class VectorBlock:
    """Every active vector of a (project, model) in one read: row i of `matrix` (float32,
    rows x dim; 0 x 0 when there are none) is the vector of `ids[i]`, in the order of
    storing. `marker` and `removals` are a VectorDelta's, for `vector_changes` next (marker
    0: the backend cannot tell what changed since)."""

    ids: list[str]
    matrix: npt.NDArray[np.float32]
    marker: int
    removals: int
