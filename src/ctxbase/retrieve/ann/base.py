"""What the in-memory vector search needs of an approximate nearest-neighbour index.

Rows are labelled by their position (0, 1, ...) in the owner's id list; similarities are
cosines (stored vectors are L2-normalised). Each index takes its own lock around the
library's calls: the libraries do not guard an insert against a concurrent query.
"""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from typing import Any, Literal

import numpy as np
import numpy.typing as npt
from pydantic import BaseModel, ConfigDict, Field

__all__ = ["AnnIndex", "AnnSettings", "Matrix", "Scalar"]

Matrix = npt.NDArray[np.float32]
Scalar = Literal["f32", "f16", "i8"]


class AnnSettings(BaseModel):
    """Which library holds the vectors above the threshold, and how."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    # auto: usearch when installed, else hnswlib, else exact search at every size
    library: Literal["auto", "usearch", "hnswlib"] = "auto"
    # how usearch stores each component (hnswlib always keeps float32)
    scalar: Scalar = "f16"
    connectivity: int = Field(default=16, ge=2, le=256)  # HNSW's M
    # ef_construction; None: each library's default here (hnswlib 200; usearch 128: at 100k
    # vectors it built in 1.2x hnswlib's time, recall@20 0.826 vs 0.836; 64 built in 0.6x
    # the time at 0.805-0.820, 200 in 2.2x at 0.831; bench/ann_memory.py)
    expansion_add: int | None = Field(default=None, ge=1)
    expansion_search: int = Field(default=128, ge=1)  # ef at query time


class AnnIndex(ABC):
    """An HNSW index over the rows 0..count-1 of one (project, model)."""

    library: str = ""

    def __init__(self, index: Any, dim: int, settings: AnnSettings) -> None:
        self._index = index  # the library's own index object
        self.dim = dim
        self.settings = settings
        self.lock = threading.Lock()

    @classmethod
    @abstractmethod
    def build(cls, matrix: Matrix, settings: AnnSettings) -> AnnIndex:
        """An index holding `matrix`'s rows as rows 0..len-1."""

    def add(self, block: Matrix, start: int) -> AnnIndex:
        """The index with `block` added as rows `start`, `start`+1, ...: this one, or a
        new one when it had to be rebuilt. Earlier snapshots may keep searching this one
        (they drop labels past their own row count)."""
        with self.lock:
            self._add(block, start)
        return self

    def remove(self, rows: npt.NDArray[np.int64]) -> None:
        """Mark `rows` removed: searches no longer find them and their vectors cannot be
        read back (the memory they hold stays until the owner reloads)."""
        if rows.size:
            with self.lock:
                self._remove(rows)

    def search(self, query: Matrix, k: int) -> tuple[npt.NDArray[np.int64], Matrix]:
        """The `k` nearest rows: labels and cosine similarities, best first."""
        with self.lock:
            labels, sims = self._search(query.astype(np.float32, copy=False), k)
        return labels.astype(np.int64, copy=False), sims.astype(np.float32, copy=False)

    def vectors(self, rows: npt.NDArray[np.int64]) -> Matrix:
        """The stored vectors of `rows` as float32 (as quantised, for a compact scalar)."""
        if not rows.size:
            return np.zeros((0, self.dim), dtype=np.float32)
        with self.lock:
            held = self._vectors(rows)
        return np.asarray(held, dtype=np.float32).reshape(len(rows), self.dim)

    @property
    @abstractmethod
    def count(self) -> int:
        """Rows held."""

    @abstractmethod
    def memory_bytes(self) -> int:
        """Memory the index holds (vectors and graph), as the library reports or sizes it."""

    @abstractmethod
    def _add(self, block: Matrix, start: int) -> None: ...

    @abstractmethod
    def _remove(self, rows: npt.NDArray[np.int64]) -> None: ...

    @abstractmethod
    def _search(self, query: Matrix, k: int) -> tuple[npt.NDArray[np.int64], Matrix]: ...

    @abstractmethod
    def _vectors(self, rows: npt.NDArray[np.int64]) -> Matrix: ...
