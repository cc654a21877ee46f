"""Training the learned re-ordering's tree ensemble (retrieve/rerank.py), numpy only.

Gradient boosting for a yes/no label (is this candidate evidence) on binned features,
the way histogram gradient boosting does it: each feature's values are cut into at most
255 bins once; every tree is grown best leaf first from per-bin gradient sums, up to
`max_leaf_nodes` leaves of at least `min_samples_leaf` rows; above `early_stopping_rows`
rows (10,000) a tenth of them (stratified) is held back and training stops when its log
loss has not improved for `n_iter_no_change` trees; below it every tree is grown.

No model library is needed, so a benchmark can train one model per fold (`ctxbase bench
locomo --folds`) and any set of questions with known evidence can train one
(`bench/learned_rerank.py`, `evaluation/rerank_folds.py`).

`fit_ensemble` returns the same `TreeEnsemble` the search scores with; `ensemble_json`
writes it in the shipped model's format (`SearchConfig.rerank_model` reads such a file).
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from .rerank import FEATURE_NAMES, TreeEnsemble

__all__ = ["BoostingParams", "ensemble_json", "fit_ensemble"]

_MAX_BINS = 255
_MIN_HESSIAN = 1e-3
_TOL = 1e-7


class BoostingParams(BaseModel):
    """How the ensemble is grown. Kept small by default: a few hundred questions per
    conversation set, so the trees must stay shallow."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    max_iter: int = Field(default=150, ge=1, le=2000)
    learning_rate: float = Field(default=0.05, gt=0, le=1)
    max_leaf_nodes: int = Field(default=15, ge=2, le=255)
    min_samples_leaf: int = Field(default=40, ge=1)
    l2_regularization: float = Field(default=0.0, ge=0)
    # early stopping on a held-back share of the rows; off below `early_stopping_rows`
    validation_fraction: float = Field(default=0.1, gt=0, lt=1)
    n_iter_no_change: int = Field(default=10, ge=1)
    early_stopping_rows: int = Field(default=10_000, ge=0)
    seed: int = 0


def _bin_edges(column: np.ndarray) -> np.ndarray:
    """Split points for one feature: midpoints between its distinct values, or between
    quantiles when it has more than the bins allow."""
    distinct = np.unique(column)
    if len(distinct) > _MAX_BINS:
        qs = np.linspace(0, 100, _MAX_BINS + 1)[1:-1]
        distinct = np.unique(np.percentile(column, qs, method="midpoint"))
    return np.asarray((distinct[:-1] + distinct[1:]) / 2, dtype=float)


@dataclass
class _Leaf:
    node: int
    rows: np.ndarray  # indices into the training rows
    grad: float
    hess: float
    split: tuple[float, int, int] | None = None  # gain, feature, bin


@dataclass
class _Tree:
    feature: list[int]
    threshold: list[float]
    left: list[int]
    right: list[int]
    leaf: list[bool]
    value: list[float]

    def add(self) -> int:
        """A new node, a leaf until it is split."""
        self.feature.append(0)
        self.threshold.append(0.0)
        self.left.append(0)
        self.right.append(0)
        self.leaf.append(True)
        self.value.append(0.0)
        return len(self.feature) - 1


class _Grower:
    """Grows one tree on the binned rows from the current gradients."""

    def __init__(
        self, bins: np.ndarray, n_bins: np.ndarray, edges: Sequence[np.ndarray], p: BoostingParams
    ) -> None:
        self.bins, self.edges, self.p = bins, edges, p
        self.width = int(n_bins.max())
        self.n_bins = n_bins
        # flat histogram slots: feature f, bin b -> f * width + b
        self.flat = bins + (np.arange(bins.shape[1]) * self.width)[None, :]

    def _best_split(self, leaf: _Leaf, g: np.ndarray, h: np.ndarray) -> None:
        p = self.p
        if len(leaf.rows) < 2 * p.min_samples_leaf or leaf.hess < 2 * _MIN_HESSIAN:
            return
        slots = self.flat[leaf.rows].ravel()
        size = self.bins.shape[1] * self.width
        n_feat = self.bins.shape[1]
        gh = np.repeat(g[leaf.rows], n_feat)
        hh = np.repeat(h[leaf.rows], n_feat)
        grad = np.bincount(slots, gh, size).reshape(n_feat, self.width).cumsum(axis=1)
        hess = np.bincount(slots, hh, size).reshape(n_feat, self.width).cumsum(axis=1)
        count = np.bincount(slots, None, size).reshape(n_feat, self.width).cumsum(axis=1)
        lam = p.l2_regularization
        g_r, h_r, c_r = leaf.grad - grad, leaf.hess - hess, len(leaf.rows) - count
        with np.errstate(divide="ignore", invalid="ignore"):
            gain = grad**2 / (hess + lam) + g_r**2 / (h_r + lam)
        ok = (
            (count >= p.min_samples_leaf)
            & (c_r >= p.min_samples_leaf)
            & (hess >= _MIN_HESSIAN)
            & (h_r >= _MIN_HESSIAN)
            & (np.arange(self.width)[None, :] < (self.n_bins - 1)[:, None])  # a real edge
        )
        gain = np.where(ok, gain - leaf.grad**2 / (leaf.hess + lam), -np.inf)
        best = int(np.argmax(gain))
        if np.isfinite(gain.flat[best]) and gain.flat[best] > _TOL:
            f, b = divmod(best, self.width)
            leaf.split = (float(gain.flat[best]), f, b)

    def grow(self, rows: np.ndarray, g: np.ndarray, h: np.ndarray) -> tuple[_Tree, np.ndarray]:
        """The tree, and each training row's leaf value (learning rate applied)."""
        p = self.p
        tree = _Tree([], [], [], [], [], [])
        root = _Leaf(tree.add(), rows, float(g[rows].sum()), float(h[rows].sum()))
        self._best_split(root, g, h)
        leaves = [root]
        heap: list[tuple[float, int, _Leaf]] = []
        if root.split:
            heapq.heappush(heap, (-root.split[0], root.node, root))
        while heap and len(leaves) < p.max_leaf_nodes:
            _, _, leaf = heapq.heappop(heap)
            assert leaf.split is not None
            _, f, b = leaf.split
            goes_left = self.bins[leaf.rows, f] <= b
            tree.leaf[leaf.node] = False
            tree.feature[leaf.node] = f
            tree.threshold[leaf.node] = float(self.edges[f][b])
            children = []
            for side in (leaf.rows[goes_left], leaf.rows[~goes_left]):
                child = _Leaf(tree.add(), side, float(g[side].sum()), float(h[side].sum()))
                children.append(child)
            tree.left[leaf.node], tree.right[leaf.node] = children[0].node, children[1].node
            leaves.remove(leaf)
            for child in children:
                leaves.append(child)
                self._best_split(child, g, h)
                if child.split:
                    heapq.heappush(heap, (-child.split[0], child.node, child))
        out = np.zeros(len(g))
        for leaf in leaves:
            value = -p.learning_rate * leaf.grad / (leaf.hess + p.l2_regularization + 1e-12)
            tree.value[leaf.node] = value
            out[leaf.rows] = value
        return tree, out


def _log_loss(y: np.ndarray, raw: np.ndarray) -> float:
    # log(1 + e^raw) - y * raw, computed stably
    return float(np.mean(np.logaddexp(0.0, raw) - y * raw))


def _held_back(y: np.ndarray, p: BoostingParams) -> np.ndarray:
    """A stratified share of the rows for early stopping (the same each run)."""
    rng = np.random.default_rng(p.seed)
    mask = np.zeros(len(y), dtype=bool)
    for label in (0, 1):
        idx = np.flatnonzero(y == label)
        take = round(len(idx) * p.validation_fraction)
        mask[rng.choice(idx, size=take, replace=False)] = True
    return mask


def fit_ensemble(
    x: np.ndarray, y: np.ndarray, params: BoostingParams | Mapping[str, Any] | None = None
) -> TreeEnsemble:
    """Train on rows `x` (FEATURE_NAMES columns) labelled `y` (1 evidence, 0 not)."""
    p = params if isinstance(params, BoostingParams) else BoostingParams(**(params or {}))
    x = np.asarray(x, dtype=float)
    y = np.asarray(y, dtype=float)
    if x.ndim != 2 or x.shape[1] != len(FEATURE_NAMES):
        raise ValueError(f"expected rows of {len(FEATURE_NAMES)} features, got shape {x.shape}")
    if y.ndim != 1:
        raise ValueError(f"labels must be one number per row (a 1-D array), got shape {y.shape}")
    if len(x) != len(y):
        raise ValueError(f"{len(x)} rows but {len(y)} labels")
    if not np.isin(y, (0.0, 1.0)).all():
        raise ValueError("labels must be 0 or 1")
    if not np.isfinite(x).all():
        raise ValueError("features must be finite numbers")
    positives = int(y.sum())
    if positives == 0 or positives == len(y):
        raise ValueError("training needs rows of both labels (evidence and not)")
    validate = len(x) > p.early_stopping_rows
    held = _held_back(y, p) if validate else np.zeros(len(y), dtype=bool)
    train = np.flatnonzero(~held)
    edges = [_bin_edges(x[train, f]) for f in range(x.shape[1])]
    bins = np.stack([np.searchsorted(e, x[:, f], side="left") for f, e in enumerate(edges)], 1)
    n_bins = np.asarray([len(e) + 1 for e in edges])
    rate = float(y[train].mean())
    baseline = float(np.log(rate / (1 - rate)))
    raw = np.full(len(x), baseline)
    grower = _Grower(bins, n_bins, edges, p)
    trees: list[_Tree] = []
    losses = [_log_loss(y[held], raw[held])] if validate else []
    for _ in range(p.max_iter):
        prob = 1 / (1 + np.exp(-raw))
        grad, hess = prob - y, prob * (1 - prob)
        tree, values = grower.grow(train, grad, hess)
        trees.append(tree)
        raw[train] += values[train]
        if not validate:
            continue
        raw[held] += _ensemble([tree], 0.0, digits=None).score(x[held])  # exact, unrounded
        losses.append(_log_loss(y[held], raw[held]))
        if len(losses) > p.n_iter_no_change:
            reference = losses[-p.n_iter_no_change - 1]
            if all(loss > reference - _TOL for loss in losses[-p.n_iter_no_change :]):
                break
    return _ensemble(trees, baseline, digits=6)


def _ensemble(trees: Sequence[_Tree], baseline: float, digits: int | None) -> TreeEnsemble:
    """The grown trees as the search scores them: thresholds and leaf values rounded to
    `digits` as the model file keeps them (None: exact, for early stopping's loss)."""

    def kept(values: list[float]) -> list[float]:
        return values if digits is None else [round(v, digits) for v in values]

    trees_json = [
        {
            "feature": t.feature,
            "threshold": kept(t.threshold),
            "left": t.left,
            "right": t.right,
            "leaf": t.leaf,
            "value": kept(t.value),
        }
        for t in trees
    ]
    return TreeEnsemble.from_json(
        {"features": list(FEATURE_NAMES), "baseline": baseline, "trees": trees_json}
    )


def ensemble_json(model: TreeEnsemble, trained_on: str = "") -> dict[str, Any]:
    """`model` in the shipped model's JSON format (what `TreeEnsemble.from_json` reads)."""
    trees = []
    ends = [*model.roots[1:].tolist(), len(model.feature)]
    for start, end in zip(model.roots.tolist(), ends, strict=True):
        trees.append(
            {
                "feature": model.feature[start:end].tolist(),
                "threshold": [round(float(v), 6) for v in model.threshold[start:end]],
                "left": (model.left[start:end] - start).tolist(),
                "right": (model.right[start:end] - start).tolist(),
                "leaf": model.leaf[start:end].tolist(),
                "value": [round(float(v), 6) for v in model.value[start:end]],
            }
        )
    data: dict[str, Any] = {"features": list(model.features), "baseline": model.baseline}
    if trained_on:
        data["trained_on"] = trained_on
    data["trees"] = trees
    return data
