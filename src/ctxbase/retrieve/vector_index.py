"""In-memory vector search over a project's stored vectors.

Exact (one matrix product) for small projects; an HNSW index (retrieve/ann: usearch with
compact scalars when installed, else hnswlib) above a size threshold. Once the HNSW index
holds a project's vectors they are kept there only (a filtered search reads the allowed rows'
vectors back from it): a second float32 copy would double the memory of a large project.
When the store's index generation moves, the vectors stored since the last load are
appended (`Store.vector_changes`) instead of reloading the project: an agent that writes
between searches would otherwise reload every vector on each search. With an HNSW index, rows
removed or hidden are marked removed in it (`Store.vector_ids` tells which); anything else (a
vector replaced or restored, a removal without HNSW, a quarter of the rows gone) reloads.
Backends with a native vector index (pgvector) answer `Store.vector_search` themselves
instead.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from ..store.base import Store, VectorDelta, VectorRow
from .ann import AnnIndex, AnnSettings, ann_class, settings_from_env
from .id_map import IdMap
from .synced import appendable, current, generation, grown

__all__ = ["ANN_THRESHOLD", "VectorIndex"]

ANN_THRESHOLD = 50_000


@dataclass
class _Rows:
    """Vectors of one (project, model), append-only: a search sees the first `n` of a
    snapshot while later rows are appended behind it. `buffer` is None once an HNSW index
    holds the vectors."""

    ids: IdMap = field(default_factory=IdMap)  # id by position and position by id
    buffer: npt.NDArray[np.float32] | None = field(
        default_factory=lambda: np.zeros((0, 1), dtype=np.float32)
    )
    n: int = 0

    def append(self, rows: list[VectorRow]) -> npt.NDArray[np.float32]:
        """Add `rows`; their vectors as one block (kept in `buffer` unless it is None)."""
        if not rows:
            return np.zeros((0, 1), dtype=np.float32)
        block = np.stack([r.vector for r in rows]).astype(np.float32, copy=False)
        self.extend([r.item_id for r in rows], block)
        return block

    def extend(self, ids: list[str], block: npt.NDArray[np.float32]) -> None:
        """Add the rows `ids` whose vectors are the rows of `block`."""
        if not ids:
            return
        if self.buffer is not None:
            if self.n == 0:
                self.buffer = block  # a first block is held as it is, not copied
            else:
                self.buffer = grown(self.buffer, self.n + len(ids), self.n)
                self.buffer[self.n : self.n + len(ids)] = block
        self.ids.extend(ids)
        self.n += len(ids)


@dataclass(frozen=True)
class _Loaded:
    generation: int
    marker: int  # Store.vector_changes marker of the last read (0: cannot update)
    removals: int
    rows: _Rows
    n: int
    ann: AnnIndex | None
    # The exact search's matrix (a view that keeps its buffer alive); None with an ANN.
    matrix: npt.NDArray[np.float32] | None
    # Rows removed or hidden since the ANN was built (marked removed in it; rows past its
    # length are live); None: none.
    dead: npt.NDArray[np.bool_] | None = None

    @property
    def live(self) -> int:
        return self.n - (0 if self.dead is None else int(np.count_nonzero(self.dead)))

    def live_rows(self, rows: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
        """`rows` without the removed ones."""
        if self.dead is None or not rows.size:
            return rows
        inside = rows < len(self.dead)
        return rows[~inside | ~self.dead[np.where(inside, rows, 0)]]


class VectorIndex:
    """Per (project, model) cache of vectors, shared by all searches of one ContextBase."""

    def __init__(
        self, store: Store, ann_threshold: int = ANN_THRESHOLD, ann: AnnSettings | None = None
    ) -> None:
        self.store = store
        self.ann_threshold = ann_threshold
        self.ann_settings = settings_from_env() if ann is None else ann
        # None: no ANN library installed (exact search still works, just slower at size)
        self.ann_class = ann_class(self.ann_settings)
        self._cache: dict[tuple[str, str], _Loaded] = {}
        self._lock = threading.Lock()
        self.reloads = 0  # full reads of a project's vectors (the rest were appends)

    def drop(self, project_id: str) -> int:
        """Forget the project's vectors held in memory (after a hard forget, so no copy of
        a forgotten vector stays until the next search reloads); returns how many."""
        with self._lock:
            keys = [k for k in self._cache if k[0] == project_id]
            return sum(self._cache.pop(k).n for k in keys)

    def _load(self, project_id: str, model: str) -> _Loaded:
        gen = generation(self.store, project_id)

        def appended(cached: _Loaded) -> _Loaded | None:
            if not cached.marker:
                return None
            delta = self.store.vector_changes(project_id, model, cached.marker)
            if delta is None:
                return None
            return self._appended(cached, delta, gen, project_id, model)

        return current(
            self._lock,
            self._cache,
            (project_id, model),
            gen,
            appended,
            lambda: self._reloaded(project_id, model, gen),
        )

    def _appended(
        self, cached: _Loaded, delta: VectorDelta, gen: int, project_id: str, model: str
    ) -> _Loaded | None:
        """`cached` plus the new vectors, less those removed or hidden when an ANN holds
        them (at 1M rows a reload rebuilds it for many minutes); None when only a reload is
        right: a vector was replaced or restored, or something was removed without an ANN."""
        rows, dead = cached.rows, cached.dead
        if delta.removals != cached.removals and cached.ann is not None:
            dead = self._removed(cached, delta, project_id, model)
            if dead is None:
                return None
        elif not appendable(
            cached, delta.removals, rows.n, (r.item_id for r in delta.rows), rows.ids
        ):
            return None
        block = rows.append(delta.rows)
        ann = cached.ann
        if ann is not None and delta.rows:
            ann = ann.add(block, cached.n)
        return self._snapshot(gen, delta.marker, delta.removals, rows, ann, dead)

    def _removed(
        self, cached: _Loaded, delta: VectorDelta, project_id: str, model: str
    ) -> npt.NDArray[np.bool_] | None:
        """Which rows of `cached` are gone now (newly gone ones marked removed in its ANN),
        when nothing changed but removals and the new rows of `delta`; else None."""
        rows, ann = cached.rows, cached.ann
        if ann is None or rows.n != cached.n or any(r.item_id in rows.ids for r in delta.rows):
            return None  # rows appended by another snapshot, or a vector replaced
        listed = self.store.vector_ids(project_id, model)
        if listed is None or (listed.marker, listed.removals) != (delta.marker, delta.removals):
            return None  # the backend cannot tell, or the store moved between the reads
        at = rows.ids.lookup(listed.ids)
        if int(np.count_nonzero(at < 0)) != len(delta.rows):
            return None  # an active row neither held nor new: restored
        alive = np.zeros(cached.n, dtype=np.bool_)
        alive[at[at >= 0]] = True
        before = np.zeros(cached.n, dtype=np.bool_)
        if cached.dead is not None:
            before[: len(cached.dead)] = cached.dead
        dead = ~alive
        if (alive & before).any() or np.count_nonzero(dead) > cached.n // 4:
            return None  # a removed row restored, or most removed: a reload compacts
        ann.remove(np.flatnonzero(dead & ~before))
        return dead

    def _reloaded(self, project_id: str, model: str, gen: int) -> _Loaded:
        self.reloads += 1
        rows = _Rows()
        # one matrix read in blocks: no object per vector while loading
        block = self.store.vector_block(project_id, model)
        rows.extend(block.ids, block.matrix)
        return self._snapshot(gen, block.marker, block.removals, rows, None)

    def _snapshot(
        self,
        gen: int,
        marker: int,
        removals: int,
        rows: _Rows,
        ann: AnnIndex | None,
        dead: npt.NDArray[np.bool_] | None = None,
    ) -> _Loaded:
        """What searches read; builds the ANN (and hands it the vectors) at the threshold."""
        if ann is None and rows.buffer is not None and rows.n >= self.ann_threshold:
            ann = self._build_ann(rows.buffer[: rows.n])
            if ann is not None:
                rows.buffer = None  # the index holds them now
        matrix = None if rows.buffer is None else rows.buffer[: rows.n]
        return _Loaded(gen, marker, removals, rows, rows.n, ann, matrix, dead)

    def _build_ann(self, matrix: npt.NDArray[np.float32]) -> AnnIndex | None:
        if self.ann_class is None:
            return None
        return self.ann_class.build(matrix, self.ann_settings)

    def vectors_of(
        self, project_id: str, model: str, ids: Sequence[str]
    ) -> dict[str, npt.NDArray[np.float32]]:
        """The stored vectors of `ids` (those that have one): from memory when this index
        holds the project's vectors (a search just loaded them), else from the store (a
        backend with a native vector index keeps none here)."""
        with self._lock:
            loaded = self._cache.get((project_id, model))
        if loaded is None:
            return self.store.get_vectors(project_id, model, ids)
        found = loaded.rows.ids.lookup(list(ids)).tolist()
        held = [(i, p) for i, p in zip(ids, found, strict=True) if 0 <= p < loaded.n]
        rows = np.array([p for _, p in held], dtype=np.int64)
        if loaded.matrix is not None:
            block = loaded.matrix[rows]
        else:
            assert loaded.ann is not None
            block = loaded.ann.vectors(rows)
        return {i: block[n] for n, (i, _) in enumerate(held)}

    def search(
        self,
        project_id: str,
        model: str,
        query: npt.NDArray[np.float32],
        limit: int,
        allowed_ids: set[str] | None = None,
    ) -> list[tuple[str, float]]:
        if not np.any(query):  # a text with nothing to embed: no direction, nothing near
            return []  # (pgvector's cosine answers no row for it; the same on every store)
        native = self.store.vector_search(project_id, model, query, limit, allowed_ids)
        if native is not None:
            return native
        loaded = self._load(project_id, model)
        if not loaded.n:
            return []
        ids = loaded.rows.ids
        if loaded.ann is not None and allowed_ids is None:
            k = min(limit, loaded.live)
            if k <= 0:
                return []
            labels, sims = loaded.ann.search(query, k)
            return [
                (ids[int(i)], float(s))
                for i, s in zip(labels, sims, strict=True)
                if int(i) < loaded.n  # rows appended after this snapshot are not its own
            ]
        q = query.astype(np.float32)
        if allowed_ids is not None:
            # Only the allowed rows: the work follows the filter's size, not the project's.
            rows = loaded.live_rows(ids.positions(allowed_ids, loaded.n))
            if not rows.size:
                return []
            if loaded.matrix is not None:
                sims = loaded.matrix[rows] @ q
            else:  # the vectors are in the ANN only
                assert loaded.ann is not None
                sims = loaded.ann.vectors(rows) @ q
            n = min(limit, int(rows.size))
            top = np.argpartition(-sims, n - 1)[:n]
            top = top[np.argsort(-sims[top])]
            return [(ids[int(rows[i])], float(sims[i])) for i in top if np.isfinite(sims[i])]
        assert loaded.matrix is not None  # no ANN: the vectors are in the matrix
        sims = loaded.matrix @ q
        n = min(limit, loaded.n)
        top = np.argpartition(-sims, n - 1)[:n]
        top = top[np.argsort(-sims[top])]
        return [(ids[int(i)], float(sims[i])) for i in top if np.isfinite(sims[i])]
