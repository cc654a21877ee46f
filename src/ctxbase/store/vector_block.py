"""Vectors read into one preallocated float32 matrix (Store.vector_block), block by block."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from .base import VectorBlock

if TYPE_CHECKING:  # loaded by the first read of vectors, not by opening a store
    import numpy as np
    import numpy.typing as npt

__all__ = ["BATCH_ROWS", "VectorFill"]

# Rows fetched per read: their driver objects are what the read holds beyond the matrix.
BATCH_ROWS = 1024


class VectorFill:
    """Rows of (id, vector) copied into a matrix as they are read. `expected` (rows the
    caller counted) sizes it once; more rows than that grow it by half again."""

    def __init__(self, expected: int = 0) -> None:
        import numpy as np

        self.expected = expected
        self.ids: list[str] = []
        self.matrix: npt.NDArray[np.float32] = np.zeros((0, 0), dtype=np.float32)

    def add_rows(self, rows: Iterable[tuple[str, bytes | npt.NDArray[np.float32]]]) -> None:
        """Add rows whose vector is float32 bytes (as stored) or an array."""
        import numpy as np

        ids: list[str] = []
        parts: list[npt.NDArray[np.float32]] = []
        for item_id, vec in rows:
            ids.append(item_id)
            parts.append(np.frombuffer(vec, dtype=np.float32) if isinstance(vec, bytes) else vec)
        if not ids:
            return
        dim = len(parts[0])
        n = len(self.ids)
        if not n:
            self.matrix = np.empty((max(self.expected, len(ids)), dim), dtype=np.float32)
        elif n + len(ids) > len(self.matrix):
            grown = np.empty((max(n + len(ids), len(self.matrix) * 3 // 2), dim), np.float32)
            grown[:n] = self.matrix[:n]
            self.matrix = grown
        self.matrix[n : n + len(ids)] = parts  # ValueError if a vector's length differs
        self.ids.extend(ids)

    def block(self, marker: int, removals: int) -> VectorBlock:
        n = len(self.ids)
        # a view of the first n rows; copied down to size only when much was left unused
        # (a copy doubles the memory for a moment)
        unused = len(self.matrix) - n
        matrix = self.matrix[:n].copy() if unused > len(self.matrix) // 8 else self.matrix[:n]
        return VectorBlock(self.ids, matrix, marker, removals)
