"""BM25 scoring of one query over in-memory postings, as pure functions whose work grows
with the postings a query touches, not with the project's size.

`exhaustive` scores every item holding a query term (what "and" mode, a filter listed whole
and a search widening past its first window need). `top` returns only the best `k`
(MaxScore): a term adds at most idf * (k1 + 1) * tf_bound to an item's score (tf_bound: the
largest tf / (tf + norm) among its items, below 1), so once a lower bound of the k-th best
score exceeds what the remaining common terms could add together, an item holding none but
those cannot enter the top k. Their long postings are then only looked up for the
candidates still in reach, never read whole.

Both sum an item's impacts in query-term order, as `dense` (one score per item of the
project) does: the same floats, so the same order and the same ties.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
import numpy.typing as npt

__all__ = [
    "BM25_B",
    "BM25_K1",
    "Ranked",
    "TermPostings",
    "best",
    "dense",
    "exhaustive",
    "top",
]

BM25_K1 = 1.2
BM25_B = 0.75

I32 = npt.NDArray[np.int32]
I64 = npt.NDArray[np.int64]
F32 = npt.NDArray[np.float32]
F64 = npt.NDArray[np.float64]
Admit = Callable[[I64], npt.NDArray[np.bool_]]

# Above this share of the project's size in postings, one score per item is cheaper than
# gathering the distinct items first (a sort of the postings).
_DENSE_SHARE = 0.25
# Partial sums are added in another order than the final ones: a bound is compared with this
# relative margin, far above the rounding of a few dozen additions.
_MARGIN = 1e-9


@dataclass(frozen=True)
class TermPostings:
    """One query term's postings: positions (ascending, distinct) and weighted frequencies;
    `idf` counts every item holding the term, also when `docs` is restricted to some."""

    docs: I32
    freqs: F32
    idf: float
    tf_bound: float = 1.0  # tf / (tf + norm) of none of its items is above this (nor 1)

    @property
    def bound(self) -> float:
        """What the term can add to any item's score at most."""
        return self.idf * (BM25_K1 + 1.0) * min(1.0, self.tf_bound)


@dataclass(frozen=True)
class Ranked:
    """Positions with their scores, and how many postings were read to get them."""

    positions: I64
    scores: F64
    read: int
    complete: bool = True  # every match is among `positions` (else only the best are)


def _impacts(term: TermPostings, norms: F64, docs: npt.NDArray[np.integer], freqs: F32) -> F64:
    f = freqs.astype(np.float64)
    return np.asarray((term.idf * (BM25_K1 + 1.0)) * f / (f + norms[docs]), dtype=np.float64)


def dense(terms: Sequence[TermPostings], norms: F64, mode: Literal["or", "and"] = "or") -> Ranked:
    """Every matching position (ascending) and its score, through one score per item of the
    project: cheapest when the postings cover much of it."""
    n = norms.size
    scores = np.zeros(n, dtype=np.float64)
    hits = np.zeros(n, dtype=np.int32) if mode == "and" else None
    for t in terms:
        scores[t.docs] += _impacts(t, norms, t.docs, t.freqs)
        if hits is not None:
            hits[t.docs] += 1
    read = sum(int(t.docs.size) for t in terms)
    if hits is not None:
        matched = np.flatnonzero(hits == len(terms)).astype(np.int64)
    else:  # every match scores above 0 (idf > 0, tf > 0)
        matched = np.flatnonzero(scores).astype(np.int64)
    return Ranked(matched, scores[matched], read)


def exhaustive(
    terms: Sequence[TermPostings], norms: F64, mode: Literal["or", "and"] = "or"
) -> Ranked:
    """Every matching position (ascending) and its score: in "or" mode the items holding
    any term, in "and" mode those holding all."""
    read = sum(int(t.docs.size) for t in terms)
    if not terms or read == 0:
        return Ranked(np.zeros(0, np.int64), np.zeros(0, np.float64), 0)
    if read >= _DENSE_SHARE * norms.size:
        return dense(terms, norms, mode)
    cat = np.concatenate([t.docs for t in terms]).astype(np.int64)
    # stable: each term's docs are one sorted run, merged in linear time
    order = np.argsort(cat, kind="stable")
    ranked = cat[order]
    first = np.ones(ranked.size, dtype=np.bool_)
    first[1:] = ranked[1:] != ranked[:-1]
    slot = np.empty(ranked.size, dtype=np.int64)
    slot[order] = np.cumsum(first) - 1
    positions = ranked[first]
    scores = np.zeros(positions.size, dtype=np.float64)
    hits = np.zeros(positions.size, dtype=np.int32)
    start = 0
    for t in terms:  # in query order, as `dense` adds them
        at = slot[start : start + t.docs.size]
        scores[at] += _impacts(t, norms, t.docs, t.freqs)
        hits[at] += 1
        start += t.docs.size
    if mode == "and":
        keep = hits == len(terms)
        return Ranked(positions[keep], scores[keep], read)
    return Ranked(positions, scores, read)


def best(positions: I64, scores: F64, k: int) -> I64:
    """Indexes of the `k` best of `positions` by score, then by position (storing order)."""
    at = np.arange(positions.size, dtype=np.int64)
    if k < positions.size:
        cut = np.argpartition(-scores, k - 1)[:k]
        # ties at the cut: every tied position competes, the earliest win
        at = np.flatnonzero(scores >= scores[cut].min())
    return at[np.lexsort((positions[at], -scores[at]))[:k]]


def top(terms: Sequence[TermPostings], norms: F64, k: int, admit: Admit | None = None) -> Ranked:
    """The `k` best matching positions ("or" mode) that `admit` passes, best first, with the
    scores and ties `exhaustive` gives them."""
    if k <= 0 or not terms:
        return Ranked(np.zeros(0, np.int64), np.zeros(0, np.float64), 0)
    # the rarest terms first: the largest bounds, the shortest postings
    order = sorted(terms, key=lambda t: (-t.bound, t.docs.size))
    rest = [*np.cumsum([t.bound for t in reversed(order)])[::-1].tolist(), 0.0]
    # theta: a lower bound of the k-th best score; a term is read whole while an item
    # holding it and the rarer ones alone could still reach theta
    docs, partial, read = _essential(order[:1], norms, admit)
    theta, i = _kth(partial, k), 1
    while i < len(order) and docs.size < k:  # seeds: the items of the rarest terms
        more, more_partial, more_read = _essential(order[i : i + 1], norms, admit)
        docs, partial = _merged([docs, more], [partial, more_partial])
        theta, read, i = _kth(partial, k), read + more_read, i + 1
    if i < len(order) and docs.size >= k:
        # the best seeds' whole scores (lookups in the other terms): their k-th best is a
        # far higher bound than the k-th partial score
        seeds = np.argpartition(-partial, k - 1)[: 2 * k]
        full = partial[seeds]
        for t in order[i:]:
            at, found = _lookup(t.docs, docs[seeds])
            full[found] += _impacts(t, norms, docs[seeds][found], t.freqs[at[found]])
        theta, read = max(theta, _kth(full, k)), read + seeds.size * (len(order) - i)
    essential = i
    while essential < len(order) and rest[essential] >= theta * (1.0 - _MARGIN):
        essential += 1
    if essential > i:
        more, more_partial, more_read = _essential(order[i:essential], norms, admit)
        docs, partial = _merged([docs, more], [partial, more_partial])
        theta, read = max(theta, _kth(partial, k)), read + more_read
    complete = essential == len(order) and docs.size <= k
    # the rest only for the candidates still in reach, dropping those that fall out of it
    for j in range(essential, len(order)):
        keep = partial + rest[j] >= theta * (1.0 - _MARGIN)
        docs, partial = docs[keep], partial[keep]
        t = order[j]
        at, found = _lookup(t.docs, docs)
        read += docs.size
        partial[found] += _impacts(t, norms, docs[found], t.freqs[at[found]])
        theta = max(theta, _kth(partial, k))
    docs = docs[partial >= theta * (1.0 - _MARGIN)]  # `partial` is the whole score now
    # the final scores as `exhaustive` sums them: in query order
    scores = np.zeros(docs.size, dtype=np.float64)
    for t in terms:
        at, found = _lookup(t.docs, docs)
        scores[found] += _impacts(t, norms, docs[found], t.freqs[at[found]])
    pick = best(docs, scores, k)
    return Ranked(docs[pick], scores[pick], read + docs.size * len(terms), complete)


def _essential(
    terms: Sequence[TermPostings], norms: F64, admit: Admit | None
) -> tuple[I64, F64, int]:
    """The items holding any of `terms` that `admit` passes (ascending), what the terms add
    to their scores (summed in any order), and how many postings were read."""
    docs = [t.docs.astype(np.int64) for t in terms]
    impacts = [_impacts(t, norms, t.docs, t.freqs) for t in terms]
    held, partial = _merged(docs, impacts)
    read = sum(d.size for d in docs)
    if admit is not None and held.size:
        keep = admit(held)
        held, partial = held[keep], partial[keep]
    return held, partial, read


def _merged(docs: Sequence[I64], scores: Sequence[F64]) -> tuple[I64, F64]:
    """The union of sorted position lists, the scores of a position summed."""
    if len(docs) == 1:
        return docs[0], scores[0]
    cat = np.concatenate(docs)
    order = np.argsort(cat, kind="stable")  # sorted runs: merged in linear time
    cat = cat[order]
    first = np.ones(cat.size, dtype=np.bool_)
    first[1:] = cat[1:] != cat[:-1]
    summed = np.bincount(np.cumsum(first) - 1, weights=np.concatenate(scores)[order])
    return cat[first], np.asarray(summed, dtype=np.float64)


def _kth(scores: F64, k: int) -> float:
    """The k-th largest score, 0 when there are fewer."""
    if scores.size < k:
        return 0.0
    return float(np.partition(scores, scores.size - k)[scores.size - k])


def _lookup(sorted_docs: I32, docs: I64) -> tuple[I64, npt.NDArray[np.bool_]]:
    """Where each of `docs` is in `sorted_docs`, and whether it is there at all."""
    at = np.searchsorted(sorted_docs, docs).astype(np.int64)
    found = at < sorted_docs.size
    found[found] = sorted_docs[at[found]] == docs[found]
    return at, found
