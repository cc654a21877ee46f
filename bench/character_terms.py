"""Chinese characters as keyword terms (schema 7): what they cost keyword search at scale,
and what the upgrade of a stored project costs, side by side in one run.

Run: PYTHONPATH=src python bench/character_terms.py --source STORE [--project P]
         [--queries 400] [--limit 100] [--work DIR] [--json OUT]

STORE is a SQLite store at schema 6 or earlier, e.g. the one `bench/assemble_scale.py
--embedder hash` builds (its items' terms are words only). Two copies are made under --work:
one opened with the upgrade step left out (words only, as before), one upgraded as any
store is on opening (timed: the upgrade's seconds). Then per unique intent (scale_data's,
half Chinese, half English; never repeated) the in-memory index of each copy is searched
with its own query terms (words only, or words and characters), alternating which goes
first: p50 / p95 / p99 per copy, Chinese and English intents apart, and the postings read.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from assemble_scale import percentiles
from ctxbase.cjk_terms import CJK_CHARS
from ctxbase.retrieve import tokenize
from ctxbase.retrieve.keyword_index import KeywordIndex
from ctxbase.store import sqlite_base
from ctxbase.store.sqlite import SQLiteStore
from scale_data import make_intents

__all__ = ["main"]


def _copies(source: Path, work: Path) -> tuple[Path, Path, float]:
    """(words-only copy, upgraded copy, seconds the upgrade took)."""
    work.mkdir(parents=True, exist_ok=True)
    words, chars = work / "words.db", work / "characters.db"
    for path in (words, chars):
        for leftover in (path, Path(f"{path}-wal"), Path(f"{path}-shm")):
            leftover.unlink(missing_ok=True)
        src = sqlite_base.sqlite3.connect(f"file:{source}?mode=ro", uri=True)
        dst = sqlite_base.sqlite3.connect(path)
        src.backup(dst)
        src.close()
        dst.close()
    steps = dict(sqlite_base._DATA_MIGRATIONS)
    sqlite_base._DATA_MIGRATIONS.clear()  # the words-only copy: schema 7 without its step
    try:
        SQLiteStore(str(words)).close()
    finally:
        sqlite_base._DATA_MIGRATIONS.update(steps)
    t0 = time.perf_counter()
    SQLiteStore(str(chars)).close()
    return words, chars, round(time.perf_counter() - t0, 1)


def _terms(query: str, characters: bool) -> list[str]:
    keep = tokenize.with_characters
    if not characters:
        tokenize.with_characters = list
    tokenize._cached_query_terms.cache_clear()
    try:
        return tokenize.query_terms(query)
    finally:
        tokenize.with_characters = keep


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", required=True, help="a SQLite store at schema 6")
    parser.add_argument("--project", default="scale-100000")
    parser.add_argument("--queries", type=int, default=400)
    parser.add_argument("--limit", type=int, default=100)
    parser.add_argument("--work", default=str(Path.home() / ".cache/ctxbase-bench/characters"))
    parser.add_argument("--json")
    args = parser.parse_args(argv)
    words_path, chars_path, upgrade_s = _copies(Path(args.source), Path(args.work))
    stores = {"words": SQLiteStore(str(words_path)), "characters": SQLiteStore(str(chars_path))}
    indexes = {name: KeywordIndex(store) for name, store in stores.items()}
    loads: dict[str, float] = {}
    for name, index in indexes.items():
        t0 = time.perf_counter()
        index.search(args.project, ["warm"], 1)
        loads[name] = round(time.perf_counter() - t0, 2)
    times: dict[str, dict[str, list[float]]] = {n: {"zh": [], "en": []} for n in indexes}
    read = dict.fromkeys(indexes, 0)
    han = re.compile(f"[{CJK_CHARS}]")
    for n, query in enumerate(make_intents(args.queries, seed=1234)):
        lang = "zh" if han.search(query) else "en"
        order = list(indexes) if n % 2 == 0 else list(reversed(indexes))
        for name in order:
            terms = _terms(query, name == "characters")
            index = indexes[name]
            before = index.scored
            t0 = time.perf_counter()
            index.search(args.project, terms, args.limit)
            times[name][lang].append((time.perf_counter() - t0) * 1000)
            read[name] += index.scored - before
    figures: dict[str, Any] = {
        "upgrade_s": upgrade_s,
        "load_s": loads,
        "postings_read": read,
        "search": {n: {lang: percentiles(v) for lang, v in t.items()} for n, t in times.items()},
        "db_mb": {
            name: round(path.stat().st_size / 1e6, 1)
            for name, path in (("words", words_path), ("characters", chars_path))
        },
    }
    for store in stores.values():
        store.close()
    print(json.dumps(figures, indent=2))
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
