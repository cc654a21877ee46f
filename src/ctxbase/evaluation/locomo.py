"""LoCoMo loading and retrieval scoring, independent of any storage engine.

The conversation structures defined here are the common shape for every benchmark set
(LoCoMo and the project's own memory sets), so one harness scores them all.
"""

from __future__ import annotations

import json
import math
import re
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    from ..progress import Progress

__all__ = [
    "CATEGORY_NAMES",
    "DEFAULT_KS",
    "LOCOMO_SCORED_CATEGORIES",
    "BenchmarkReport",
    "Conversation",
    "LocomoConversation",
    "Question",
    "QuestionOutcome",
    "Retriever",
    "RetrieverResult",
    "Session",
    "Turn",
    "category_name",
    "load_locomo",
    "normalise_evidence",
    "parse_locomo_datetime",
    "percentile",
    "recall_at_k",
    "render_category_table",
    "render_table",
    "run_benchmark",
]

# LoCoMo's categories 1-5; 6 and 7 are used by the project's own memory sets, which share
# the multi-hop / temporal / single-hop categories with LoCoMo.
CATEGORY_NAMES: Mapping[int, str] = {
    1: "multi-hop",
    2: "temporal",
    3: "open-domain",
    4: "single-hop",
    5: "adversarial",
    6: "follow-up",
    7: "cross-agent",
}
LOCOMO_SCORED_CATEGORIES: tuple[int, ...] = (1, 2, 3, 4)
DEFAULT_KS: tuple[int, ...] = (5, 10, 25)

_MONTHS = {
    name: number
    for number, name in enumerate(
        (
            "january",
            "february",
            "march",
            "april",
            "may",
            "june",
            "july",
            "august",
            "september",
            "october",
            "november",
            "december",
        ),
        start=1,
    )
}
_LOCOMO_DATETIME = re.compile(
    r"\s*(\d{1,2}):(\d{2})\s*([ap])\.?m\.?\s+on\s+(\d{1,2})\s+([A-Za-z]+),?\s+(\d{4})\s*",
    re.IGNORECASE,
)
# "D11:26", and the malformed "D:11:26" and "D30:05" that appear in the data.
_DIA_ID = re.compile(r"D:?(\d+):(\d+)")
_SESSION_KEY = re.compile(r"session_(\d+)")


def category_name(category: int) -> str:
    """The readable name of a numeric category ("category-<n>" when unknown)."""
    return CATEGORY_NAMES.get(category, f"category-{category}")


@dataclass(frozen=True, slots=True)
class Turn:
    """One utterance or event; `dia_id` is what retrievers return and evidence refers to."""

    dia_id: str
    speaker: str
    text: str
    session_index: int  # the session number as in the data (LoCoMo's sessions start at 1)
    turn_index: int  # 1-based position within its session
    blip_caption: str | None = None  # caption of an image the speaker shared
    timestamp: datetime | None = None  # the event's own time, else its session's


@dataclass(frozen=True, slots=True)
class Session:
    index: int
    date_time: str  # as written in the data
    started_at: datetime | None  # parsed from date_time; None when unparseable


@dataclass(frozen=True, slots=True)
class Question:
    question: str
    answer: str
    category: int
    evidence: tuple[str, ...]  # normalised dia_ids that exist in the conversation

    @property
    def category_name(self) -> str:
        return category_name(self.category)


@dataclass(frozen=True, slots=True)
class Conversation:
    """A conversation (or shared memory space) with its questions."""

    conv_id: str
    speakers: tuple[str, ...]
    sessions: tuple[Session, ...]
    turns: tuple[Turn, ...]  # chronological
    questions: tuple[Question, ...]
    dropped_evidence: int = 0  # evidence ids that matched no turn and were ignored

    def turn_ids(self) -> frozenset[str]:
        return frozenset(turn.dia_id for turn in self.turns)


# LoCoMo conversations use the common structure; the alias keeps the benchmark's vocabulary.
LocomoConversation = Conversation


def parse_locomo_datetime(text: str) -> datetime | None:
    """Parse "1:56 pm on 8 May, 2023"; None when the text has another shape."""
    match = _LOCOMO_DATETIME.fullmatch(text)
    if match is None:
        return None
    hour, minute, meridiem, day, month_name, year = match.groups()
    month = _MONTHS.get(month_name.lower())
    if month is None:
        return None
    hour_24 = int(hour) % 12 + (12 if meridiem.lower() == "p" else 0)
    try:
        return datetime(int(year), month, int(day), hour_24, int(minute))
    except ValueError:
        return None


def normalise_evidence(
    raw_evidence: Sequence[str], valid_ids: Collection[str]
) -> tuple[tuple[str, ...], int]:
    """Normalised, de-duplicated evidence ids and the number of pieces dropped.

    Entries may hold several ids separated by ';' or spaces; "D:11:26" reads as "D11:26" and
    "D30:05" as "D30:5". Pieces that are malformed or match no turn are dropped and counted.
    """
    kept: list[str] = []
    dropped = 0
    for entry in raw_evidence:
        for piece in re.split(r"[;\s]+", str(entry)):
            if not piece:
                continue
            match = _DIA_ID.fullmatch(piece)
            if match is None:
                dropped += 1
                continue
            dia_id = f"D{int(match.group(1))}:{int(match.group(2))}"
            if dia_id not in valid_ids:
                dropped += 1
            elif dia_id not in kept:
                kept.append(dia_id)
    return tuple(kept), dropped


def _optional_str(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


def _locomo_conversation(sample: Mapping[str, Any]) -> Conversation:
    raw = sample["conversation"]
    session_numbers = sorted(
        int(match.group(1))
        for key in raw
        if (match := _SESSION_KEY.fullmatch(key)) is not None and isinstance(raw[key], list)
    )
    sessions: list[Session] = []
    turns: list[Turn] = []
    for number in session_numbers:
        date_time = str(raw.get(f"session_{number}_date_time", ""))
        started_at = parse_locomo_datetime(date_time)
        sessions.append(Session(number, date_time, started_at))
        for position, item in enumerate(raw[f"session_{number}"], start=1):
            turns.append(
                Turn(
                    dia_id=str(item["dia_id"]),
                    speaker=str(item["speaker"]),
                    text=str(item.get("text", "")),
                    session_index=number,
                    turn_index=position,
                    blip_caption=_optional_str(item.get("blip_caption")),
                    timestamp=started_at,
                )
            )
    valid_ids = {turn.dia_id for turn in turns}
    questions: list[Question] = []
    dropped_total = 0
    for item in sample.get("qa", []):
        category = int(item["category"])
        evidence, dropped = normalise_evidence(item.get("evidence", []), valid_ids)
        dropped_total += dropped
        # Adversarial items carry the expected reply in adversarial_answer.
        if category == 5 and "adversarial_answer" in item:
            answer = item["adversarial_answer"]
        else:
            answer = item.get("answer", "")
        questions.append(Question(str(item["question"]), str(answer), category, evidence))
    speakers = tuple(str(raw[key]) for key in ("speaker_a", "speaker_b") if key in raw)
    return Conversation(
        conv_id=str(sample["sample_id"]),
        speakers=speakers,
        sessions=tuple(sessions),
        turns=tuple(turns),
        questions=tuple(questions),
        dropped_evidence=dropped_total,
    )


def load_locomo(path: str | Path) -> list[LocomoConversation]:
    """Load a LoCoMo file (a JSON list of samples) into conversations, in file order."""
    with Path(path).open(encoding="utf-8") as handle:
        samples = json.load(handle)
    if not isinstance(samples, list):
        raise ValueError(f"{path}: expected a JSON list of LoCoMo samples")
    return [_locomo_conversation(sample) for sample in samples]


def recall_at_k(retrieved: Sequence[str], evidence: Sequence[str], k: int) -> float:
    """Fraction of the distinct evidence ids found among the first k retrieved ids."""
    if k <= 0:
        raise ValueError("k must be positive")
    wanted = set(evidence)
    if not wanted:
        raise ValueError("recall is undefined without evidence")
    return len(wanted.intersection(retrieved[:k])) / len(wanted)


def percentile(values: Sequence[float], fraction: float) -> float:
    """Linear-interpolated percentile (fraction in [0, 1]); 0.0 for no values."""
    if not values:
        return 0.0
    ordered = sorted(values)
    position = (len(ordered) - 1) * fraction
    lower = math.floor(position)
    upper = math.ceil(position)
    weight = position - lower
    return ordered[lower] * (1.0 - weight) + ordered[upper] * weight


@runtime_checkable
class Retriever(Protocol):
    """What the harness needs from a retrieval system."""

    name: str

    def index(self, conv: Conversation) -> None:
        """Ingest every turn of the conversation."""

    def search(self, conv_id: str, question: str, k: int) -> list[str]:
        """The dia_ids of at most k turns of conversation conv_id, best first."""
        ...


@dataclass(frozen=True, slots=True)
class QuestionOutcome:
    """One scored question, kept so misses can be inspected."""

    conv_id: str
    question: str
    category: int
    evidence: tuple[str, ...]
    retrieved: tuple[str, ...]  # up to max(ks) ids, best first
    recall: Mapping[int, float]  # k -> recall@k
    latency_ms: float


@dataclass(frozen=True, slots=True)
class RetrieverResult:
    name: str
    ks: tuple[int, ...]
    recall: Mapping[int, float]  # k -> mean recall over scored questions
    by_category: Mapping[str, Mapping[int, float]]  # category name -> k -> mean recall
    questions: int  # questions scored
    questions_by_category: Mapping[str, int]
    without_evidence: int  # questions excluded because none of their evidence is valid
    latency_p50_ms: float
    latency_p95_ms: float
    ingest_s: float  # total over conversations
    ingest_s_by_conversation: Mapping[str, float]
    outcomes: tuple[QuestionOutcome, ...] = field(repr=False)

    def latency_json(self) -> dict[str, float]:
        return {"p50": round(self.latency_p50_ms, 3), "p95": round(self.latency_p95_ms, 3)}


def _recall_json(recall: Mapping[int, float]) -> dict[str, float]:
    return {str(k): round(value, 4) for k, value in recall.items()}


def _by_category_json(by_category: Mapping[str, Mapping[int, float]]) -> dict[str, Any]:
    return {name: _recall_json(recall) for name, recall in by_category.items()}


@dataclass(frozen=True, slots=True)
class BenchmarkReport:
    ks: tuple[int, ...]
    results: tuple[RetrieverResult, ...]  # one per retriever, in the order given

    def result(self, name: str) -> RetrieverResult:
        for result in self.results:
            if result.name == name:
                return result
        raise KeyError(f"no retriever named {name!r} in the report")

    def to_json(self, best: str) -> dict[str, Any]:
        """The report with `best` at the top level and every other retriever as a baseline."""
        top = self.result(best)
        baselines = {
            result.name: {
                "recall": _recall_json(result.recall),
                "by_category": _by_category_json(result.by_category),
                "latency_ms": result.latency_json(),
                "ingest_s": round(result.ingest_s, 4),
            }
            for result in self.results
            if result.name != best
        }
        return {
            "recall": _recall_json(top.recall),
            "by_category": _by_category_json(top.by_category),
            "baselines": baselines,
            "latency_ms": top.latency_json(),
            "ingest_s": round(top.ingest_s, 4),
            "questions": top.questions,
            "questions_by_category": dict(top.questions_by_category),
        }


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else 0.0


def _summarise(
    name: str,
    ks: tuple[int, ...],
    outcomes: list[QuestionOutcome],
    without_evidence: int,
    ingest_s_by_conversation: dict[str, float],
) -> RetrieverResult:
    category_order = sorted({outcome.category for outcome in outcomes})
    by_category: dict[str, dict[int, float]] = {}
    counts: dict[str, int] = {}
    for category in category_order:
        members = [outcome for outcome in outcomes if outcome.category == category]
        label = category_name(category)
        by_category[label] = {k: _mean([m.recall[k] for m in members]) for k in ks}
        counts[label] = len(members)
    latencies = [outcome.latency_ms for outcome in outcomes]
    return RetrieverResult(
        name=name,
        ks=ks,
        recall={k: _mean([outcome.recall[k] for outcome in outcomes]) for k in ks},
        by_category=by_category,
        questions=len(outcomes),
        questions_by_category=counts,
        without_evidence=without_evidence,
        latency_p50_ms=percentile(latencies, 0.50),
        latency_p95_ms=percentile(latencies, 0.95),
        ingest_s=sum(ingest_s_by_conversation.values()),
        ingest_s_by_conversation=ingest_s_by_conversation,
        outcomes=tuple(outcomes),
    )


def run_benchmark(
    conversations: Sequence[Conversation],
    retrievers: Sequence[Retriever],
    ks: Sequence[int] = DEFAULT_KS,
    categories: Collection[int] | None = LOCOMO_SCORED_CATEGORIES,
    progress: Callable[[str], None] | None = None,
    phases: Progress | None = None,
) -> BenchmarkReport:
    """Index every conversation into each retriever, ask its questions, and score recall@k.

    `categories=None` scores every category. Questions whose evidence is empty after
    normalisation are excluded from the averages and counted in `without_evidence`.
    `phases` shows one bar per retriever, conversations done out of all of them.
    """
    k_values = tuple(sorted(set(ks)))
    if not k_values or k_values[0] <= 0:
        raise ValueError("ks must hold positive integers")
    if len({retriever.name for retriever in retrievers}) != len(retrievers):
        raise ValueError("retriever names must be unique")
    depth = k_values[-1]
    results: list[RetrieverResult] = []
    for retriever in retrievers:
        outcomes: list[QuestionOutcome] = []
        without_evidence = 0
        ingest_s: dict[str, float] = {}
        bar = (
            None
            if phases is None
            else phases.bar(retriever.name, len(conversations), "conversation")
        )
        for conv in conversations:
            started = time.perf_counter()
            retriever.index(conv)
            ingest_s[conv.conv_id] = time.perf_counter() - started
            asked = 0
            for item in conv.questions:
                if categories is not None and item.category not in categories:
                    continue
                if not item.evidence:
                    without_evidence += 1
                    continue
                started = time.perf_counter()
                retrieved = retriever.search(conv.conv_id, item.question, depth)
                latency_ms = (time.perf_counter() - started) * 1000.0
                outcomes.append(
                    QuestionOutcome(
                        conv_id=conv.conv_id,
                        question=item.question,
                        category=item.category,
                        evidence=item.evidence,
                        retrieved=tuple(retrieved[:depth]),
                        recall={k: recall_at_k(retrieved, item.evidence, k) for k in k_values},
                        latency_ms=latency_ms,
                    )
                )
                asked += 1
            if progress is not None:
                progress(
                    f"{retriever.name}: {conv.conv_id} indexed in "
                    f"{ingest_s[conv.conv_id]:.3f}s, {asked} questions"
                )
            if bar is not None:
                bar.update()
        if bar is not None:
            bar.close()
        results.append(_summarise(retriever.name, k_values, outcomes, without_evidence, ingest_s))
    return BenchmarkReport(ks=k_values, results=tuple(results))


def render_table(report: BenchmarkReport) -> str:
    """A side-by-side text table: one column per retriever, one row per figure."""
    middle_k = report.ks[len(report.ks) // 2]
    category_labels: list[str] = []
    for result in report.results:
        for label in result.by_category:
            if label not in category_labels:
                category_labels.append(label)
    rows: list[tuple[str, list[str]]] = []
    for k in report.ks:
        rows.append((f"R@{k}", [f"{r.recall[k]:.3f}" for r in report.results]))
    for label in category_labels:
        cells = []
        for result in report.results:
            recall = result.by_category.get(label)
            count = result.questions_by_category.get(label, 0)
            cells.append("-" if recall is None else f"{recall[middle_k]:.3f} ({count})")
        rows.append((f"{label} R@{middle_k}", cells))
    rows.append(("questions", [str(r.questions) for r in report.results]))
    rows.append(("ingest s", [f"{r.ingest_s:.3f}" for r in report.results]))
    rows.append(("p50 ms", [f"{r.latency_p50_ms:.2f}" for r in report.results]))
    rows.append(("p95 ms", [f"{r.latency_p95_ms:.2f}" for r in report.results]))
    header = ("", [r.name for r in report.results])
    label_width = max(len(label) for label, _ in rows)
    widths = [
        max(len(header[1][column]), *(len(cells[column]) for _, cells in rows))
        for column in range(len(report.results))
    ]
    lines = [_table_line(header[0], header[1], label_width, widths)]
    lines.append(_table_line("-" * label_width, ["-" * w for w in widths], label_width, widths))
    lines.extend(_table_line(label, cells, label_width, widths) for label, cells in rows)
    return "\n".join(lines)


def render_category_table(report: BenchmarkReport) -> str:
    """Recall at every k for each category: one row per category, one column per retriever,
    each cell "R@k1 / R@k2 / ..." (render_table shows categories at one k only)."""
    labels: list[str] = []
    for result in report.results:
        labels.extend(label for label in result.by_category if label not in labels)
    ks = "/".join(str(k) for k in report.ks)
    header = [f"{result.name} R@{ks}" for result in report.results]
    rows: list[tuple[str, list[str]]] = []
    for label in labels:
        count = max(result.questions_by_category.get(label, 0) for result in report.results)
        cells = []
        for result in report.results:
            recall = result.by_category.get(label)
            cells.append(
                "-" if recall is None else " / ".join(f"{recall[k]:.3f}" for k in report.ks)
            )
        rows.append((f"{label} ({count})", cells))
    rows.append(
        ("all", [" / ".join(f"{r.recall[k]:.3f}" for k in report.ks) for r in report.results])
    )
    label_width = max(len("category"), *(len(label) for label, _ in rows))
    widths = [
        max(len(header[column]), *(len(cells[column]) for _, cells in rows))
        for column in range(len(report.results))
    ]
    lines = [_table_line("category", header, label_width, widths)]
    lines.append(_table_line("-" * label_width, ["-" * w for w in widths], label_width, widths))
    lines.extend(_table_line(label, cells, label_width, widths) for label, cells in rows)
    return "\n".join(lines)


def _table_line(label: str, cells: Sequence[str], label_width: int, widths: Sequence[int]) -> str:
    padded = [cell.rjust(width) for cell, width in zip(cells, widths, strict=True)]
    return "  ".join([label.ljust(label_width), *padded])
