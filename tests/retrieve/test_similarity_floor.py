"""`min_similarity` is a floor on each returned hit's cosine similarity to the query, after
fusion: keyword-only and graph hits are measured by their stored vectors (seed 002's
`[r for r in results if r.score > 0.78]`)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import ctxbase
from ctxbase import ContextBase, ValidationError
from ctxbase.retrieve.search import Candidate
from ctxbase.retrieve.similarity_floor import apply_similarity_floor
from ctxbase.store.base import SearchItem

TEXTS = (
    "The orders cache TTL is 300 seconds",
    "orders shipped late on Monday",
    "The orders table has an index on created_at",
    "cache TTL for sessions is 60 seconds",
    "We met at the lake",
)
QUERY = "orders cache TTL"


def _fill(cb: ContextBase) -> None:
    for text in TEXTS:
        cb.record("user_message", session_id="s", text=text)
    cb.wait_for_embeddings()


@pytest.mark.parametrize("preset", ["hybrid", "hybrid_graph", "keyword", "semantic"])
def test_every_returned_hit_reaches_the_floor(cb: ContextBase, preset: str) -> None:
    _fill(cb)
    unfloored = cb.search(QUERY, preset=preset).results
    floored = cb.search(QUERY, preset=preset, min_similarity=0.5)
    sims = [c.similarity for c in floored.results]
    assert sims and all(s is not None and s >= 0.5 for s in sims)
    assert len(floored.results) < len(unfloored)  # keyword hits no longer pass regardless
    below = [c for c in floored.considered if (c.dropped or "").startswith("similarity ")]
    assert below and all("below min_similarity 0.5" in (c.dropped or "") for c in below)
    assert all(c.similarity is not None and c.similarity < 0.5 for c in below)
    # the floor keeps what clears it, in the order the search ranked it
    kept = [c.item_id for c in unfloored if c.similarity is None or c.similarity >= 0.5]
    if preset == "keyword":  # no vector search: the similarity is computed for the floor
        assert all(c.similarity is None for c in unfloored)
    else:
        assert [c.item_id for c in floored.results] == kept
    assert cb.search(QUERY, preset=preset, min_similarity=0.99).results == []


@pytest.mark.parametrize("preset", ["semantic", "hybrid"])
def test_hits_found_by_meaning_below_the_floor_stay_considered(
    cb: ContextBase, preset: str
) -> None:
    """A vector hit under the floor is listed as dropped, not lost with the vector list:
    every hit the search finds without the floor is in `considered` with it, the ones under
    it with their similarity and the reason."""
    _fill(cb)
    unfloored = cb.search(QUERY, preset=preset)
    floored = cb.search(QUERY, preset=preset, min_similarity=0.5)
    under = {
        c.item_id: c.similarity
        for c in unfloored.considered
        if c.similarity is not None and c.similarity < 0.5
    }
    assert under  # the data has hits found by meaning under the floor
    listed = {c.item_id: c for c in floored.considered}
    assert set(under) <= set(listed)
    for item_id, sim in under.items():
        c = listed[item_id]
        assert c.similarity == pytest.approx(sim)
        assert c.dropped == f"similarity {c.similarity:.4f} below min_similarity 0.5"
    assert not set(under) & {c.item_id for c in floored.results}
    # the results are those of the floor applied to the unfloored ranking
    kept = [c.item_id for c in unfloored.results if (c.similarity or 0.0) >= 0.5]
    assert [c.item_id for c in floored.results][: len(kept)] == kept


def test_the_floor_needs_an_embedder(tmp_path: Path) -> None:
    with ctxbase.open(str(tmp_path / "k.db"), project="p", embedder=None) as cb:
        cb.record("user_message", session_id="s", text=TEXTS[0])
        assert cb.search(QUERY, preset="keyword").results
        with pytest.raises(ValidationError, match=r"min_similarity.*embedder"):
            cb.search(QUERY, preset="keyword", min_similarity=0.5)


def _cand(item_id: str, similarity: float | None) -> Candidate:
    item = SearchItem(item_id, item_id, "event", "user_message", item_id, "", 0.0)
    return Candidate(item, similarity=similarity)


def test_apply_similarity_floor_without_a_store() -> None:
    q = np.array([1.0, 0.0], dtype=np.float32)
    stored = {"kw": np.array([0.6, 0.8], dtype=np.float32)}
    cands = [_cand("vec", 0.9), _cand("kw", None), _cand("new", None), _cand("low", 0.2)]
    marked = apply_similarity_floor(
        cands, 0.5, q, lambda ids: {i: stored[i] for i in ids if i in stored}
    )
    assert marked == 2
    vec, kw, new, low = cands
    assert vec.dropped is None
    assert kw.dropped is None and kw.similarity == pytest.approx(0.6)  # measured from its vector
    assert new.dropped == "similarity unknown (no vector yet); min_similarity 0.5"
    assert low.dropped == "similarity 0.2000 below min_similarity 0.5"
    # the query could not be embedded: nothing can be shown to reach the floor
    fresh = [_cand("vec", None)]
    assert apply_similarity_floor(fresh, 0.5, None, None) == 1
    assert "the query could not be embedded" in (fresh[0].dropped or "")
