"""PostgreSQL load: `migrate-data` by row inserts and by COPY, side by side in one run.

Run: PYTHONPATH=src python bench/bulk_copy.py [--events 20000] [--dim 384] [--modes rows,bulk]
     [--json OUT]

A SQLite project of `--events` events (one search item each, the scale corpus's texts) with
random unit vectors is copied into a fresh database of one embedded PostgreSQL server (or
`--pg-url`'s server) per mode:

- `rows`: each batch inserted row by row (executemany) with the project's rows counted before
  and after it, as import_rows did before COPY; HNSW built after the copy (`--bulk`).
- `bulk`: the store's import_rows (COPY through a staging table); HNSW built after the copy:
  what `migrate-data --bulk` runs.
- `live`: the store's import_rows with the HNSW index filled row by row (`migrate-data`
  without `--bulk`).
- `bulk-1gb`: `bulk` with the HNSW index built in a fixed 1 GB of maintenance_work_mem, as
  before the build was sized to the graph (pg_sql.hnsw_build_memory_kb): a graph larger than
  that is built on disk once it no longer fits.

Seconds for each (per table, and after the tables: the index build, ANALYZE and the final
counts), rows copied, and events per second.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parent))

from ctxbase.model import Event, new_event_id
from ctxbase.retrieve.indexing import event_items
from ctxbase.store import pg_sql as q
from ctxbase.store.pg_base import jsonb, text
from ctxbase.store.postgres import PostgresStore
from ctxbase.store.schema import JSON_COLUMNS
from ctxbase.store.shared import table_columns
from ctxbase.store.sqlite import SQLiteStore
from ctxbase.store.transfer import copy_project
from pg_server import pg_url
from scale_data import make_corpus

__all__ = ["main"]

MODES = ("rows", "bulk", "live", "bulk-1gb")


class RowInsertStore(PostgresStore):
    """import_rows as it was before COPY: one INSERT per row, the project's rows counted
    before and after each batch (the count walks the whole project: quadratic in a load)."""

    def import_rows(self, project_id: str, table: str, rows: Sequence[Mapping[str, Any]]) -> int:
        cols = table_columns(table)
        if table == "item_vectors":
            for dim in sorted({len(r["vec"]) for r in rows}):
                self._ensure_hnsw(int(dim))
        count = f"SELECT count(*) FROM {table} WHERE project_id=%s"
        with self._tx() as conn:
            if table != "projects":
                self._lock(conn, [project_id], ensure=False, bump=True)
            before = conn.execute(count, (project_id,)).fetchone()
            self._many(
                conn,
                f"INSERT INTO {table}({', '.join(cols)}) VALUES ({','.join(['%s'] * len(cols))})"
                " ON CONFLICT DO NOTHING",
                [tuple(_old_value(c, r.get(c)) for c in cols) for r in rows],
            )
            after = conn.execute(count, (project_id,)).fetchone()
        return int(after[0] if after else 0) - int(before[0] if before else 0)


class FixedIndexMemoryStore(PostgresStore):
    """The HNSW build after a bulk load in 1 GB of maintenance_work_mem, whatever the graph
    needs (as before the build was sized)."""

    def _build_hnsw_index(self, dim: int, memory_kb: int) -> None:
        super()._build_hnsw_index(dim, q.HNSW_BUILD_MEMORY_MIN_KB)


def _old_value(col: str, value: Any) -> Any:
    if col in JSON_COLUMNS:
        return jsonb(value)
    if col == "vec":
        return np.asarray(value, dtype=np.float32)
    if isinstance(value, bool):
        return int(value)
    return text(value) if isinstance(value, str) else value


def _source(path: Path, project: str, n: int, dim: int) -> None:
    store = SQLiteStore(str(path))
    rng = np.random.default_rng(0)
    try:
        batch: list[Event] = []
        for session in make_corpus(n):
            for etype, agent, body in session.events:
                batch.append(
                    Event(id=new_event_id(), project_id=project, session_id=session.session_id,
                          type=etype, agent_id=agent, text=body)
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


def _load(src_path: Path, target: str, project: str, mode: str, batch: int) -> dict[str, Any]:
    """One copy into an empty database: seconds in all and per table (the last table's
    batches end where the index build and ANALYZE start)."""
    src = SQLiteStore(str(src_path))
    stores = {"rows": RowInsertStore, "bulk-1gb": FixedIndexMemoryStore}
    dst = stores.get(mode, PostgresStore)(target)
    marks: dict[str, float] = {}

    def on_batch(table: str, _rows: int) -> None:
        marks[table] = time.perf_counter()

    try:
        t0 = time.perf_counter()
        counts = copy_project(
            src, dst, project, batch=batch, progress=on_batch, bulk=mode != "live"
        )
        seconds = time.perf_counter() - t0
    finally:
        src.close()
        dst.close()
    tables: dict[str, float] = {}
    last = t0
    for table, at in marks.items():  # in copy order
        tables[table] = round(at - last, 2)
        last = at
    if not all(c.matches for c in counts.values()):
        raise SystemExit(f"{mode}: row counts differ after the copy: {counts}")
    return {
        "seconds": round(seconds, 1),
        "events_per_s": round(counts["events"].destination / seconds),
        "tables_s": tables,
        "after_tables_s": round(t0 + seconds - last, 2),
        "rows": {t: c.destination for t, c in counts.items() if c.destination},
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=20_000)
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--batch", type=int, default=2000, help="rows per import batch")
    parser.add_argument("--modes", default="rows,bulk", help=f"comma-separated, of {MODES}")
    parser.add_argument("--pg-url")
    parser.add_argument("--json")
    args = parser.parse_args(argv)
    modes = [m for m in args.modes.split(",") if m]
    if not modes or set(modes) - set(MODES):
        parser.error(f"--modes: comma-separated, of {', '.join(MODES)}")
    project = "bulk"
    tmp = Path(tempfile.mkdtemp(prefix="ctxbase-bulk-"))
    src_path = tmp / "src.db"
    t = time.perf_counter()
    _source(src_path, project, args.events, args.dim)
    print(f"source: {args.events} events in {time.perf_counter() - t:.0f} s", flush=True)
    url, cleanup = pg_url(args.pg_url)
    out: dict[str, Any] = {"events": args.events, "dim": args.dim, "batch": args.batch}
    try:
        base = psycopg.conninfo.conninfo_to_dict(url)
        for mode in modes:
            name = f"ctxbase_bulk_{mode.replace('-', '_')}"
            with psycopg.connect(url, autocommit=True) as conn:
                conn.execute(f"DROP DATABASE IF EXISTS {name}")
                conn.execute(f"CREATE DATABASE {name}")
            target = psycopg.conninfo.make_conninfo(**{**base, "dbname": name})
            out[mode] = _load(src_path, target, project, mode, args.batch)
            print(f"{mode}: {json.dumps(out[mode])}", flush=True)
    finally:
        cleanup()
        shutil.rmtree(tmp, ignore_errors=True)
    if "rows" in out and "bulk" in out:
        out["speedup"] = round(out["rows"]["seconds"] / max(out["bulk"]["seconds"], 1e-9), 2)
    if "bulk-1gb" in out and "bulk" in out:
        fixed, sized = out["bulk-1gb"]["after_tables_s"], out["bulk"]["after_tables_s"]
        out["index_build_speedup"] = round(fixed / max(sized, 1e-9), 2)
    print(json.dumps(out, indent=2))
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
