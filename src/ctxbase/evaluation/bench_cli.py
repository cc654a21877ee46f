"""`ctxbase bench locomo` and `ctxbase bench memory`: recall of the real engine, side by side
with its keyword-only and embedding-only baselines, in one run."""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from ..errors import ValidationError
from ..retrieve.config import SearchConfig, get_preset
from .locomo import (
    BenchmarkReport,
    Conversation,
    load_locomo,
    recall_at_k,
    render_table,
    run_benchmark,
)
from .memoryset import MEMORY_SET_CATEGORIES, load_memory_set
from .store_retriever import EngineRetriever, SharedEngine

__all__ = ["BEST_PRESET", "run_locomo_bench", "run_memory_bench", "standard_retrievers"]

# The preset the benchmark reports as ctxbase's result.
BEST_PRESET = "hybrid_graph"


T = TypeVar("T")


def _ks(text: str) -> tuple[int, ...]:
    try:
        ks = tuple(sorted({int(k) for k in text.split(",") if k.strip()}))
    except ValueError:
        raise ValidationError("k", f"must be comma-separated integers (got {text!r})") from None
    if not ks or ks[0] <= 0:
        raise ValidationError("k", f"values must be positive (got {text!r})")
    return ks


def _load(kind: str, load: Callable[[str], T], path: str) -> T:
    """A data file that is not JSON, or not in the expected shape, is bad input: one line
    naming the file and what is wrong, not a traceback from deep inside the parser."""
    try:
        return load(path)
    except json.JSONDecodeError as exc:
        raise ValidationError("data", f"{path} is not valid JSON ({exc})") from None
    except UnicodeDecodeError as exc:
        raise ValidationError("data", f"{path} is not UTF-8 text ({exc.reason})") from None
    except (KeyError, TypeError, AttributeError, ValueError) as exc:
        what = f"missing key {exc}" if isinstance(exc, KeyError) else str(exc)
        what = what.removeprefix(f"{path}: ")  # some loader messages name the file already
        raise ValidationError("data", f"{path} is not a {kind} file: {what}") from None


def standard_retrievers(engine: SharedEngine) -> list[EngineRetriever]:
    retrievers = [EngineRetriever("bm25", engine, get_preset("keyword"))]
    if engine.embedder is not None:
        retrievers.append(EngineRetriever("dense", engine, get_preset("semantic")))
        retrievers.append(EngineRetriever("ctxbase", engine, get_preset(BEST_PRESET)))
    return retrievers


def _progress(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def _budget_recall(
    engine: SharedEngine,
    conversations: Sequence[Conversation],
    config: SearchConfig,
    budget: int,
    categories: Sequence[int],
) -> dict[str, Any]:
    """Evidence recall when the assembler's retrieved-memory section is capped at `budget`
    tokens (labels included), and the tokens it actually injects."""
    from ..assemble.assembler import memory_section_for

    recalls: list[float] = []
    tokens: list[int] = []
    for conv in conversations:
        dia_of = engine.dia_ids(conv.conv_id)
        for q in conv.questions:
            if q.category not in categories or not q.evidence:
                continue
            owners, used = memory_section_for(
                engine.cb, engine.project_of(conv.conv_id), q.question, budget, config=config
            )
            packed = [dia_of[o] for o in owners if o in dia_of]
            recalls.append(recall_at_k(packed, q.evidence, max(1, len(packed))))
            tokens.append(used)
    return {
        "budget_tokens": budget,
        "evidence_recall": round(sum(recalls) / max(1, len(recalls)), 4),
        "avg_tokens_injected": round(sum(tokens) / max(1, len(tokens)), 1),
        "questions": len(recalls),
    }


def _emit(
    report: BenchmarkReport, engine: SharedEngine, extra: dict[str, Any], json_out: str | None
) -> None:
    print(render_table(report))
    print(
        f"\nwrite {engine.write_s:.2f} s, embedding {engine.embed_s:.2f} s for {engine.events} "
        f"events ({engine.events / max(engine.embed_s, 1e-9):.0f} events/s embedded)"
    )
    best = "ctxbase" if any(r.name == "ctxbase" for r in report.results) else "bm25"
    figures = report.to_json(best)
    figures["ingest"] = {
        "write_s": round(engine.write_s, 3),
        "embed_s": round(engine.embed_s, 3),
        "events": engine.events,
    }
    figures["preset"] = BEST_PRESET
    figures.update(extra)
    for key, value in extra.items():
        print(f"{key}: {json.dumps(value, ensure_ascii=False)}")
    if json_out:
        with open(json_out, "w", encoding="utf-8") as fh:
            json.dump(figures, fh, ensure_ascii=False, indent=2)
        print(f"figures written to {json_out}")


def run_locomo_bench(args: argparse.Namespace) -> int:
    ks = _ks(args.k)
    conversations = _load("LoCoMo", load_locomo, args.data)
    if args.limit:
        conversations = conversations[: args.limit]
    engine = SharedEngine(
        db=args.db, embedder=args.embedder, progress=_progress, reuse=bool(args.reuse)
    )
    try:
        t0 = time.perf_counter()
        report = run_benchmark(conversations, standard_retrievers(engine), ks, progress=_progress)
        extra: dict[str, Any] = {}
        if args.budget:
            extra["budget"] = _budget_recall(
                engine, conversations, get_preset(BEST_PRESET), args.budget, (1, 2, 3, 4)
            )
        extra["wall_s"] = round(time.perf_counter() - t0, 2)
        _emit(report, engine, extra, args.json_out)
    finally:
        engine.close()
    return 0


def run_memory_bench(args: argparse.Namespace) -> int:
    ks = _ks(args.k)
    combined: dict[str, Any] = {}
    for path in args.data:
        mset = _load("memory-set", load_memory_set, path)
        engine = SharedEngine(db=args.db, embedder=args.embedder, progress=_progress)
        try:
            print(
                f"\n== {mset.name} ({mset.language}): {mset.event_count} events, "
                f"{mset.question_count} queries"
            )
            report = run_benchmark(
                list(mset.conversations),
                standard_retrievers(engine),
                ks,
                categories=MEMORY_SET_CATEGORIES,
                progress=_progress,
            )
            _emit(report, engine, {}, None)
            combined[mset.name] = report.to_json(
                "ctxbase" if engine.embedder is not None else "bm25"
            )
        finally:
            engine.close()
    if args.json_out:
        with open(args.json_out, "w", encoding="utf-8") as fh:
            json.dump(combined, fh, ensure_ascii=False, indent=2)
    return 0
