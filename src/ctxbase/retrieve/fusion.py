"""Pure scoring functions: rank fusion, time decay, dynamic top-k, near-duplicate removal."""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence

__all__ = [
    "DUPLICATE_LOOKAHEAD",
    "confidence_factor",
    "dedupe_near_identical",
    "dynamic_top_k",
    "keyword_stand_ins",
    "normalise_scores",
    "rrf_fuse",
    "spared_age",
    "standout",
    "time_decay",
    "weighted_fuse",
]


def keyword_stand_ins(names: Iterable[str]) -> dict[str, str]:
    """For each semantic list among `names`, the keyword list searched for the same text:
    its rank stands in for the semantic one of a unit with no vector yet."""
    pairs = {"semantic": "keyword", "semantic_topic": "keyword", "dense_feedback": "feedback"}
    listed = set(names)
    for name in listed:
        if name.endswith("_semantic"):  # clause{n}_semantic beside clause{n}
            pairs[name] = name.removesuffix("_semantic")
    return {sem: kw for sem, kw in pairs.items() if sem in listed and kw in listed}


def rrf_fuse(
    rankings: Mapping[str, Sequence[str]],
    weights: Mapping[str, float],
    k: int = 60,
    pending: Collection[str] = (),
) -> dict[str, float]:
    """Weighted reciprocal-rank fusion: sum of weight / (k + rank) over the rankings.

    A `pending` unit (no vector yet) missing from a semantic list was never compared, not
    rejected: there it counts at its rank in the paired keyword list (`keyword_stand_ins`),
    so a strong keyword hit written a moment ago ranks as one. Nothing else moves.
    """
    fused: dict[str, float] = {}
    for name, ranked in rankings.items():
        w = weights.get(name, 1.0)
        if w == 0:
            continue
        for rank, item in enumerate(ranked, start=1):
            fused[item] = fused.get(item, 0.0) + w / (k + rank)
    if pending:
        for sem, kw in keyword_stand_ins(rankings).items():
            w, placed = weights.get(sem, 1.0), set(rankings[sem])
            if w == 0 or weights.get(kw, 1.0) == 0:  # a list left out lends nothing
                continue
            for rank, item in enumerate(rankings[kw], start=1):
                if item in pending and item not in placed:
                    fused[item] = fused.get(item, 0.0) + w / (k + rank)
    return fused


def standout(scores: Mapping[str, float], min_gap: float) -> str | None:
    """The best-scored id when it stands out from the rest: its lead over the second is at
    least `min_gap` of its lead over the median score. Scale-free (a ratio of differences),
    so it needs no calibration per model. None with fewer than three scores."""
    if len(scores) < 3:
        return None
    ordered = sorted(scores.items(), key=lambda kv: (-kv[1], kv[0]))
    first, second = ordered[0][1], ordered[1][1]
    median = ordered[len(ordered) // 2][1]
    if first <= median:
        return None
    return ordered[0][0] if (first - second) / (first - median) >= min_gap else None


def normalise_scores(scores: Mapping[str, float]) -> dict[str, float]:
    """Min-max to [0, 1]; a single score (or all equal) becomes 1."""
    if not scores:
        return {}
    lo, hi = min(scores.values()), max(scores.values())
    if hi - lo < 1e-12:
        return dict.fromkeys(scores, 1.0)
    return {k: (v - lo) / (hi - lo) for k, v in scores.items()}


def weighted_fuse(
    scores: Mapping[str, Mapping[str, float]],
    weights: Mapping[str, float],
    pending: Collection[str] = (),
) -> dict[str, float]:
    """Sum of weight * min-max-normalised score per method; a `pending` unit missing from a
    semantic method counts there with its normalised score of the paired keyword method
    (as in `rrf_fuse`)."""
    fused: dict[str, float] = {}
    for name, method_scores in scores.items():
        w = weights.get(name, 1.0)
        for item, s in normalise_scores(method_scores).items():
            fused[item] = fused.get(item, 0.0) + w * s
    if pending:
        for sem, kw in keyword_stand_ins(scores).items():
            w, placed = weights.get(sem, 1.0), scores[sem]
            if w == 0 or weights.get(kw, 1.0) == 0:
                continue
            for item, s in normalise_scores(scores[kw]).items():
                if item in pending and item not in placed:
                    fused[item] = fused.get(item, 0.0) + w * s
    return fused


def time_decay(age_seconds: float, half_life_days: float | None) -> float:
    """Exponential decay factor in (0, 1]: 0.5 after one half-life; 1 when disabled."""
    if not half_life_days or age_seconds <= 0:
        return 1.0
    return math.pow(0.5, age_seconds / (half_life_days * 86400.0))


def spared_age(age_seconds: float, uses: int, spare_uses: int) -> float:
    """The age time decay counts for an item placed in `uses` assembled contexts: none at
    `spare_uses` or more (`spare_uses` 0: never), else its age over 1 + uses (each use
    slows its decay; 1 + 0 = its own age)."""
    if spare_uses and uses >= spare_uses:
        return 0.0
    return age_seconds / (1 + uses)


def confidence_factor(confidence: float, weight: float) -> float:
    """Score factor of a confidence in [0, 1]: 1 - w + 2w * confidence, so 1 at the
    neutral 0.5, 1 + w at 1 and 1 - w at 0; 1 when `weight` is 0."""
    return 1.0 - weight + weight * 2.0 * confidence


def dynamic_top_k(
    scored: Sequence[tuple[str, float]],
    *,
    min_k: int,
    max_k: int,
    token_allowance: int | None = None,
    tokens_of: Callable[[str], int] | None = None,
    relative_cutoff: float = 0.5,
) -> list[tuple[str, float]]:
    """Keep between min_k and max_k results: past min_k, stop when the score falls below
    `relative_cutoff` of the best, or when the token allowance would be exceeded."""
    out: list[tuple[str, float]] = []
    used = 0
    best = scored[0][1] if scored else 0.0
    for item, score in scored:
        if len(out) >= max_k:
            break
        cost = tokens_of(item) if (token_allowance is not None and tokens_of) else 0
        if len(out) >= min_k:
            if best > 0 and score < best * relative_cutoff:
                break
            if token_allowance is not None and used + cost > token_allowance:
                break
        out.append((item, score))
        used += cost
    return out


_WORD = re.compile(r"\w+", re.UNICODE)


# what a near-identical copy is compared by: its word pairs, and the words it holds
_Signature = tuple[set[str], frozenset[str]]


def _signature(text: str) -> _Signature:
    words = _WORD.findall(text.lower())
    if len(words) <= 3:  # Chinese runs are single "words": fall back to character bigrams
        joined = "".join(words)
        pairs = {joined[i : i + 2] for i in range(max(1, len(joined) - 1))}
    else:
        pairs = {" ".join(words[i : i + 2]) for i in range(len(words) - 1)}
    return pairs, frozenset(words)


# results below a `limit` cut still checked for copies of the kept ones (dedupe_near_identical)
DUPLICATE_LOOKAHEAD = 10


def dedupe_near_identical(
    ranked: Sequence[tuple[str, float]],
    text_of: Callable[[str], str],
    threshold: float = 0.9,
    limit: int | None = None,
) -> tuple[list[tuple[str, float]], dict[str, str]]:
    """Drop results whose text is near-identical (Jaccard of word bigrams >= threshold) to a
    better one and holds the same words: a copy differing in case, spacing or punctuation
    folds into it, while one word changed in a long text ("MySQL" for "PostgreSQL", "20 s"
    for "30 s") is another statement, kept however alike the rest. Returns the kept results
    and {dropped: kept_instead}. With `limit`, only the first `limit` distinct results are
    checked against each other (quadratic cost); the next `limit + DUPLICATE_LOOKAHEAD` are
    checked against those, so a copy of a kept result ranked just below the cut is still
    named as its duplicate (a copy scores as the result does, so it ranks beside it); the
    rest follow unchecked."""
    kept: list[tuple[str, float]] = []
    kept_shingles: list[tuple[str, _Signature]] = []
    dropped: dict[str, str] = {}

    def copy_of(sig: _Signature) -> str | None:
        sh, words = sig
        for other, (osh, owords) in kept_shingles:
            if sh and osh and words == owords:
                inter = len(sh & osh)
                if inter and inter / len(sh | osh) >= threshold:
                    return other
        return None

    for n, (item, score) in enumerate(ranked):
        if limit is not None and len(kept) >= limit:
            ahead = ranked[n : n + limit + DUPLICATE_LOOKAHEAD]
            for later, later_score in ahead:
                dup_of = copy_of(_signature(text_of(later)))
                if dup_of is None:
                    kept.append((later, later_score))
                else:
                    dropped[later] = dup_of
            kept.extend(ranked[n + len(ahead) :])
            break
        sig = _signature(text_of(item))
        dup_of = copy_of(sig)
        if dup_of is not None:
            dropped[item] = dup_of
            continue
        kept.append((item, score))
        kept_shingles.append((item, sig))
    return kept, dropped
