"""Run the reference retrievers on a benchmark file: `python -m ctxbase.evaluation FILE`."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence

from ctxbase.evaluation.baselines import BM25Retriever, cjk_bigram_tokenize
from ctxbase.evaluation.locomo import (
    LOCOMO_SCORED_CATEGORIES,
    Conversation,
    load_locomo,
    render_table,
    run_benchmark,
)
from ctxbase.evaluation.memoryset import load_memory_set

__all__ = ["main"]


def _load(path: str) -> tuple[list[Conversation], tuple[int, ...] | None]:
    # LoCoMo files are JSON lists; memory sets are objects with "conversations".
    with open(path, encoding="utf-8") as handle:
        is_locomo = handle.read(64).lstrip().startswith("[")
    if is_locomo:
        return load_locomo(path), LOCOMO_SCORED_CATEGORIES
    return list(load_memory_set(path).conversations), None


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ctxbase.evaluation", description=__doc__)
    parser.add_argument("path", help="a LoCoMo JSON file or a memory-set JSON file")
    parser.add_argument("--json", action="store_true", help="print the JSON report too")
    args = parser.parse_args(argv)
    conversations, categories = _load(args.path)
    retrievers = [BM25Retriever(), BM25Retriever(cjk_bigram_tokenize, name="bm25-bigram")]
    report = run_benchmark(
        conversations,
        retrievers,
        categories=categories,
        progress=lambda line: print(line, file=sys.stderr),
    )
    print(render_table(report))
    if args.json:
        print(json.dumps(report.to_json(best="bm25"), indent=2, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
