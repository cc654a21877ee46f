"""`min_similarity`: a floor on the cosine similarity of every hit a search returns (seed
002's `[r for r in results if r.score > 0.78]`), after fusion and graph expansion.

A hit found by vector search carries its similarity; one found only by keyword or by a
graph hop has it computed here from its stored vector. A hit with no vector yet (captured
but not embedded), or every hit when the query could not be embedded, has no similarity to
compare: it is left out too, marked as such, so each returned hit is known to reach the
floor (the response's `pending_vectors` counts the units still waiting for a vector).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

if TYPE_CHECKING:
    from .search import Candidate

__all__ = ["apply_similarity_floor"]

VectorsOf = Callable[[Sequence[str]], Mapping[str, npt.NDArray[np.float32]]]


def apply_similarity_floor(
    cands: Iterable[Candidate],
    floor: float,
    query_vector: npt.NDArray[np.float32] | None,
    vectors_of: VectorsOf | None,
    unknown: str = "no vector yet",
) -> int:
    """Mark each live candidate below `floor` as dropped; the number marked. Candidates
    without a similarity get one from `vectors_of` (their stored vectors) and
    `query_vector`; those still without one are dropped as `unknown` (why it is unknown:
    "no vector yet", "the query could not be embedded")."""
    live = [c for c in cands if c.dropped is None]
    if query_vector is not None and vectors_of is not None:
        missing = [c.item_id for c in live if c.similarity is None]
        found = vectors_of(missing) if missing else {}
        q = np.asarray(query_vector, dtype=np.float32)
        for c in live:
            vec = found.get(c.item_id) if c.similarity is None else None
            if vec is not None:
                c.similarity = float(np.dot(np.asarray(vec, dtype=np.float32), q))
    marked = 0
    for c in live:
        if c.similarity is None:
            why = unknown if query_vector is not None else "the query could not be embedded"
            c.dropped = f"similarity unknown ({why}); min_similarity {floor}"
        elif c.similarity < floor:
            c.dropped = f"similarity {c.similarity:.4f} below min_similarity {floor}"
        else:
            continue
        marked += 1
    return marked
