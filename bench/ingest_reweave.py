"""Ingest re-weave benchmark: what making mention edges order-independent costs, and that a
stopped ingest run again ends with a clean ingest's edges.

Run: PYTHONPATH=src python bench/ingest_reweave.py [--docs 800] [--rounds 3] [--json OUT]

Builds a folder of `--docs` Markdown documents (a title and two sections each, every one
naming three other documents' titles and a function) and 50 Python files, then per round,
in a fresh SQLite file with the hash embedder: a clean ingest, an ingest with nothing
changed, one with a new document added, one with a Python file changed (the last two
search the stored documents and sections of the unchanged files for the names added), and
an ingest into another file stopped half-way by its progress callback, run again (a full
re-weave of the repository). Prints the median seconds of each, and the REFERENCES edges
of the incremental and the resumed ingests against a clean ingest of the final folder
(they must be equal; exit 1 if not).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import ctxbase
from ctxbase.anchor.ingest import ingest_path


class _Stop(Exception):
    pass


def _folder(root: Path, n: int) -> Path:
    root.mkdir(parents=True)
    filler = "Some body text for the section. " * 20
    for i in range(n):
        (root / f"d{i:04d}.md").write_text(
            f"# Topic {i:04d} Guide\n\nSee Topic {(i + 1) % n:04d} Guide and "
            f"Topic {(i + 7) % n:04d} Guide.\n\n## Details {i:04d}\n\nDetails follow "
            f"Topic {(i + 3) % n:04d} Guide; uses `helper_{i % 50}`.\n\n## More {i:04d}\n\n"
            f"{filler}\n",
            encoding="utf-8",
        )
    for j in range(50):
        (root / f"m{j:02d}.py").write_text(f"def helper_{j}(x):\n    return x + {j}\n")
    return root


def _references(cb: ctxbase.ContextBase) -> int:
    return sum(1 for r in cb.store.list_relations("p") if r.type == "REFERENCES")


def _round(tmp: Path, n: int) -> dict[str, Any]:
    docs = _folder(tmp / "docs", n)
    cb = ctxbase.open(str(tmp / "a.db"), project="p", embedder="hash", background_embedding=False)
    out: dict[str, Any] = {}

    def timed(name: str) -> Any:
        start = time.perf_counter()
        report = ingest_path(cb, docs)
        out[name] = time.perf_counter() - start
        out[name + "_rewoven"] = report.units_rewoven
        return report

    timed("clean")
    timed("no_change")
    (docs / "zz_new.md").write_text("# Zz Brand New Guide\n\nA new page.\n", encoding="utf-8")
    timed("one_new_document")
    py = docs / "m25.py"
    py.write_text(py.read_text() + "\n\ndef added_function_x():\n    return 1\n")
    timed("one_changed_python_file")
    out["references_incremental"] = _references(cb)
    cb.close()

    def fresh(name: str) -> ctxbase.ContextBase:
        return ctxbase.open(
            str(tmp / name), project="p", embedder="hash", background_embedding=False
        )

    clean = fresh("c.db")
    ingest_path(clean, docs)  # the final folder at once: the edges the others must end with
    out["references_clean"] = _references(clean)
    clean.close()
    stopped = fresh("b.db")

    def stop(done: int, total: int, path: str) -> None:
        if done == total // 2:
            raise _Stop(path)

    with contextlib.suppress(_Stop):
        ingest_path(stopped, docs, progress=stop)
    start = time.perf_counter()
    report = ingest_path(stopped, docs)
    out["resumed"] = time.perf_counter() - start
    out["resumed_rewoven"] = report.units_rewoven
    out["references_resumed"] = _references(stopped)
    stopped.close()
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--docs", type=int, default=800, help="Markdown documents to build")
    parser.add_argument("--rounds", type=int, default=3, help="fresh runs of every step")
    parser.add_argument("--json", metavar="OUT", help="also write the figures as JSON here")
    args = parser.parse_args(argv)
    rounds = []
    for i in range(args.rounds):
        with tempfile.TemporaryDirectory(prefix="reweave-") as tmp:
            rounds.append(_round(Path(tmp) / str(i), args.docs))
    result: dict[str, Any] = {"docs": args.docs, "rounds": rounds}
    for key in ("clean", "no_change", "one_new_document", "one_changed_python_file", "resumed"):
        times = [r[key] for r in rounds]
        result[key + "_median_s"] = statistics.median(times)
        print(f"{key:26s} median {statistics.median(times):6.2f} s  {[round(t, 2) for t in times]}")
    print("units re-woven:", {k: rounds[0][k] for k in rounds[0] if k.endswith("_rewoven")})
    same = all(
        r["references_clean"] == r["references_resumed"] == r["references_incremental"]
        for r in rounds
    )
    first = rounds[0]
    print(
        f"REFERENCES clean {first['references_clean']}, incremental "
        f"{first['references_incremental']}, resumed {first['references_resumed']}: "
        + ("equal" if same else "DIFFERENT")
    )
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2), encoding="utf-8")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
