"""Dense pseudo-relevance feedback restricted to sessions the first hits do not reach.

A list question ("What board games has Nate played?") finds its first answers in one or two
sessions; the others sit in sessions with no turn near the top, in words the question does
not use. The first hits' vectors, averaged with the query's, point at what they are about:
one more nearest-neighbour search with that vector (no model call) ranks the turns of the
sessions not yet in the top hits, and that ranking is fused with the others. Turns of the
sessions already found are left out of it: they are the first hits' neighbours, which the
session window scores anyway, and a feedback ranking over them only repeats the first one.

Pure functions; the search (retrieve/search.py) reads the vectors and runs the ANN search.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import TYPE_CHECKING

import numpy as np

from ..store.base import SearchItem
from .config import SearchConfig
from .embed.base import FloatVector
from .filter_scope import FilterScope

if TYPE_CHECKING:
    from .search import Searcher

__all__ = ["dense_feedback_hits", "feedback_vector", "outside_sessions"]


def feedback_vector(
    query: FloatVector, seeds: Sequence[FloatVector], seed_weight: float
) -> FloatVector | None:
    """The unit vector of `query` plus `seed_weight` times the mean of the unit `seeds`;
    None without seeds (or a zero sum)."""
    if not seeds:
        return None
    q = np.asarray(query, dtype=np.float32)
    mean = np.mean(np.stack([_unit(np.asarray(s, dtype=np.float32)) for s in seeds]), axis=0)
    out = _unit(q) + np.float32(seed_weight) * mean
    norm = float(np.linalg.norm(out))
    if not np.isfinite(norm) or norm == 0.0:
        return None
    unit: FloatVector = (out / norm).astype(np.float32)
    return unit


def outside_sessions(
    found: Sequence[tuple[str, float]],
    session_of: Mapping[str, str | None],
    held: Collection[str],
) -> list[tuple[str, float]]:
    """The hits of `found` whose session is known and not in `held`, in their order.
    A hit with no session (an entity, a chunk of a document) is left out: the pass is about
    conversations spread over sessions."""
    out: list[tuple[str, float]] = []
    for item_id, score in found:
        session = session_of.get(item_id)
        if session is not None and session not in held:
            out.append((item_id, score))
    return out


def _unit(v: FloatVector) -> FloatVector:
    norm = float(np.linalg.norm(v))
    return v if norm == 0.0 or not np.isfinite(norm) else (v / norm).astype(np.float32)


def dense_feedback_hits(
    searcher: Searcher,
    project_id: str,
    query: str,
    pool: Mapping[str, float],
    items: dict[str, SearchItem],
    allowed: FilterScope | None,
    config: SearchConfig,
) -> list[tuple[str, float]]:
    """The feedback ranking: nearest items to the feedback vector of `query` and the best
    `dense_feedback_seeds` ids of `pool`, in sessions none of the best `coverage_window`
    ids is in. Reads the seeds' vectors and the found items' sessions (into `items`)."""
    assert searcher.embedder is not None
    ranked = list(pool)
    seeds = ranked[: config.dense_feedback_seeds]
    held = {s for k in ranked[: config.coverage_window] if (s := _session(items, k))}
    if not seeds or not held:
        return []
    vectors = searcher.vectors.vectors_of(project_id, searcher.embedder.name, seeds)
    qvec = feedback_vector(
        searcher.query_vector(query),
        [vectors[s] for s in seeds if s in vectors],
        config.dense_feedback_mix,
    )
    if qvec is None:
        return []
    found = searcher._semantic_hits(project_id, query, allowed, config, qvec)
    missing = [i for i, _ in found if i not in items]
    for stored in searcher.store.get_items(project_id, missing) if missing else []:
        items[stored.item_id] = stored
    session_of = {i: _session(items, i) for i, _ in found}
    return outside_sessions(found, session_of, held)


def _session(items: Mapping[str, SearchItem], item_id: str) -> str | None:
    it = items.get(item_id)
    return None if it is None else it.session_id
