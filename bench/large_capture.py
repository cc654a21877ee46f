"""Large-message benchmark: capture + flush of one big message, Chinese beside English.

Run: PYTHONPATH=src python bench/large_capture.py [--sizes 100000,300000,990000] [--json OUT]

Each message is captured alone into a fresh SQLite store (`embedder="hash"`, so what is
timed is capture's own work: chunking, keyword terms, storing, and the capture anchoring
that `flush()` waits for: statements, mentions, edges); the time is from `capture()` until
`flush()` returns, the median of `--repeat` runs. Texts, generated from the sentences of
bench/data (seeded, so every run and every tree gets the same ones):

- `zh`: Chinese prose, sentences shuffled and numbered, a line break every few sentences;
- `zh-unbroken`: the same Chinese with every punctuation mark, space and line break taken
  out (a pasted blob: one "sentence" that chunking has to cut by itself);
- `en`: English prose made the same way.

`--code-entities N` first stores N code entities (in another session), as a project with
an ingested repository has: the capture anchoring of a message's requirements reads them.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import re
import sqlite3
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import ctxbase

__all__ = ["main"]

DATA = Path(__file__).resolve().parent / "data"
KINDS = ("zh", "zh-unbroken", "en")


def _sentences(files: Sequence[str], pattern: str) -> list[str]:
    out: list[str] = []
    for name in files:
        data = json.loads((DATA / name).read_text(encoding="utf-8"))
        for conv in data["conversations"]:
            for event in conv["events"]:
                out.extend(s.strip() for s in re.split(pattern, event["text"]) if s.strip())
    return out


def make_text(kind: str, size_bytes: int, seed: int = 7) -> str:
    """About `size_bytes` UTF-8 bytes (never more) of `kind` text."""
    rnd = random.Random(f"{kind}-{seed}")
    if kind == "en":
        pool = _sentences(["en_memory.json"], r"(?<=[.!?])\s+")
        sep = " "
    else:
        files = ["zh_memory.json", "zh_multisession_a.json", "zh_multisession_b.json"]
        pool = _sentences(files, r"(?<=[。！？])")
        sep = ""
    parts: list[str] = []
    size = 0
    n = 0
    while True:
        sentence = rnd.choice(pool)
        piece = f"Note {n}: {sentence}" if kind == "en" else f"第{n}条：{sentence}"
        if kind == "zh-unbroken":
            piece = re.sub(r"[^\w]|_", "", piece)
        elif n % 6 == 5:
            piece += "\n\n"
        else:
            piece += sep
        grown = size + len(piece.encode("utf-8"))
        if grown > size_bytes:
            break
        parts.append(piece)
        size, n = grown, n + 1
    return "".join(parts).strip()


def _seed_code(cb: Any, n: int) -> None:
    with cb.store.transaction():
        for i in range(n):
            cb.upsert_entity(
                "code",
                f"module{i % 50}.handler_{i}",
                f"def handler_{i}(request):\n    return {i}\n",
                id=f"code_bench_{i}",
                properties={"session_id": f"repo-{i % 7}", "kind": "function"},
            )


def bench_one(path: Path, text: str, code_entities: int) -> dict[str, Any]:
    cb = ctxbase.open(str(path), project="p", embedder="hash")
    try:
        _seed_code(cb, code_entities)
        # warm up: schema, connections, tokenizer, jieba's dictionary; not counted
        cb.record("user_message", session_id="warmup", text="预热 warm up the writer。")
        cb.flush()
        cb.wait_for_embeddings()  # the code's vectors: not made while the message is timed
        start = time.perf_counter()
        cb.capture("user_message", session_id="s", text=text)
        call = time.perf_counter() - start
        cb.flush()
        seconds = time.perf_counter() - start
        stats = cb.anchor_stats()
    finally:
        cb.close()
    conn = sqlite3.connect(str(path))
    try:
        units = conn.execute(
            "SELECT count(*) FROM items WHERE project_id='p' AND session_id='s'"
        ).fetchone()[0]
        entities = conn.execute(
            "SELECT count(*) FROM entities WHERE project_id='p' AND type IN "
            "('requirement', 'decision', 'mention')"
        ).fetchone()[0]
        edges = conn.execute("SELECT count(*) FROM relations WHERE project_id='p'").fetchone()[0]
    finally:
        conn.close()
    size = len(text.encode("utf-8"))
    return {
        "bytes": size,
        "chars": len(text),
        "capture_call_ms": round(call * 1000, 2),
        "seconds": round(seconds, 3),
        "kb_per_s": round(size / 1000 / seconds, 1) if seconds > 0 else 0.0,
        "search_units": units,
        "anchored_entities": entities,
        "edges": edges,
        "anchor_errors": stats.errors,
    }


def format_table(rows: list[dict[str, Any]]) -> str:
    header = ("text", "KB", "capture+flush (s)", "KB/s", "units", "entities", "edges")
    body = [
        (
            r["kind"],
            f"{r['bytes'] / 1000:.0f}",
            f"{r['seconds']:.2f}",
            f"{r['kb_per_s']:.0f}",
            str(r["search_units"]),
            str(r["anchored_entities"]),
            str(r["edges"]),
        )
        for r in rows
    ]
    table = [header, *body]
    widths = [max(len(row[c]) for row in table) for c in range(len(header))]
    lines = [
        "  ".join(
            cell.ljust(widths[c]) if c == 0 else cell.rjust(widths[c]) for c, cell in enumerate(row)
        )
        for row in table
    ]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--sizes",
        default="100000,300000,990000",
        help="message sizes in UTF-8 bytes, comma-separated (the limit is 1,000,000)",
    )
    parser.add_argument("--kinds", default=",".join(KINDS), help="which texts: " + ", ".join(KINDS))
    parser.add_argument(
        "--code-entities", type=int, default=0, help="code entities stored in the project first"
    )
    parser.add_argument(
        "--repeat", type=int, default=3, help="runs per message (the median is shown)"
    )
    parser.add_argument("--json", metavar="OUT", help="also write the figures as JSON here")
    parser.add_argument("--dir", help="directory for the database files (default: a temp dir)")
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    kinds = [k.strip() for k in args.kinds.split(",") if k.strip()]
    for kind in kinds:
        if kind not in KINDS:
            parser.error(f"unknown kind {kind!r}; known: {', '.join(KINDS)}")
    if args.repeat < 1:
        parser.error("--repeat must be >= 1")
    if not sizes or min(sizes) < 1000 or max(sizes) > 1_000_000:
        parser.error("--sizes must be between 1000 and 1000000 bytes")

    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        for size in sizes:
            for kind in kinds:
                text = make_text(kind, size)
                runs = [
                    bench_one(Path(tmp) / f"{kind}-{size}-{n}.db", text, args.code_entities)
                    for n in range(args.repeat)
                ]
                runs.sort(key=lambda r: r["seconds"])
                row = {
                    "kind": kind,
                    **runs[len(runs) // 2],  # the median run
                    "runs_seconds": [r["seconds"] for r in runs],
                }
                rows.append(row)
                print(
                    f"  {kind} {row['bytes'] / 1000:.0f} KB: {row['runs_seconds']} s",
                    file=sys.stderr,
                    flush=True,
                )
    report: dict[str, Any] = {
        "benchmark": "large_capture",
        "embedder": "hash",
        "code_entities": args.code_entities,
        "repeat": args.repeat,
        "machine": {
            "python": platform.python_version(),
            "sqlite": sqlite3.sqlite_version,
            "platform": platform.platform(),
            "cpus": os.cpu_count(),
            "load": os.getloadavg()[0] if hasattr(os, "getloadavg") else None,
        },
        "results": rows,
    }
    print(
        f"large capture benchmark: one message per store, capture() until flush() returns "
        f"(embedder hash, {args.code_entities} code entities in the project), "
        f"Python {platform.python_version()}"
    )
    print(format_table(rows))
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
