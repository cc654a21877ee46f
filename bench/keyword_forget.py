"""The first keyword search after items are hidden or forgotten: removals applied to the
in-memory index in place vs the index read again, side by side on SQLite.

Run: PYTHONPATH=src python bench/keyword_forget.py [--items 20000] [--k 10] [--rounds 5]
                                                   [--queries 20] [--json OUT]

A project of `--items` events (scale_data.make_corpus: sessions of agent work, Chinese and
English, with the deterministic "hash" embedder) is stored once. Two keyword indexes over
the same store are loaded: ctxbase's, which marks the rows that left the store's index dead
(`KeywordDelta.removed`) and keeps its BM25 statistics exact, and a reference that reads the
project again whenever anything was removed (what the index did before). Then `--rounds`
times: `--k` random events are hidden (even rounds) or hard-forgotten (odd rounds), and the
first search of each index is timed (alternating which goes first); then both answer
`--queries` intents (top 20) and the answers that differ (ids or scores beyond 1e-9) are
counted: must be 0. p50 of the first-search times in milliseconds.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import ctxbase
from ctxbase.progress import Progress
from ctxbase.retrieve.keyword_index import KeywordIndex
from ctxbase.retrieve.tokenize import query_terms
from scale_data import make_corpus, make_intents
from search_after_write import pct

__all__ = ["main"]


class _ReloadingIndex(KeywordIndex):
    """The reference: a change the index cannot append reads the project again."""

    def _appended(self, cached, project_id, gen):  # type: ignore[no-untyped-def]
        delta = self.store.keyword_changes(project_id, cached.marker)
        if delta.removed:
            return None
        return super()._appended(cached, project_id, gen)


def _differ(a: list[tuple[str, float]], b: list[tuple[str, float]]) -> bool:
    da, db = dict(a), dict(b)
    if len(a) != len(b):
        return True
    # ids equal except among ties at the cut (equal scores may be held in another order)
    cut = b[-1][1] if b else 0.0
    if {i for i, s in a if s > cut + 1e-9} != {i for i, s in b if s > cut + 1e-9}:
        return True
    scores = sorted(da.values(), reverse=True), sorted(db.values(), reverse=True)
    return any(abs(x - y) > 1e-9 for x, y in zip(*scores, strict=True))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=20000)
    parser.add_argument("--k", type=int, default=10, help="events hidden or forgotten a round")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--queries", type=int, default=20)
    parser.add_argument("--json", metavar="OUT", help="also write the figures as JSON here")
    parser.add_argument("--quiet", action="store_true", help="no progress on stderr")
    args = parser.parse_args(argv)
    progress = Progress(quiet=args.quiet)
    rng = random.Random(5)
    intents = [query_terms(q) for q in make_intents(args.queries)]
    with tempfile.TemporaryDirectory(prefix="ctxbase-kwf-") as tmp:
        cb = ctxbase.open(
            str(Path(tmp) / "kwf.db"), project="p", embedder="hash", background_embedding=False
        )
        t0 = time.perf_counter()
        stored = progress.bar("store", total=args.items, unit="event")
        ids: list[str] = []
        for session in make_corpus(args.items):
            for etype, agent, text in session.events:
                eid = cb.capture(etype, session_id=session.session_id, agent_id=agent, text=text)
                assert eid is not None  # nothing dropped: events are not low priority
                ids.append(eid)
            if len(ids) % 1000 < len(session.events):
                cb.flush()
                stored.update_to(len(ids))
        cb.flush()
        stored.close()
        build_s = time.perf_counter() - t0
        indexes = {"in_place": KeywordIndex(cb.store), "reload": _ReloadingIndex(cb.store)}
        for index in indexes.values():
            index.search("p", intents[0], 20)  # loaded once, untimed
        times: dict[str, list[float]] = {name: [] for name in indexes}
        differing = 0
        live = list(ids)
        for r in progress.iterate("rounds", range(args.rounds), "round"):
            picked = rng.sample(live, args.k)
            live = [i for i in live if i not in set(picked)]
            if r % 2:
                cb.forget(event_ids=picked)
            else:
                cb.soft_delete(picked)
            query = intents[r % len(intents)]
            for name in sorted(indexes, reverse=bool(r % 2)):  # alternate which goes first
                t = time.perf_counter()
                indexes[name].search("p", query, 20)
                times[name].append((time.perf_counter() - t) * 1000)
            for terms in intents:
                answers = [index.search("p", terms, 20) for index in indexes.values()]
                differing += _differ(*answers)
        reloads = {name: index.reloads for name, index in indexes.items()}
        cb.close()
    rows = {
        name: {"p50_ms": pct(v, 0.5), "max_ms": round(max(v), 2), "mean_ms": statistics.fmean(v)}
        for name, v in times.items()
    }
    ratio = rows["reload"]["p50_ms"] / max(rows["in_place"]["p50_ms"], 1e-9)
    print(
        f"first keyword search after hiding/forgetting {args.k} events, {args.items} events, "
        f"{args.rounds} rounds, {os.cpu_count()} cores "
        f"({platform.processor() or platform.machine()}); project written in {build_s:.1f} s"
    )
    print(f"{'index':<30} {'p50 ms':>9} {'max ms':>9} {'reloads':>8}")
    for name, label in (("in_place", "removals applied in place"), ("reload", "read again")):
        print(f"{label:<30} {rows[name]['p50_ms']:>9} {rows[name]['max_ms']:>9} {reloads[name]:>8}")
    print(f"p50 ratio read again / in place: {ratio:.1f}x")
    print(f"answers that differ: {differing} of {args.rounds * len(intents)}")
    if args.json:
        out = {
            "items": args.items,
            "k": args.k,
            "rounds": args.rounds,
            "queries": len(intents),
            "build_s": round(build_s, 1),
            "reloads": reloads,
            "differing": differing,
            **rows,
        }
        Path(args.json).write_text(json.dumps(out, indent=2))
    return 0 if differing == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
