"""In-memory vector search over a project's stored vectors.

Exact (one matrix product) for small projects; an HNSW index (hnswlib, when installed) above
a size threshold. The matrix is rebuilt when the store's index generation changes. Backends
with a native vector index (pgvector) answer `Store.vector_search` themselves instead.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from ..store.base import Store

__all__ = ["ANN_THRESHOLD", "VectorIndex"]

ANN_THRESHOLD = 50_000


@dataclass
class _Loaded:
    generation: int
    ids: list[str]
    matrix: npt.NDArray[np.float32]
    ann: object | None


class VectorIndex:
    """Per (project, model) cache of vectors, shared by all searches of one ContextBase."""

    def __init__(self, store: Store, ann_threshold: int = ANN_THRESHOLD) -> None:
        self.store = store
        self.ann_threshold = ann_threshold
        self._cache: dict[tuple[str, str], _Loaded] = {}
        self._lock = threading.Lock()

    def _load(self, project_id: str, model: str) -> _Loaded:
        gen = self.store.index_generation(project_id)
        key = (project_id, model)
        with self._lock:
            cached = self._cache.get(key)
            if cached is not None and cached.generation == gen:
                return cached
            ids: list[str] = []
            parts: list[npt.NDArray[np.float32]] = []
            for batch in self.store.iter_vectors(project_id, model):
                ids.extend(r.item_id for r in batch)
                parts.append(np.stack([r.vector for r in batch]))
            matrix = np.concatenate(parts) if parts else np.zeros((0, 1), dtype=np.float32)
            ann = self._build_ann(matrix) if len(ids) >= self.ann_threshold else None
            loaded = _Loaded(gen, ids, matrix, ann)
            self._cache[key] = loaded
            return loaded

    @staticmethod
    def _build_ann(matrix: npt.NDArray[np.float32]) -> object | None:
        try:
            import hnswlib
        except ImportError:  # exact search still works, just slower at this size
            return None
        index = hnswlib.Index(space="ip", dim=int(matrix.shape[1]))
        index.init_index(max_elements=int(matrix.shape[0]), ef_construction=200, M=16)
        index.add_items(matrix, np.arange(matrix.shape[0]))
        index.set_ef(128)
        built: object = index
        return built

    def search(
        self,
        project_id: str,
        model: str,
        query: npt.NDArray[np.float32],
        limit: int,
        allowed_ids: set[str] | None = None,
    ) -> list[tuple[str, float]]:
        native = self.store.vector_search(project_id, model, query, limit, allowed_ids)
        if native is not None:
            return native
        loaded = self._load(project_id, model)
        if not loaded.ids:
            return []
        if loaded.ann is not None and allowed_ids is None:
            labels, dists = loaded.ann.knn_query(query, k=min(limit, len(loaded.ids)))  # type: ignore[attr-defined]
            return [
                (loaded.ids[int(i)], 1.0 - float(d))
                for i, d in zip(labels[0], dists[0], strict=True)
            ]
        sims = loaded.matrix @ query.astype(np.float32)
        if allowed_ids is not None:
            mask = np.fromiter(
                (i in allowed_ids for i in loaded.ids), dtype=bool, count=len(loaded.ids)
            )
            sims = np.where(mask, sims, -np.inf)
        n = min(limit, len(loaded.ids))
        top = np.argpartition(-sims, n - 1)[:n]
        top = top[np.argsort(-sims[top])]
        return [(loaded.ids[int(i)], float(sims[i])) for i in top if np.isfinite(sims[i])]
