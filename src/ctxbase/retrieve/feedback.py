"""Pseudo-relevance feedback: a second keyword pass seeded by the first hits' terms.

A question whose evidence is spread over sessions ("How many tournaments has Nate won?",
"What recipes has Joanna made?") finds one or two turns by its own words; the others share
words with those turns rather than with the question ("dairy-free", "video game"). Terms that
several of the best first hits have in common, and that few items of the project have, name
what the hits are about: searched again together with the query's own terms, they lead to
the turns the question's words missed. The vector side of this (the hits' mean vector
searched again) was measured and left out; this costs one in-memory keyword search and no
query embedding.

`feedback_terms` is a pure function over terms and document frequencies; `feedback_hits`
runs the second pass over the in-memory keyword index.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Collection, Mapping, Sequence

from ..store.base import ItemFilter, SearchItem
from .config import SearchConfig
from .keyword_index import Admission, KeywordIndex
from .tokenize import query_terms

__all__ = ["feedback_hits", "feedback_terms"]


def feedback_terms(
    query: Collection[str],
    seeds: Sequence[Collection[str]],
    df: Mapping[str, int],
    n: int,
    *,
    max_terms: int = 5,
    min_seeds: int = 2,
    max_df_share: float = 0.05,
) -> list[str]:
    """Up to `max_terms` terms to add to `query`, best first.

    `seeds` are the terms of the first hits, `df` how many of the project's `n` items hold
    each term. A term must occur in at least `min_seeds` seeds (one hit's words say what that
    hit is about, shared ones what the hits are about), not in the query, and in at most
    `max_df_share` of the items (a common word leads everywhere). Terms rank by how many seeds
    hold them times their IDF, ties by first appearance.
    """
    if n <= 0 or max_terms <= 0:
        return []
    held = Counter(t for seed in seeds for t in dict.fromkeys(seed))
    wanted = set(query)
    scored: list[tuple[float, str]] = []
    for term, count in held.items():
        freq = df.get(term, 0)
        if count < min_seeds or term in wanted or freq <= 0 or freq > max_df_share * n:
            continue
        scored.append((count * math.log(n / freq), term))
    scored.sort(key=lambda st: -st[0])  # stable: ties keep their first appearance
    return [t for _, t in scored[:max_terms]]


def feedback_hits(
    keywords: KeywordIndex,
    project_id: str,
    query: str,
    seeds: Sequence[SearchItem],
    config: SearchConfig,
    flt: ItemFilter | None = None,
    allowed: Admission | None = None,
) -> list[tuple[str, float]]:
    """The seeds (the first hits) in their order, then the other items by a keyword search
    for `query`'s terms plus the seeds' feedback terms; [] when the seeds share no term worth
    adding. The seeds lead as they came: the pass finds the turns the query's words missed
    without re-ordering the hits it started from (a seed holding more of the shared terms
    than a better one would otherwise overtake it)."""
    own = [it.terms.split() for it in seeds]
    n, df = keywords.frequencies(project_id, {t for terms in own for t in terms})
    terms = query_terms(query)
    extra = feedback_terms(terms, own, df, n, max_terms=config.feedback_terms)
    if not extra:
        return []
    found = keywords.search(project_id, terms + extra, config.candidates, flt, allowed)
    best = found[0][1] if found else 0.0  # each seed credited as the best (weighted fusion)
    lead = {it.item_id: best for it in seeds}
    return [*lead.items(), *((i, s) for i, s in found if i not in lead)][: config.candidates]
