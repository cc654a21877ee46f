"""The ANN over hnswlib: float32 vectors, a capacity with room to append (a full index is
resized in place)."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from .base import AnnIndex, AnnSettings, Matrix

__all__ = ["HnswlibIndex"]


class HnswlibIndex(AnnIndex):
    library = "hnswlib"

    @classmethod
    def build(cls, matrix: Matrix, settings: AnnSettings) -> HnswlibIndex:
        import hnswlib

        n, dim = int(matrix.shape[0]), int(matrix.shape[1])
        index = hnswlib.Index(space="ip", dim=dim)
        # room to append what is stored next without a rebuild
        index.init_index(
            max_elements=n + max(1024, n // 4),
            ef_construction=settings.expansion_add or 200,
            M=settings.connectivity,
        )
        index.add_items(matrix, np.arange(n))
        index.set_ef(settings.expansion_search)
        return cls(index, dim, settings)

    @property
    def capacity(self) -> int:
        return int(self._index.get_max_elements())

    @property
    def count(self) -> int:
        return int(self._index.get_current_count())

    def memory_bytes(self) -> int:
        # hnswlib reports no size: its layout (hnswalg.h), per slot of capacity the level-0
        # links (2M+1 ints), the vector, the label and the upper-level bookkeeping; per row
        # the label map entry and, for the 1/M rows on upper levels, their links.
        m, slots, rows = self.settings.connectivity, self.capacity, self.count
        per_slot = (2 * m + 1) * 4 + self.dim * 4 + 8 + 8 + 4
        per_row = 40 + (m * 4 + 4) // max(1, m - 1)
        return slots * per_slot + rows * per_row

    def _add(self, block: Matrix, start: int) -> None:
        end = start + len(block)
        if end > self.capacity:  # out of room: grown in place, with room again
            self._index.resize_index(end + max(1024, end // 4))
        self._index.add_items(block, np.arange(start, end))

    def _remove(self, rows: npt.NDArray[np.int64]) -> None:
        for row in rows.tolist():
            self._index.mark_deleted(row)

    def _search(self, query: Matrix, k: int) -> tuple[npt.NDArray[np.int64], Matrix]:
        labels, dists = self._index.knn_query(query, k=k)
        return np.asarray(labels[0], dtype=np.int64), 1.0 - np.asarray(dists[0], np.float32)

    def _vectors(self, rows: npt.NDArray[np.int64]) -> Matrix:
        return np.asarray(self._index.get_items(rows), dtype=np.float32)
