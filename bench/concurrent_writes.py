"""Writers sharing one SQLite file: a one-row `record()`'s latency beside other work.

Run: PYTHONPATH=src python bench/concurrent_writes.py [--files 600] [--seconds 20] [--json OUT]

Two parts, each side by side in one run (the machine's noise hits both alike):

- anchoring at scale: `record()` on a project that holds an ingested repository
  (`--files` generated Python modules and as many Markdown documents), one call after
  another. Capture
  anchoring matches each message against the project's symbol index inside its write
  transaction. "kept": the index kept between messages (read again only in part, shipped);
  "read each time": read whole for every batch, as before.
- a busy neighbour: one process writes in a tight loop while another calls `record()`
  every 50 ms. "queued": writers of different processes queue on the lock file beside
  the database (shipped); "SQLite alone": SQLite's busy handler, which sleeps and tries
  again.

Figures: p50 / p99 / max of the timed `record()` in milliseconds, and the busy writer's
rate.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path
from typing import Any

__all__ = ["main"]

ROOT = Path(__file__).resolve().parents[1]
SRC = str(ROOT / "src")


def _figures(latencies: list[float]) -> dict[str, float]:
    ordered = sorted(latencies)
    n = len(ordered)
    return {
        "calls": n,
        "p50_ms": round(ordered[n // 2] * 1000, 2),
        "p99_ms": round(ordered[min(n - 1, int(n * 0.99))] * 1000, 2),
        "max_ms": round(ordered[-1] * 1000, 2),
    }


def _repo(root: Path, files: int) -> None:
    for i in range(files):
        pkg = root / f"pkg{i % 20}"
        pkg.mkdir(parents=True, exist_ok=True)
        body = "".join(
            f"def func_{i}_{j}(x):\n    '''Part {j} of module {i}.'''\n    return x + {j}\n\n"
            for j in range(8)
        )
        (pkg / f"mod{i}.py").write_text(body)
        (pkg / f"doc{i}.md").write_text(f"# Module {i}\n\nPart {i} of the billing flow.\n")


_ANCHORING = """
import json, sys, time
import ctxbase
from ctxbase.anchor import weave
if sys.argv[2] == "read each time":
    weave.SymbolIndexCache.get = lambda self, store, pid: weave.SymbolIndex.from_store(store, pid)
cb = ctxbase.open(sys.argv[1], embedder="none")
cb.record("user_message", session_id="warm", text="warm up")
cb.flush()
took = []
for n in range(int(sys.argv[3])):
    start = time.perf_counter()
    cb.record("user_message", session_id="s", text=f"We must call func_{n}_1 in mod{n}.py.")
    cb.flush()  # stored and anchored: the next call meets no work of this one
    took.append(time.perf_counter() - start)
cb.close()
print(json.dumps(took))
"""

_BUSY = """
import signal, sys, time
import ctxbase
from ctxbase.store import sqlite_write_lock
if sys.argv[2] == "SQLite alone":
    sqlite_write_lock.FileWriteLock._open = lambda self: None
stop = []
signal.signal(signal.SIGTERM, lambda *a: stop.append(1))
cb = ctxbase.open(sys.argv[1], embedder="none", anchoring=False)
n, start = 0, time.monotonic()
print("ready", flush=True)
while not stop:
    cb.record("tool_result", session_id="busy", text=f"line {n} " * 20)
    n += 1
print(n / (time.monotonic() - start), flush=True)
cb.close()
"""

_TIMED = """
import json, sys, time
import ctxbase
from ctxbase.store import sqlite_write_lock
if sys.argv[2] == "SQLite alone":
    sqlite_write_lock.FileWriteLock._open = lambda self: None
cb = ctxbase.open(sys.argv[1], embedder="none", anchoring=False)
took, end = [], time.monotonic() + float(sys.argv[3])
while time.monotonic() < end:
    start = time.perf_counter()
    cb.record("user_message", session_id="timed", text="one row")
    took.append(time.perf_counter() - start)
    time.sleep(0.05)
cb.close()
print(json.dumps(took))
"""


def _python(code: str, *args: str) -> list[str]:
    return [sys.executable, "-c", textwrap.dedent(code), *args]


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": SRC, "OMP_NUM_THREADS": "1"}


def anchoring(tmp: Path, files: int, calls: int) -> dict[str, Any]:
    repo = tmp / "repo"
    _repo(repo, files)
    base = tmp / "ingested.db"
    subprocess.run(
        [sys.executable, "-m", "ctxbase", "--db", str(base), "--embedder", "none", "-q",
         "ingest", str(repo)],
        check=True, env=_env(), stdout=subprocess.DEVNULL,
    )  # fmt: skip
    out: dict[str, Any] = {}
    for variant in ("kept", "read each time"):
        copy = tmp / f"anchoring-{variant.replace(' ', '-')}.db"
        copy.write_bytes(base.read_bytes())
        done = subprocess.run(
            _python(_ANCHORING, str(copy), variant, str(calls)),
            check=True, env=_env(), capture_output=True, text=True,
        )  # fmt: skip
        out[variant] = _figures(json.loads(done.stdout))
    return out


def neighbour(tmp: Path, seconds: float) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for variant in ("queued", "SQLite alone"):
        db = str(tmp / f"neighbour-{variant.replace(' ', '-')}.db")
        busy = subprocess.Popen(
            _python(_BUSY, db, variant), env=_env(), stdout=subprocess.PIPE, text=True
        )
        assert busy.stdout is not None and busy.stdout.readline().strip() == "ready"
        done = subprocess.run(
            _python(_TIMED, db, variant, str(seconds)),
            check=True, env=_env(), capture_output=True, text=True,
        )  # fmt: skip
        busy.terminate()
        rate = float(busy.stdout.read().strip() or 0)
        busy.wait()
        out[variant] = {**_figures(json.loads(done.stdout)), "busy_writes_per_s": round(rate)}
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--files", type=int, default=600, help="Python modules (and Markdown documents) to ingest"
    )
    parser.add_argument("--calls", type=int, default=60, help="timed record() calls (anchoring)")
    parser.add_argument("--seconds", type=float, default=20.0, help="timed span (neighbour)")
    parser.add_argument("--json", metavar="OUT", help="also write the figures as JSON here")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="ctxbase-bench-") as tmp:
        started = time.monotonic()
        figures = {
            "anchoring": anchoring(Path(tmp), args.files, args.calls),
            "neighbour": neighbour(Path(tmp), args.seconds),
            "files": args.files,
            "load": os.getloadavg()[0],
        }
        figures["seconds"] = round(time.monotonic() - started, 1)
    for part in ("anchoring", "neighbour"):
        print(part)
        for variant, f in figures[part].items():
            extra = f"  busy writer {f['busy_writes_per_s']}/s" if "busy_writes_per_s" in f else ""
            print(
                f"  {variant:15} record() p50 {f['p50_ms']:8.2f} ms  p99 {f['p99_ms']:8.2f} ms"
                f"  max {f['max_ms']:8.2f} ms  ({f['calls']} calls){extra}"
            )
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
