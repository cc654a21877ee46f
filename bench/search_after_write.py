"""Vector search right after a write, on SQLite: appending new vectors vs reloading them all.

Run: PYTHONPATH=src python bench/search_after_write.py [--events 20000] [--rounds 30]
                                                       [--json OUT]

An agent writes between its searches (each turn captures events, then asks for context).
Every write moves the project's index generation, so an in-memory vector index must catch
up before the next search. ctxbase appends the vectors stored since its last read
(`Store.vector_changes`); the reference reloads every vector of the project, which is what
the index did before. Both run in one process over the same file: a project of
`--events` events (the deterministic "hash:384" embedder, 384 dimensions like the default
model), then `--rounds` times: record one event, embed it, time one vector search on each
index. p50/p95 in milliseconds.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import ctxbase
from ctxbase.progress import Progress
from ctxbase.retrieve.vector_index import VectorIndex
from ctxbase.store.base import Store, VectorDelta

__all__ = ["main"]


class _ReloadingIndex(VectorIndex):
    """The reference: no change feed, so every new generation reloads the project."""

    def __init__(self, store: Store) -> None:
        super().__init__(store)

        class _NoFeed:
            def __getattr__(self, name: str) -> Any:
                return getattr(store, name)

            def vector_changes(self, *_: Any) -> VectorDelta | None:
                return None

        self.store = _NoFeed()  # type: ignore[assignment]


def pct(values: list[float], q: float) -> float:
    """The q-quantile of `values` (nearest rank below), rounded to 0.01."""
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 2)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=20000)
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--json", metavar="OUT", help="also write the figures as JSON here")
    parser.add_argument("--quiet", action="store_true", help="no progress on stderr")
    args = parser.parse_args(argv)
    progress = Progress(quiet=args.quiet)
    with tempfile.TemporaryDirectory(prefix="ctxbase-saw-") as tmp:
        cb = ctxbase.open(
            str(Path(tmp) / "saw.db"), project="p", embedder="hash:384", background_embedding=False
        )
        t0 = time.perf_counter()
        stored = progress.bar("store", total=args.events, unit="event")
        for start in range(0, args.events, 1000):
            for i in range(start, min(args.events, start + 1000)):
                cb.capture(
                    "user_message",
                    session_id=f"s{i % 50}",
                    text=f"note {i} on topic {i % 97}, cache {i % 13}, 订单 {i % 31}",
                )
            cb.flush()
            cb.wait_for_embeddings()
            stored.update_to(min(args.events, start + 1000))
        stored.close()
        load_s = time.perf_counter() - t0
        assert cb.embedder is not None
        model = cb.embedder.name
        appending, reloading = VectorIndex(cb.store), _ReloadingIndex(cb.store)
        times: dict[str, list[float]] = {"append": [], "reload": []}
        for r in progress.iterate("search after write", range(args.rounds + 1), "round"):
            cb.record("user_message", session_id="s0", text=f"new note {r} on tidal power")
            cb.wait_for_embeddings()
            query = cb.embedder.embed_query(f"topic {r % 97} cache")
            for name, index in (("append", appending), ("reload", reloading)):
                t = time.perf_counter()
                hits = index.search("p", model, query, 20)
                if r:  # the first round loads both from scratch
                    times[name].append((time.perf_counter() - t) * 1000)
                assert len(hits) == 20
        cb.close()
    rows = {
        name: {"p50_ms": pct(v, 0.5), "p95_ms": pct(v, 0.95), "mean_ms": statistics.fmean(v)}
        for name, v in times.items()
    }
    ratio = rows["reload"]["p50_ms"] / max(rows["append"]["p50_ms"], 1e-9)
    print(
        f"vector search after each write, {args.events} events, {args.rounds} rounds, "
        f"{os.cpu_count()} cores ({platform.processor() or platform.machine()}); "
        f"project written in {load_s:.1f} s"
    )
    print(f"{'index':<28} {'p50 ms':>8} {'p95 ms':>8}")
    for name, label in (("append", "appends new vectors"), ("reload", "reloads all (reference)")):
        print(f"{label:<28} {rows[name]['p50_ms']:>8} {rows[name]['p95_ms']:>8}")
    print(f"p50 ratio reload / append: {ratio:.1f}x")
    if args.json:
        out = {"events": args.events, "rounds": args.rounds, "load_s": round(load_s, 1), **rows}
        Path(args.json).write_text(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
