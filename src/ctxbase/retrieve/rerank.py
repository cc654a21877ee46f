"""A learned re-ordering of the top hits (`SearchConfig.rerank_top`).

Fusion scores every candidate by hand-set rules; which of its signals matter together for
a given hit (a keyword rank with no semantic one, a short turn that states a time for a
question asking when, a hit in the first hit's session) is learned here by a small
gradient-boosted tree ensemble over features every search already has. It only re-orders
the first `rerank_top` hits (20 in `hybrid_graph`): what fusion ranked below them stays
below.

The ensemble ships as JSON beside this module (`rerank_model.json`); `bench/learned_rerank.py`
trains it (numpy, `rerank_training.py`) from the benchmark conversations and measures it
leave-one-conversation-out. `SearchConfig.rerank_model` names another model file.
`rerank_features` is the one feature function both the training and the search use, so
they cannot drift apart. Inference is numpy only: no model runtime is needed.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache, lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import ValidationError
from .answer_types import asks_for_date
from .candidate import Candidate

__all__ = [
    "FEATURE_NAMES",
    "FEATURE_POOL",
    "TreeEnsemble",
    "default_ensemble",
    "ensemble_from_file",
    "rerank_features",
    "reranked",
    "shipped_model_conversations",
    "shipped_model_sets",
]

# Features are read over this many of the ranked candidates (maxima, sessions of the best).
FEATURE_POOL = 40

FEATURE_NAMES = (
    "inverse_rank",
    "log_rank",
    "score_share",  # the fused score over the best one
    "keyword_inverse_rank",
    "keyword_found",
    "keyword_score_share",
    "semantic_inverse_rank",
    "semantic_found",
    "similarity",
    "similarity_gap",  # below the best similarity of the pool
    "expanded",  # reached by a graph hop or the session window
    "log_length",
    "asks",  # the text ends with a question mark
    "has_digit",
    "query_asks_when",  # answer_types.asks_for_date
    "query_log_length",
    "top5_same_session",  # how many of the best 5 share its session
    "first_hit_session",
    "says_time",  # a clock time, a weekday or a calendar day
)

# Narrower than answer_types.states_number / states_date and questions.asks_only on
# purpose: with those as the features instead, leave-one-conversation-out R@1 fell on
# LoCoMo and English (bench/learned_rerank.py; docs/benchmark-log.md).
_DIGIT = re.compile(r"\d")
_TIME = re.compile(
    r"\d{1,2}[:：点月日号]|\b(?:mon|tues|wednes|thurs|fri|satur|sun)day\b|周[一二三四五六日天]",
    re.IGNORECASE,
)
_MODEL_PATH = Path(__file__).with_name("rerank_model.json")


def rerank_features(
    query: str, ranked: Sequence[Candidate], rows_wanted: int = FEATURE_POOL
) -> np.ndarray:
    """One row per candidate of `ranked[:rows_wanted]` (best first), FEATURE_NAMES columns;
    the maxima they are measured against are over `ranked[:FEATURE_POOL]` whatever the rows
    wanted (the search scores only its top, training every candidate of the pool)."""
    pool = list(ranked[:FEATURE_POOL])
    if not pool:
        return np.zeros((0, len(FEATURE_NAMES)))
    top = max(c.score for c in pool) or 1.0
    keyword_best = max((c.keyword_score for c in pool if c.keyword_score is not None), default=0)
    sims = [c.similarity for c in pool if c.similarity is not None]
    sim_best = max(sims) if sims else 0.0
    best_sessions = [c.item.session_id for c in pool[:5]]
    first_session = pool[0].item.session_id
    asks_when = 1.0 if asks_for_date(query) else 0.0
    query_length = math.log(1 + len(query))
    rows = []
    for n, c in enumerate(pool[:rows_wanted]):
        text = c.item.text or ""
        session = c.item.session_id
        # a candidate with no similarity (found by keyword before its vector was stored)
        # counts as a little below the best, not as unrelated
        sim = c.similarity if c.similarity is not None else sim_best - 0.1
        rows.append(
            [
                1 / (n + 1),
                math.log(n + 1),
                c.score / top,
                1 / c.keyword_rank if c.keyword_rank else 0.0,
                1.0 if c.keyword_rank else 0.0,
                (c.keyword_score or 0.0) / (keyword_best or 1.0),
                1 / c.semantic_rank if c.semantic_rank else 0.0,
                1.0 if c.semantic_rank else 0.0,
                sim,
                sim - sim_best,
                1.0 if c.graph_via else 0.0,
                math.log(1 + len(text)),
                1.0 if text.rstrip().endswith(("?", "？")) else 0.0,
                1.0 if _DIGIT.search(text) else 0.0,
                asks_when,
                query_length,
                float(sum(1 for s in best_sessions if session is not None and s == session)),
                1.0 if session is not None and session == first_session else 0.0,
                1.0 if _TIME.search(text) else 0.0,
            ]
        )
    return np.asarray(rows, dtype=float).reshape(-1, len(FEATURE_NAMES))


@dataclass(frozen=True)
class TreeEnsemble:
    """A gradient-boosted ensemble: the sum of its trees' leaf values, plus a baseline.

    All trees' nodes sit in flat arrays (`roots` gives each tree's first node), so every
    row walks every tree at once, one level per step."""

    features: tuple[str, ...]
    baseline: float
    roots: np.ndarray
    feature: np.ndarray
    threshold: np.ndarray
    left: np.ndarray  # absolute node index
    right: np.ndarray
    leaf: np.ndarray  # bool per node
    value: np.ndarray

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> TreeEnsemble:
        features = tuple(data["features"])
        if features != FEATURE_NAMES:
            raise ValueError("the re-ranking model was trained on other features")
        roots: list[int] = []
        feature: list[int] = []
        threshold: list[float] = []
        left: list[int] = []
        right: list[int] = []
        leaf: list[bool] = []
        value: list[float] = []
        for n, tree in enumerate(data["trees"]):
            _check_tree(n, tree, len(features))
            base = len(feature)
            roots.append(base)
            feature += tree["feature"]
            threshold += tree["threshold"]
            left += [base + n for n in tree["left"]]
            right += [base + n for n in tree["right"]]
            leaf += tree["leaf"]
            value += tree["value"]
        return cls(
            features,
            float(data["baseline"]),
            np.asarray(roots, dtype=np.intp),
            np.asarray(feature, dtype=np.intp),
            np.asarray(threshold, dtype=float),
            np.asarray(left, dtype=np.intp),
            np.asarray(right, dtype=np.intp),
            np.asarray(leaf, dtype=bool),
            np.asarray(value, dtype=float),
        )

    def score(self, x: np.ndarray) -> np.ndarray:
        """Higher is likelier evidence (log-odds), one per row of `x`."""
        if len(x) == 0:
            return np.zeros(0)
        node = np.tile(self.roots, (len(x), 1))  # rows x trees
        rows = np.arange(len(x))[:, None]
        while not (done := self.leaf[node]).all():
            goes_left = x[rows, self.feature[node]] <= self.threshold[node]
            step = np.where(goes_left, self.left[node], self.right[node])
            node = np.where(done, node, step)
        return np.asarray(self.baseline + self.value[node].sum(axis=1), dtype=float)


@cache
def default_ensemble() -> TreeEnsemble:
    """The shipped model, read once on first use (nothing is read at import time)."""
    return TreeEnsemble.from_json(_shipped_model_data())


def _check_tree(n: int, tree: dict[str, Any], n_features: int) -> None:
    """A tree every row can walk to a leaf: equal-length node lists, each split on a known
    feature with both children after it (so no walk loops or leaves the tree)."""
    keys = ("feature", "threshold", "left", "right", "leaf", "value")
    sizes = {len(tree[key]) for key in keys}
    if len(sizes) != 1 or not sizes.pop():
        raise ValueError(f"tree {n}: its node lists ({', '.join(keys)}) differ in length")
    size = len(tree["leaf"])
    for node, is_leaf in enumerate(tree["leaf"]):
        if is_leaf:
            continue
        if not 0 <= tree["feature"][node] < n_features:
            raise ValueError(f"tree {n}, node {node}: no feature {tree['feature'][node]}")
        for side in ("left", "right"):
            if not node < tree[side][node] < size:
                raise ValueError(f"tree {n}, node {node}: its {side} child is not a later node")


@cache
def _shipped_model_data() -> dict[str, Any]:
    """The shipped model file, read once for its trees and what it was trained on."""
    data: dict[str, Any] = json.loads(_MODEL_PATH.read_text(encoding="utf-8"))
    return data


def shipped_model_conversations() -> frozenset[str]:
    """Fingerprints of the conversations the shipped model was trained on
    (`evaluation.rerank_folds.conversation_fingerprint`): a benchmark holding one of them
    out must not score it with this model."""
    return frozenset(_shipped_model_data().get("conversations", ()))


def shipped_model_sets() -> tuple[str, ...]:
    """The memory-set files (paths from the source tree's root, `bench/data/...`) the
    shipped model was trained on besides the benchmark's own conversations."""
    return tuple(_shipped_model_data().get("training_sets", ()))


def ensemble_from_file(path: str) -> TreeEnsemble:
    """A model trained elsewhere (`SearchConfig.rerank_model`; `rerank_training.py` writes
    them), read again only when the file changes."""
    try:
        stat = Path(path).stat()
    except OSError as exc:
        raise ValidationError("rerank_model", f"cannot read {path} ({exc.strerror})") from None
    return _read_ensemble(str(Path(path).resolve()), stat.st_mtime_ns, stat.st_size)


@lru_cache(maxsize=16)
def _read_ensemble(path: str, mtime_ns: int, size: int) -> TreeEnsemble:
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
        return TreeEnsemble.from_json(data)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValidationError("rerank_model", f"{path} is not a model file ({exc})") from None
    except (KeyError, TypeError, ValueError) as exc:
        what = f"missing {exc}" if isinstance(exc, KeyError) else str(exc)
        raise ValidationError("rerank_model", f"{path}: {what}") from None


def reranked(
    query: str, ranked: Sequence[Candidate], top: int, model: TreeEnsemble | None = None
) -> list[Candidate]:
    """`ranked` (best first) with its first `top` re-ordered by the model; the scores of
    those are set to keep their old values in the new order, so later cuts agree, and each
    hit that moved says from which place (`Candidate.reordered`, shown in traces)."""
    if top < 2 or len(ranked) < 2:
        return list(ranked)
    model = model or default_ensemble()
    head = list(ranked[:top])
    odds = model.score(rerank_features(query, ranked, len(head)))
    order = sorted(range(len(head)), key=lambda n: (-odds[n], n))
    scores = [c.score for c in head]
    out = [head[n] for n in order]
    for place, (cand, score) in enumerate(zip(out, scores, strict=True), start=1):
        cand.score = score
        was = order[place - 1] + 1
        cand.reordered = f"learned order: {was} -> {place}" if was != place else None
    return out + list(ranked[top:])
