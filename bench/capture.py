"""Capture benchmark: call latency and sustained write throughput, against plain sqlite3.

Run: PYTHONPATH=src python bench/capture.py [--events 20000] [--json OUT]

ctxbase: `capture()` is timed call by call (p50/p99/max in microseconds; the target is
p99 < 1 ms); throughput is events per second from the first capture until `flush()` returns,
i.e. until every event is committed to the SQLite file with its search unit, FTS row and
event-graph edges. No embedder (embedding runs off the write path and is measured elsewhere).

Reference: a plain `sqlite3` loop inserting the same events into a one-table file with the
same settings (WAL, synchronous=FULL), committing every `--batch` rows like the capture
writer does. Its "call" is one `execute()` (plus the commit when a batch ends).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sqlite3
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import ctxbase
from ctxbase.capture.bus import BusConfig

__all__ = ["main"]

_TYPES = ("user_message", "assistant_message", "tool_invocation", "tool_result")


def make_events(n: int) -> list[tuple[str, str, str]]:
    """(type, session, text) for n events: four sessions, short varied texts."""
    out = []
    for i in range(n):
        text = (
            f"event {i}: the agent checked budget_limit for order {i % 97} "
            f"and found {i * 7 % 1000} items pending review in warehouse {i % 13}"
        )
        out.append((_TYPES[i % len(_TYPES)], f"session-{i % 4}", text))
    return out


def percentile(sorted_values: Sequence[float], q: float) -> float:
    if not sorted_values:
        return 0.0
    k = min(len(sorted_values) - 1, max(0, round(q * (len(sorted_values) - 1))))
    return sorted_values[k]


def summarise(latencies_ns: list[int], seconds: float, n: int) -> dict[str, float]:
    lat = sorted(x / 1000.0 for x in latencies_ns)
    return {
        "events": n,
        "p50_us": round(percentile(lat, 0.50), 2),
        "p99_us": round(percentile(lat, 0.99), 2),
        "p999_us": round(percentile(lat, 0.999), 2),
        "max_us": round(lat[-1], 2) if lat else 0.0,
        "mean_us": round(sum(lat) / len(lat), 2) if lat else 0.0,
        "calls_over_1ms": sum(1 for x in lat if x > 1000.0),
        "seconds": round(seconds, 4),
        "events_per_s": round(n / seconds, 1) if seconds > 0 else 0.0,
    }


def bench_ctxbase(path: Path, events: list[tuple[str, str, str]], batch: int) -> dict[str, Any]:
    cb = ctxbase.open(
        str(path), project="bench", embedder=None, bus_config=BusConfig(batch_size=batch)
    )
    try:
        # warm up: schema, connections, tokenizer; not counted
        cb.record("system", session_id="warmup", text="warm up the writer")
        cb.flush()
        latencies: list[int] = []
        append = latencies.append
        clock = time.perf_counter_ns
        capture = cb.capture
        start = time.perf_counter()
        for etype, session, text in events:
            t0 = clock()
            capture(etype, session_id=session, text=text)
            append(clock() - t0)
        cb.flush()
        seconds = time.perf_counter() - start
        stats = cb.capture_stats()
        result = summarise(latencies, seconds, len(events))
        result["written"] = stats.written  # the warm-up record() does not use the bus
        result["dropped"] = stats.dropped_low_priority
        result["written_by_caller"] = stats.written_by_caller
    finally:
        cb.close()
    conn = sqlite3.connect(str(path))
    stored = conn.execute(
        "SELECT count(*) FROM events WHERE project_id='bench' AND session_id<>'warmup'"
    ).fetchone()[0]
    conn.close()
    result["stored"] = stored
    return result


def bench_sqlite(path: Path, events: list[tuple[str, str, str]], batch: int) -> dict[str, Any]:
    conn = sqlite3.connect(str(path), isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = FULL")
    conn.execute(
        "CREATE TABLE events (event_id TEXT PRIMARY KEY, session_id TEXT NOT NULL, "
        "seq INTEGER NOT NULL, type TEXT NOT NULL, text TEXT, ts REAL NOT NULL)"
    )
    conn.execute("BEGIN")  # warm-up row, as for ctxbase
    conn.execute("INSERT INTO events VALUES ('warm', 'warmup', 0, 'system', 'warm', 0)")
    conn.execute("COMMIT")
    latencies: list[int] = []
    append = latencies.append
    clock = time.perf_counter_ns
    execute = conn.execute
    sql = "INSERT INTO events VALUES (?,?,?,?,?,?)"
    start = time.perf_counter()
    in_tx = 0
    for i, (etype, session, text) in enumerate(events):
        t0 = clock()
        if in_tx == 0:
            execute("BEGIN")
        execute(sql, (f"e{i}", session, i, etype, text, time.time()))
        in_tx += 1
        if in_tx == batch:
            execute("COMMIT")
            in_tx = 0
        append(clock() - t0)
    if in_tx:
        execute("COMMIT")
    seconds = time.perf_counter() - start
    stored = conn.execute("SELECT count(*) FROM events WHERE session_id<>'warmup'").fetchone()[0]
    conn.close()
    result = summarise(latencies, seconds, len(events))
    result["stored"] = stored
    return result


def format_table(results: dict[str, dict[str, Any]]) -> str:
    rows = [
        ("", "ctxbase capture", "plain sqlite3"),
        *[
            (label, str(results["ctxbase"][key]), str(results["sqlite3"][key]))
            for label, key in (
                ("events", "events"),
                ("call p50 (us)", "p50_us"),
                ("call p99 (us)", "p99_us"),
                ("call p99.9 (us)", "p999_us"),
                ("call max (us)", "max_us"),
                ("call mean (us)", "mean_us"),
                ("calls over 1 ms", "calls_over_1ms"),
                ("first call -> on disk (s)", "seconds"),
                ("throughput (events/s)", "events_per_s"),
                ("rows stored", "stored"),
            )
        ],
    ]
    widths = [max(len(r[c]) for r in rows) for c in range(3)]
    lines = [
        "  ".join(
            cell.ljust(widths[c]) if c == 0 else cell.rjust(widths[c]) for c, cell in enumerate(row)
        )
        for row in rows
    ]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=20_000, help="events to capture")
    parser.add_argument(
        "--batch",
        type=int,
        default=BusConfig().batch_size,
        help="rows per transaction (the capture writer's batch size)",
    )
    parser.add_argument("--json", metavar="OUT", help="also write the figures as JSON here")
    parser.add_argument("--dir", help="directory for the database files (default: a temp dir)")
    args = parser.parse_args(argv)
    if args.events < 1:
        parser.error("--events must be >= 1")

    events = make_events(args.events)
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        results = {
            "ctxbase": bench_ctxbase(Path(tmp) / "ctxbase.db", events, args.batch),
            "sqlite3": bench_sqlite(Path(tmp) / "plain.db", events, args.batch),
        }
    p99 = results["ctxbase"]["p99_us"]
    report: dict[str, Any] = {
        "benchmark": "capture",
        "batch_size": args.batch,
        "target_p99_us": 1000,
        "p99_within_target": p99 < 1000,
        "throughput_ratio_vs_sqlite3": round(
            results["ctxbase"]["events_per_s"] / results["sqlite3"]["events_per_s"], 3
        ),
        "machine": {
            "python": platform.python_version(),
            "sqlite": sqlite3.sqlite_version,
            "platform": platform.platform(),
            "cpus": os.cpu_count(),
        },
        **results,
    }
    print(
        f"capture benchmark: {args.events} events, transactions of {args.batch} rows, "
        f"SQLite {sqlite3.sqlite_version}, Python {platform.python_version()}"
    )
    print(format_table(results))
    print(
        f"p99 capture latency {p99} us (target < 1000 us): "
        f"{'met' if report['p99_within_target'] else 'NOT met'}; "
        f"throughput {report['throughput_ratio_vs_sqlite3']}x plain sqlite3"
    )
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
