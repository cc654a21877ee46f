"""The ANN over usearch: vectors stored as float16 or int8 (half or a quarter of float32's
memory at about the same recall), growing in place as rows are appended."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from .base import AnnIndex, AnnSettings, Matrix

__all__ = ["UsearchIndex"]


class UsearchIndex(AnnIndex):
    library = "usearch"

    @classmethod
    def build(cls, matrix: Matrix, settings: AnnSettings) -> UsearchIndex:
        from usearch.index import Index

        dim = int(matrix.shape[1])
        # cosine, as pgvector answers: int8 quantises the normalised vector (its inner
        # product would come back unscaled)
        index = Index(
            ndim=dim,
            metric="cos",
            dtype=settings.scalar,
            connectivity=settings.connectivity,
            expansion_add=settings.expansion_add or 128,
            expansion_search=settings.expansion_search,
        )
        index.add(np.arange(len(matrix), dtype=np.uint64), matrix)
        return cls(index, dim, settings)

    @property
    def count(self) -> int:
        return int(self._index.size)

    def memory_bytes(self) -> int:
        return int(self._index.memory_usage)

    def _add(self, block: Matrix, start: int) -> None:
        self._index.add(np.arange(start, start + len(block), dtype=np.uint64), block)

    def _remove(self, rows: npt.NDArray[np.int64]) -> None:
        self._index.remove(rows.astype(np.uint64))

    def _search(self, query: Matrix, k: int) -> tuple[npt.NDArray[np.int64], Matrix]:
        found = self._index.search(query, k)
        keys = np.asarray(found.keys, dtype=np.int64)
        return keys, 1.0 - np.asarray(found.distances, dtype=np.float32)

    def _vectors(self, rows: npt.NDArray[np.int64]) -> Matrix:
        held = self._index.get(rows.astype(np.uint64), dtype=np.float32)
        return np.vstack(held) if isinstance(held, tuple) else np.asarray(held, np.float32)
