"""Complementary hits at the top: each next place goes to a hit that also answers what the
hits above it leave out.

A question whose answer sits in two or three turns ("我从深圳出差回来的第二天，取消规则改成了
多少小时？") fills its top places with the turns that match its main part best: the answer,
then its neighbours and older statements of the same thing. The turn answering the other part
("我昨晚从深圳回来了") shares the query's rarer words, but ranks lower. Here the top `window`
hits are re-ordered greedily: the first stays; each next place goes to the hit whose score,
raised by `boost` times the weight of the query terms it says that no hit placed above it
says, is highest. Term weights are IDF over the best candidates, so the words most of them
share count little and a part of the question only a few of them answer counts most.

A turn's terms include those of the turn before it, as the keyword index holds them: a
short answer ("约在6月17日晚上7点") covers what its question asked. Pure functions.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Protocol, TypeVar

from ..store.base import SearchItem
from .tokenize import query_terms

__all__ = ["POOL", "Scored", "complement_order", "complemented", "term_weights"]

# Candidates the term weights are computed over (the best ones, in score order).
POOL = 30


def term_weights(query: Sequence[str], docs: Sequence[frozenset[str]]) -> dict[str, float]:
    """Each distinct query term's IDF over `docs`: log(1 + (n - df + 0.5) / (df + 0.5))."""
    n = len(docs)
    out: dict[str, float] = {}
    for term in dict.fromkeys(query):
        df = sum(1 for d in docs if term in d)
        out[term] = math.log(1.0 + (n - df + 0.5) / (df + 0.5))
    return out


def complement_order(
    ranked: Sequence[tuple[str, float]],
    terms_of: Mapping[str, frozenset[str]],
    query: Sequence[str],
    boost: float,
    window: int,
) -> list[tuple[str, float]]:
    """`ranked` (id, score), best first, with its first `window` re-ordered so that each
    place after the first goes to the best score times (1 + boost x the weight share of the
    query terms that hit adds to those placed above it). The window's scores are handed out
    again in the new order, so scores still descend and the rest keeps its place."""
    head = list(ranked[:window])
    if boost <= 0 or len(head) < 3 or not query:
        return list(ranked)
    pool = [terms_of.get(i, frozenset()) for i, _ in ranked[:POOL]]
    weights = term_weights(query, pool)
    total = sum(weights.values())
    if total <= 0:
        return list(ranked)
    order = [head.pop(0)]
    covered = set(terms_of.get(order[0][0], frozenset()))
    while head:
        gains = [
            score * (1.0 + boost * _added(terms_of.get(i, frozenset()), covered, weights) / total)
            for i, score in head
        ]
        # ties: the earlier (better-ranked) hit
        best = max(range(len(head)), key=lambda n: (gains[n], -n))
        chosen = head.pop(best)
        order.append(chosen)
        covered |= terms_of.get(chosen[0], frozenset())
    scores = sorted((s for _, s in ranked[:window]), reverse=True)
    return [(i, s) for (i, _), s in zip(order, scores, strict=True)] + list(ranked[window:])


def _added(said: frozenset[str], covered: set[str], weights: Mapping[str, float]) -> float:
    """The weight of the query terms `said` has that none of `covered` has."""
    return sum(w for t, w in weights.items() if t in said and t not in covered)


class Scored(Protocol):
    """A ranked search candidate: its unit and its (mutable) score."""

    item: SearchItem
    score: float


S = TypeVar("S", bound=Scored)


def complemented(ranked: Sequence[S], query: str, boost: float, window: int) -> list[S]:
    """`ranked` candidates (best first) with their top `window` re-ordered by
    `complement_order`, their scores set to match the new order."""
    if boost <= 0 or len(ranked) < 3:
        return list(ranked)
    terms_of = {
        c.item.item_id: frozenset(c.item.terms.split()) | frozenset(c.item.context_terms.split())
        for c in ranked[:POOL]
    }
    pairs = [(c.item.item_id, c.score) for c in ranked[:POOL]]
    order = complement_order(pairs, terms_of, query_terms(query), boost, window)
    by_id = {c.item.item_id: c for c in ranked[:POOL]}
    out: list[S] = []
    for item_id, score in order:
        cand = by_id[item_id]
        cand.score = score
        out.append(cand)
    return out + list(ranked[POOL:])
