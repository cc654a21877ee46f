"""`ctxbase bench locomo` and `ctxbase bench memory`: recall of the real engine, side by side
with its keyword-only and embedding-only baselines, in one run."""

from __future__ import annotations

import argparse
import itertools
import json
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Collection, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

from pydantic import ValidationError as PydanticValidationError

from ..errors import ValidationError
from ..progress import Progress
from ..retrieve.config import SearchConfig, get_preset
from ..retrieve.rerank import shipped_model_conversations, shipped_model_sets
from .adapter_folds import held_out_adapters
from .folds import leave_one_conversation_out
from .locomo import (
    LOCOMO_SCORED_CATEGORIES,
    BenchmarkReport,
    Conversation,
    load_locomo,
    percentile,
    recall_at_k,
    render_category_table,
    render_table,
    run_benchmark,
)
from .memoryset import MEMORY_SET_CATEGORIES, MemorySet, load_memory_set
from .rerank_folds import (
    collect_ranked,
    conversation_fingerprint,
    fold_models,
    write_fold_models,
)
from .store_retriever import EngineRetriever, PerConversationRetriever, SharedEngine

__all__ = [
    "BEST_PRESET",
    "grid_candidates",
    "render_sets_table",
    "run_locomo_bench",
    "run_memory_bench",
    "standard_retrievers",
]

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


def _budget_recall(
    engine: SharedEngine,
    conversations: Sequence[Conversation],
    config: SearchConfig,
    budget: int,
    categories: Sequence[int],
) -> dict[str, Any]:
    """Evidence recall when the assembler's retrieved-memory section is capped at `budget`
    tokens (labels included), and the tokens it actually injects."""
    from ..assemble.memory_section import memory_section_for

    recalls: list[float] = []
    tokens: list[int] = []
    times: list[float] = []
    for conv in conversations:
        dia_of = engine.dia_ids(conv.conv_id)
        for q in conv.questions:
            if q.category not in categories or not q.evidence:
                continue
            t0 = time.perf_counter()
            owners, used = memory_section_for(
                engine.cb, engine.project_of(conv.conv_id), q.question, budget, config=config
            )
            times.append((time.perf_counter() - t0) * 1000.0)
            packed = [dia_of[o] for o in owners if o in dia_of]
            recalls.append(recall_at_k(packed, q.evidence, max(1, len(packed))))
            tokens.append(used)
    return {
        "budget_tokens": budget,
        "evidence_recall": round(sum(recalls) / max(1, len(recalls)), 4),
        "avg_tokens_injected": round(sum(tokens) / max(1, len(tokens)), 1),
        "questions": len(recalls),
        "section_ms": {
            "p50": round(percentile(times, 0.5), 1),
            "p95": round(percentile(times, 0.95), 1),
        },
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


def _phases(args: argparse.Namespace) -> Progress:
    """A bar per retriever; the engine's notes (which conversation it indexed) as lines."""
    return Progress(quiet=bool(getattr(args, "quiet", False)))


def grid_candidates(base: SearchConfig, grid: Sequence[str]) -> dict[str, SearchConfig]:
    """The base configuration and every combination of the `field=v1,v2` settings given,
    named by what they change ("base" for the base itself)."""
    axes: list[tuple[str, list[str]]] = []
    for spec in grid:
        name, sep, values = spec.partition("=")
        name = name.strip()
        if not sep or not name or not values.strip():
            raise ValidationError("grid", f"expected field=v1,v2,... (got {spec!r})")
        if name not in SearchConfig.model_fields:
            raise ValidationError("grid", f"{name!r} is not a search setting")
        axes.append((name, [v.strip() for v in values.split(",") if v.strip()]))
    out: dict[str, SearchConfig] = {"base": base}
    for combo in itertools.product(*(values for _, values in axes)):
        update = {name: _setting(value) for (name, _), value in zip(axes, combo, strict=True)}
        label = ",".join(f"{name}={value}" for (name, _), value in zip(axes, combo, strict=True))
        try:
            config = SearchConfig.model_validate({**base.model_dump(), **update})
        except PydanticValidationError as exc:  # its message names the field
            raise ValidationError("grid", f"{label}: {' '.join(str(exc).split())}") from None
        if config != base:
            out[label] = config
    return out


def _setting(text: str) -> object:
    """A grid value as JSON when it parses (numbers, true/false, null), else the string."""
    try:
        return json.loads(text)
    except ValueError:
        return text


def _fold_configs(
    engine: SharedEngine,
    conversations: Sequence[Conversation],
    config: SearchConfig,
    folder: Path,
    phases: Progress,
    retrain: bool,
    train_with: Sequence[Conversation] = (),
    categories: Collection[int] | None = LOCOMO_SCORED_CATEGORIES,
    train_with_locomo: Sequence[Conversation] = (),
) -> tuple[dict[str, SearchConfig], dict[str, str]]:
    """Per conversation, `config` with a learned re-ordering that never saw it: the shipped
    model where it was not trained on that conversation, else (or for every conversation
    with `retrain`) one trained on the other conversations here (their questions of
    `categories`) and the `train_with` memory-set and `train_with_locomo` conversations
    (never scored), and, where the shipped query adapter saw it, searched with a map
    learned the same way without it. Also how each was re-ordered, for the report."""
    maps: dict[str, str] = {}
    if config.query_adapter and config.query_adapter_file is None:
        maps = held_out_adapters(
            engine,
            [(conversations, categories)],
            [(train_with, MEMORY_SET_CATEGORIES), (train_with_locomo, LOCOMO_SCORED_CATEGORIES)],
            folder,
            retrain,
            phases.note,
        )
    mapped = {c: config.model_copy(update={"query_adapter_file": p}) for c, p in maps.items()}
    configs, how = _reorder_configs(
        engine, conversations, config, folder, phases, retrain, train_with, categories,
        train_with_locomo, mapped,
    )  # fmt: skip
    for conv in conversations:
        if conv.conv_id in maps:
            how[conv.conv_id] += "; query adapter learned without it"
    return configs, how


def _reorder_configs(
    engine: SharedEngine,
    conversations: Sequence[Conversation],
    config: SearchConfig,
    folder: Path,
    phases: Progress,
    retrain: bool,
    train_with: Sequence[Conversation],
    categories: Collection[int] | None,
    train_with_locomo: Sequence[Conversation],
    mapped: Mapping[str, SearchConfig],
) -> tuple[dict[str, SearchConfig], dict[str, str]]:
    """`_fold_configs`'s re-ordering part (see there); `mapped`: the conversations searched
    with a query adapter learned without them (their configurations, learned from and
    scored with)."""
    ids = [conv.conv_id for conv in conversations]
    configs = {c: mapped.get(c, config) for c in ids}
    if config.rerank_top < 2 or config.rerank_model is not None:
        fixed = "off" if config.rerank_top < 2 else "the configured model"
        return configs, {c: fixed for c in ids}
    seen = shipped_model_conversations()
    own = {c.conv_id for c in conversations if retrain or conversation_fingerprint(c) in seen}
    how = {c: "shipped model (never saw it)" for c in ids}
    if not own:
        return configs, how
    rows = [
        row
        for convs, cats in (
            (conversations, categories),
            (train_with, MEMORY_SET_CATEGORIES),
            (train_with_locomo, LOCOMO_SCORED_CATEGORIES),
        )
        for row in collect_ranked(engine, convs, config, cats, phases.note, config_of=mapped)
    ]
    unscored = len(train_with) + len(train_with_locomo)
    if unscored:
        phases.note(f"fold models also learn from {unscored} conversations never scored")
    paths: dict[str, str | None] = {}
    if len({r.conv_id for r in rows}) >= 2:  # else no other conversation to learn from
        paths = write_fold_models(fold_models(rows, progress=phases.note, only=own), folder)
    for conv_id in own:
        path = paths.get(conv_id)  # none: the other conversations taught it nothing
        update = {"rerank_model": path} if path else {"rerank_top": 0}
        configs[conv_id] = configs[conv_id].model_copy(update=update)
        taught = "trained on the other conversations" + (
            f" and {unscored} never scored" if unscored else ""
        )
        how[conv_id] = taught if path else "off (no evidence)"
    return configs, how


def _shipped_sets() -> list[str]:
    """The memory sets the shipped re-ordering model was trained on, where this source tree
    has them: each fold's model is then trained as the shipped one was, minus the held-out
    conversation (an installed package without `bench/data` trains on the run alone)."""
    root = Path(__file__).resolve().parents[3]
    found = [str(root / name) for name in shipped_model_sets() if (root / name).is_file()]
    return [",".join(found)] if found else []


def _folds(
    engine: SharedEngine,
    conversations: Sequence[Conversation],
    ks: tuple[int, ...],
    candidates: dict[str, SearchConfig],
    budget: int | None,
    phases: Progress,
    retrain: bool = False,
    train_with: Sequence[Conversation] = (),
) -> dict[str, Any]:
    """Leave-one-conversation-out figures of the best preset (and, with a grid, of the
    configuration chosen on the other conversations). Whatever is learned is learned per
    fold: the re-ordering model that ranks a conversation never saw it (`retrain`: trained
    per fold even where the shipped model never saw the conversation)."""
    select_k = 10 if 10 in ks else ks[len(ks) // 2]
    with tempfile.TemporaryDirectory(prefix="ctxbase-folds-") as tmp:
        configs: dict[str, dict[str, SearchConfig]] = {}
        reordered: dict[str, dict[str, str]] = {}
        for n, (name, config) in enumerate(candidates.items()):
            folder = Path(tmp) / str(n)  # one per candidate: its own signals, its own models
            folder.mkdir()
            configs[name], reordered[name] = _fold_configs(
                engine, conversations, config, folder, phases, retrain, train_with
            )
        retrievers = [PerConversationRetriever(name, engine, c) for name, c in configs.items()]
        report = run_benchmark(conversations, retrievers, ks, phases=phases)
        folds = leave_one_conversation_out(
            {r.name: r.outcomes for r in report.results}, ks, select_k=select_k
        )
        print("\nleave-one-conversation-out folds:")
        print(folds.render())
        out = folds.to_json()
        if budget:
            recalls = []
            by_id = {conv.conv_id: conv for conv in conversations}
            for fold, entry in zip(folds.folds, out["per_fold"], strict=True):
                config = configs[fold.chosen][fold.held_out]
                figures = _budget_recall(
                    engine, [by_id[fold.held_out]], config, budget, (1, 2, 3, 4)
                )
                entry["budget"] = figures
                recalls.append(figures["evidence_recall"])
            out["mean"]["budget_evidence_recall"] = round(sum(recalls) / len(recalls), 4)
            out["worst"]["budget_evidence_recall"] = min(recalls)
            print(f"budgeted evidence recall per fold: {recalls}")
    for fold, entry in zip(folds.folds, out["per_fold"], strict=True):
        entry["reordered_by"] = reordered[fold.chosen][fold.held_out]
    print(
        "re-ordered by: "
        + "; ".join(f"{e['held_out']} {e['reordered_by']}" for e in out["per_fold"])
    )
    return out


def run_locomo_bench(args: argparse.Namespace) -> int:
    ks = _ks(args.k)
    folds = bool(getattr(args, "folds", False))
    grid = getattr(args, "grid", None) or []
    if grid and not folds:
        raise ValidationError("grid", "--grid chooses settings per fold: it needs --folds")
    if getattr(args, "retrain_rerank", False) and not folds:
        raise ValidationError(
            "retrain_rerank", "--retrain-rerank trains per fold: it needs --folds"
        )
    if getattr(args, "train_with", None) and not folds:
        raise ValidationError("train_with", "--train-with trains per fold: it needs --folds")
    candidates = grid_candidates(get_preset(BEST_PRESET), grid)  # bad settings fail early
    conversations = _load("LoCoMo", load_locomo, args.data)
    if args.limit:
        conversations = conversations[: args.limit]
    if folds and len(conversations) < 2:
        raise ValidationError("folds", "leaving one conversation out needs at least two")
    extra_sets = getattr(args, "train_with", None) or ([] if not folds else _shipped_sets())
    train_with = (
        [conv for mset in _memory_sets(extra_sets, merge=True) for conv in mset.conversations]
        if extra_sets
        else []
    )
    scored = {conv.conv_id for conv in conversations}
    if clash := sorted(scored & {conv.conv_id for conv in train_with}):
        raise ValidationError("train_with", f"conversation ids also scored: {clash[:3]}")
    phases = _phases(args)
    engine = SharedEngine(
        db=args.db, embedder=args.embedder, progress=phases.note, reuse=bool(args.reuse)
    )
    try:
        t0 = time.perf_counter()
        report = run_benchmark(conversations, standard_retrievers(engine), ks, phases=phases)
        extra: dict[str, Any] = {}
        if folds:
            retrain = bool(getattr(args, "retrain_rerank", False))
            before = (engine.events, engine.write_s, engine.embed_s)
            extra["folds"] = _folds(
                engine, conversations, ks, candidates, args.budget, phases, retrain, train_with
            )
            if engine.events != before[0]:  # training sets stored: not the benchmark's ingest
                extra["folds"]["train_with_ingest"] = {
                    "events": engine.events - before[0],
                    "write_s": round(engine.write_s - before[1], 3),
                    "embed_s": round(engine.embed_s - before[2], 3),
                }
                engine.events, engine.write_s, engine.embed_s = before
        if args.budget:
            extra["budget"] = _budget_recall(
                engine, conversations, get_preset(BEST_PRESET), args.budget, (1, 2, 3, 4)
            )
        extra["wall_s"] = round(time.perf_counter() - t0, 2)
        _emit(report, engine, extra, args.json_out)
    finally:
        engine.close()
    return 0


def _merged(sets: Sequence[MemorySet]) -> MemorySet:
    """Several memory sets scored as one (e.g. the parts of a set kept in separate files)."""
    return MemorySet(
        name="+".join(mset.name for mset in sets),
        language="+".join(dict.fromkeys(mset.language for mset in sets)),
        description="; ".join(mset.description for mset in sets),
        conversations=tuple(conv for mset in sets for conv in mset.conversations),
    )


def _memory_sets(data: Sequence[str], merge: bool) -> list[MemorySet]:
    """The sets to score: each --data value, its comma-joined files merged into one set
    (the parts of a set kept in separate files); with `merge`, everything as one set."""
    groups = [[path for path in value.split(",") if path] for value in data]
    if merge:
        groups = [[path for group in groups for path in group]]
    sets: list[MemorySet] = []
    for group in groups:
        parts = [_load("memory-set", load_memory_set, path) for path in group]
        conv_ids = [conv.conv_id for mset in parts for conv in mset.conversations]
        if len(set(conv_ids)) != len(conv_ids):
            raise ValidationError("data", "merged files need distinct conversation ids")
        sets.append(parts[0] if len(parts) == 1 else _merged(parts))
    return sets


def _held_out(
    engine: SharedEngine,
    scored: MemorySet,
    sets: Sequence[MemorySet],
    locomo: Sequence[Conversation],
    phases: Progress,
    folder: Path,
) -> PerConversationRetriever:
    """ctxbase with each conversation of `scored` re-ordered by a model that never saw it:
    trained, where the shipped model saw it, as the shipped model was (the other
    conversations of `sets`, the bundled sets and `locomo`) minus that conversation. The
    models are written to `folder`, read from there while the benchmark runs."""
    mine = {conv.conv_id for conv in scored.conversations}
    unscored: dict[str, Conversation] = {}
    for mset in sets:
        for conv in mset.conversations:
            if conv.conv_id not in mine:
                unscored.setdefault(conv.conv_id, conv)
    if clash := sorted({conv.conv_id for conv in locomo} & (mine | set(unscored))):
        raise ValidationError("train_with_locomo", f"conversation ids also in a set: {clash[:3]}")
    configs, how = _fold_configs(
        engine,
        list(scored.conversations),
        get_preset(BEST_PRESET),
        folder,
        phases,
        retrain=False,
        train_with=list(unscored.values()),
        categories=MEMORY_SET_CATEGORIES,
        train_with_locomo=locomo,
    )
    counts = Counter(how.values())
    print("held out, re-ordered by: " + "; ".join(f"{n}x {t}" for t, n in counts.items()))
    return PerConversationRetriever("held-out", engine, configs)


def render_sets_table(reports: Mapping[str, tuple[MemorySet, BenchmarkReport]]) -> str:
    """The sets side by side: one row per set (its language and question count), one column
    per retriever, each cell "R@k1 / R@k2 / ..."."""
    first = next(iter(reports.values()))[1]
    ks = "/".join(str(k) for k in first.ks)
    names = [result.name for result in first.results]
    header = ["set", *(f"{name} R@{ks}" for name in names)]
    rows = [
        [
            f"{name} ({mset.language}, {report.results[0].questions} q)",
            *(" / ".join(f"{r.recall[k]:.3f}" for k in report.ks) for r in report.results),
        ]
        for name, (mset, report) in reports.items()
    ]
    widths = [max(len(row[col]) for row in (header, *rows)) for col in range(len(header))]
    return "\n".join(
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        for row in (header, *rows)
    )


def run_memory_bench(args: argparse.Namespace) -> int:
    """Recall@k per set and per category for BM25, dense and ctxbase, then the sets side by
    side; a --data value may join files by commas (scored as one set), and --merge scores
    all the files as one set (conversation ids must not clash across merged files)."""
    ks = _ks(args.k)
    folds = bool(getattr(args, "folds", False))
    locomo_path = getattr(args, "train_with_locomo", None)
    if locomo_path and not folds:
        raise ValidationError(
            "train_with_locomo", "--train-with-locomo trains per fold: it needs --folds"
        )
    sets = _memory_sets(args.data, bool(getattr(args, "merge", False)))
    others = _memory_sets(_shipped_sets(), merge=True) if folds else []
    locomo = _load("LoCoMo", load_locomo, locomo_path) if locomo_path else []
    combined: dict[str, Any] = {}
    reports: dict[str, tuple[MemorySet, BenchmarkReport]] = {}
    phases = _phases(args)
    with tempfile.TemporaryDirectory(prefix="ctxbase-folds-") as models:
        for n, mset in enumerate(sets):
            folder = Path(models) / str(n)  # this set's fold models
            folder.mkdir()
            engine = SharedEngine(
                db=args.db,
                embedder=args.embedder,
                progress=phases.note,
                reuse=bool(getattr(args, "reuse", False)),
            )
            try:
                print(
                    f"\n== {mset.name} ({mset.language}): {len(mset.conversations)} conversations, "
                    f"{mset.event_count} events, {mset.question_count} queries"
                )
                retrievers: list[Any] = standard_retrievers(engine)
                if folds:
                    held_out = _held_out(engine, mset, [*sets, *others], locomo, phases, folder)
                    retrievers.append(held_out)
                report = run_benchmark(
                    list(mset.conversations),
                    retrievers,
                    ks,
                    categories=MEMORY_SET_CATEGORIES,
                    phases=phases,
                )
                _emit(report, engine, {}, None)
                print()
                print(render_category_table(report))
                figures = report.to_json("ctxbase" if engine.embedder is not None else "bm25")
                figures.update(
                    language=mset.language,
                    conversations=len(mset.conversations),
                    events=mset.event_count,
                    ks=list(ks),
                )
                combined[mset.name] = figures
                reports[mset.name] = (mset, report)
            finally:
                engine.close()
    if len(reports) > 1:
        print("\n== side by side")
        print(render_sets_table(reports))
    if args.json_out:
        with open(args.json_out, "w", encoding="utf-8") as fh:
            json.dump(combined, fh, ensure_ascii=False, indent=2)
        print(f"figures written to {args.json_out}")
    return 0
