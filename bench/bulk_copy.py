"""PostgreSQL load: `migrate-data` with and without `--bulk`, side by side in one run.

Run: PYTHONPATH=src python bench/bulk_copy.py [--events 20000] [--dim 384] [--json OUT]

A SQLite project of `--events` events (one search item each, the scale corpus's texts) with
random unit vectors is copied into two fresh databases of one embedded PostgreSQL server
(or `--pg-url`'s server): row by row into the HNSW index, and with the index built once
after the copy. Seconds for each, and the rows copied.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parent))

from ctxbase.model import Event, new_event_id
from ctxbase.retrieve.indexing import event_items
from ctxbase.store.postgres import PostgresStore
from ctxbase.store.sqlite import SQLiteStore
from ctxbase.store.transfer import copy_project
from pg_server import pg_url
from scale_data import make_corpus

__all__ = ["main"]


def _source(path: Path, project: str, n: int, dim: int) -> None:
    store = SQLiteStore(str(path))
    rng = np.random.default_rng(0)
    try:
        batch: list[Event] = []
        for session in make_corpus(n):
            for etype, agent, text in session.events:
                batch.append(
                    Event(id=new_event_id(), project_id=project, session_id=session.session_id,
                          type=etype, agent_id=agent, text=text)
                )  # fmt: skip
            if len(batch) >= 2000:
                store.write_events(batch, [event_items(e) for e in batch])
                batch = []
        if batch:
            store.write_events(batch, [event_items(e) for e in batch])
        for rows in iter(lambda: store.pending_embeddings("bench", 5000, project), []):
            vecs = rng.standard_normal((len(rows), dim)).astype(np.float32)
            vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
            store.put_vectors("bench", [(p, i, v) for (p, i, _), v in zip(rows, vecs, strict=True)])
    finally:
        store.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=20_000)
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--pg-url")
    parser.add_argument("--json")
    args = parser.parse_args(argv)
    project = "bulk"
    tmp = Path(tempfile.mkdtemp(prefix="ctxbase-bulk-"))
    src_path = tmp / "src.db"
    _source(src_path, project, args.events, args.dim)
    url, cleanup = pg_url(args.pg_url)
    out: dict[str, Any] = {"events": args.events, "dim": args.dim}
    try:
        with psycopg.connect(url, autocommit=True) as conn:
            for name in ("ctxbase_rows", "ctxbase_bulk"):
                conn.execute(f"DROP DATABASE IF EXISTS {name}")
                conn.execute(f"CREATE DATABASE {name}")
        base = psycopg.conninfo.conninfo_to_dict(url)
        for name, bulk in (("ctxbase_rows", False), ("ctxbase_bulk", True)):
            target = psycopg.conninfo.make_conninfo(**{**base, "dbname": name})
            src, dst = SQLiteStore(str(src_path)), PostgresStore(target)
            try:
                t = time.perf_counter()
                counts = copy_project(src, dst, project, batch=2000, bulk=bulk)
                seconds = time.perf_counter() - t
            finally:
                src.close()
                dst.close()
            key = "bulk" if bulk else "row_by_row"
            out[key] = {"seconds": round(seconds, 1), "item_vectors": counts["item_vectors"][1]}
            print(f"{key}: {json.dumps(out[key])}", flush=True)
    finally:
        cleanup()
        shutil.rmtree(tmp, ignore_errors=True)
    out["speedup"] = round(out["row_by_row"]["seconds"] / max(out["bulk"]["seconds"], 1e-9), 2)
    print(json.dumps(out, indent=2))
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
