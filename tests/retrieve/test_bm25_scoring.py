"""The BM25 scoring kernel on random corpora: the compact and the pruned (top k) paths give
exactly the scores, order and ties of one dense score per item, and the pruned path reads
fewer postings when the query has common terms."""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt
import pytest

from ctxbase.retrieve.bm25_scoring import (
    BM25_B,
    BM25_K1,
    Admit,
    TermPostings,
    dense,
    exhaustive,
    top,
)

F64 = npt.NDArray[np.float64]
I64 = npt.NDArray[np.int64]


def _reference(
    terms: list[TermPostings], norms: F64, k: int, admit: Admit | None
) -> tuple[I64, F64]:
    """The best k as the index computed them before: a score per item of the project, the
    matches by flatnonzero, the best by score then position."""
    scores = np.zeros(norms.size, dtype=np.float64)
    for t in terms:
        f = t.freqs.astype(np.float64)
        scores[t.docs] += (t.idf * (BM25_K1 + 1.0)) * f / (f + norms[t.docs])
    matched = np.flatnonzero(scores).astype(np.int64)
    if admit is not None:
        matched = matched[admit(matched)]
    values = scores[matched]
    if k < matched.size:
        cut = np.argpartition(-values, k - 1)[:k]
        edge = values[cut].min()
        cut = np.flatnonzero(values >= edge)
        matched, values = matched[cut], values[cut]
    order = np.lexsort((matched, -values))[:k]
    return matched[order], values[order]


def _corpus(rng: np.random.Generator) -> tuple[list[TermPostings], F64]:
    """A query's postings over a random project: rare to very common terms (idf floored),
    few distinct lengths and frequencies so that many scores tie; each term's bound is the
    loosest (tf / (tf + norm) < 1), the index's (largest tf, shortest item) or the
    tightest (what its best item gets)."""
    n = int(rng.integers(1, 3000))
    lengths = rng.choice([3.0, 5.0, 8.0, 13.0, 40.0], size=n)
    norms = BM25_K1 * (1.0 - BM25_B + BM25_B * lengths / lengths.mean())
    terms = []
    for _ in range(int(rng.integers(1, 9))):
        share = float(rng.choice([0.001, 0.01, 0.05, 0.2, 0.5, 0.9]))
        df = max(1, min(n, int(rng.binomial(n, share))))
        docs = np.sort(rng.choice(n, size=df, replace=False)).astype(np.int32)
        freqs = rng.choice(np.asarray([1.0, 2.0, 3.0, 4.0], np.float32), size=df)
        idf = math.log((n - df + 0.5) / (df + 0.5))
        f = freqs.astype(np.float64)
        tf_bound = [1.0, f.max() / (f.max() + norms[docs].min()), (f / (f + norms[docs])).max()]
        terms.append(TermPostings(docs, freqs, idf if idf > 0 else 1e-6, rng.choice(tf_bound)))
    return terms, norms


@pytest.mark.parametrize("seed", range(40))
def test_top_k_and_exhaustive_equal_dense_scoring(seed: int) -> None:
    rng = np.random.default_rng(seed)
    for case in range(10):
        terms, norms = _corpus(rng)
        mask = rng.random(norms.size) < 0.6

        def admit(p: I64, mask: npt.NDArray[np.bool_] = mask) -> npt.NDArray[np.bool_]:
            return mask[p]

        every = exhaustive(terms, norms)
        whole = dense(terms, norms)
        assert np.array_equal(every.positions, whole.positions)
        assert np.array_equal(every.scores, whole.scores)  # the same floats, not close ones
        for k in (1, 3, 10, 108):
            for flt in (None, admit):
                want_at, want_scores = _reference(terms, norms, k, flt)
                got = top(terms, norms, k, flt)
                assert np.array_equal(got.positions, want_at), (seed, case, k)
                assert np.array_equal(got.scores, want_scores), (seed, case, k)
                if got.complete:  # every match is there
                    assert got.positions.size == (want_at.size if flt else whole.positions.size)


def test_and_mode_keeps_the_items_holding_every_term() -> None:
    rng = np.random.default_rng(7)
    for _ in range(50):
        terms, norms = _corpus(rng)
        every = exhaustive(terms, norms, "and")
        whole = dense(terms, norms, "and")
        assert np.array_equal(every.positions, whole.positions)
        assert np.array_equal(every.scores, whole.scores)
        held = set(range(norms.size))
        for t in terms:
            held &= set(t.docs.tolist())
        assert set(every.positions.tolist()) == held


def test_common_terms_are_looked_up_not_read_whole() -> None:
    rng = np.random.default_rng(11)
    n = 100_000
    norms = np.full(n, BM25_K1, dtype=np.float64)

    def term(df: int) -> TermPostings:
        docs = np.sort(rng.choice(n, size=df, replace=False)).astype(np.int32)
        idf = math.log((n - df + 0.5) / (df + 0.5))
        return TermPostings(docs, np.ones(df, np.float32), idf if idf > 0 else 1e-6)

    # a rare term, a less rare one and two common ones (a quarter and a third of the items)
    terms = [term(25_000), term(200), term(40), term(33_000)]
    total = sum(t.docs.size for t in terms)
    got = top(terms, norms, 10)
    want_at, want_scores = _reference(terms, norms, 10, None)
    assert np.array_equal(got.positions, want_at)
    assert np.array_equal(got.scores, want_scores)
    assert not got.complete
    # the common terms' 58,000 postings are looked up for a few hundred candidates at most
    assert got.read < 2_000 < total
