"""Traces: stored per context id, in diff.py's shape, explainable and comparable."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

import ctxbase
from ctxbase import ContextBase
from ctxbase.assemble.assembler import Assembler
from ctxbase.assemble.diff import diff_messages, render_diff
from ctxbase.assemble.gatherer import Gatherer
from ctxbase.assemble.policy_loading import load_default_policies
from ctxbase.assemble.trace import diff_contexts, explain_trace, get_trace
from ctxbase.errors import NotFoundError
from ctxbase.retrieve.config import get_preset


@pytest.fixture
def cb(tmp_path: Path) -> Iterator[ContextBase]:
    base = ctxbase.open(str(tmp_path / "x.db"), project="p", embedder="hash")
    yield base
    base.close()


def test_trace_is_stored_with_policy_candidates_and_tokens(cb: ContextBase) -> None:
    cb.upsert_entity("document", "缓存规范", "缓存过期时间必须是整数秒", id="doc_1")
    cb.wait_for_embeddings()
    ctx = Assembler(cb).assemble(agent_role="coder", user_intent="缓存过期时间怎么设")
    trace = get_trace(cb, ctx.context_id)
    assert trace["context_id"] == ctx.context_id and trace["policy"] == "coder"
    assert trace["strategies"] == list(ctx.strategies)
    assert any("role 'coder'" in r for r in trace["reasons"])
    assert list(trace["layers"]) == ["system", "state", "task", "memory", "history", "input"]
    doc = next(c for c in trace["candidates"] if c["id"] == "doc_1")
    assert doc["included"] and doc["explain"]["owner_id"] == "doc_1"
    assert "similarity" in doc["explain"]
    assert trace["tokens_by_layer"] == ctx.tokens_by_layer
    assert trace["total_tokens"] == ctx.total_tokens
    text = explain_trace(trace)
    assert "policy 'coder'" in text
    # what the text names in the prompt adds up to the header's total: the layers'
    # framed tokens and the reply's priming
    framed = re.findall(r"^layer \w+: \d+ tokens of items \((\d+) in the prompt", text, re.M)
    (primed,) = re.findall(r"^overhead: (\d+) tokens", text, re.M)
    assert sum(map(int, framed)) + int(primed) == trace["total_tokens"]
    with pytest.raises(NotFoundError):
        get_trace(cb, "ctx_missing")


def test_diff_of_two_assemblies_shows_what_moved(cb: ContextBase) -> None:
    assembler = Assembler(cb)
    before = assembler.assemble(agent_role="planner", user_intent="缓存规范")
    cb.upsert_entity("document", "缓存规范", "缓存过期时间必须是整数秒", id="doc_new")
    cb.wait_for_embeddings()
    after = assembler.assemble(agent_role="planner", user_intent="缓存规范")
    diff = diff_contexts(cb, before.context_id, after.context_id)
    assert "doc_new" in {ref.id for ref in diff.added}
    assert diff.total_token_delta == (
        after.trace["layers"]["memory"]["tokens"] - before.trace["layers"]["memory"]["tokens"]
    )
    report = render_diff(diff)
    assert "+ doc_new [memory]" in report
    messages = diff_messages(before.messages, after.messages)
    assert any("doc_new" in m["content"] for _, m in messages.added)


def test_a_hit_below_top_k_says_which_search_left_it_out(cb: ContextBase) -> None:
    for n in range(14):
        cb.record("user_message", session_id="s", text=f"the redis cache note number {n}")
    cb.wait_for_embeddings()
    ctx = Assembler(cb).assemble(agent_role="coder", user_intent="redis cache")
    trace = get_trace(cb, ctx.context_id)
    cut = [d for d in trace["dropped"] if d["reason"] == "top_k"]
    assert cut, trace["dropped"]
    # The coder policy's semantic_recall takes 5 to 10 hits, its fallback 3.
    details = {d["detail"] for d in cut}
    assert "semantic_recall: ranked below dynamic top_k 5-10" in details
    assert details <= {
        "semantic_recall: ranked below dynamic top_k 5-10",
        "project_scope_fallback: ranked below top_k 3",
    }
    assert "top_k below top_k" not in explain_trace(trace)


def test_a_long_entity_left_out_is_listed_once_not_per_passage(cb: ContextBase) -> None:
    # a document of several passages, each a search hit below the notes
    body = "\n\n".join(
        f"Section {n}: redis cache order queries, checklist item {n}. " + "filler " * 60
        for n in range(12)
    )
    cb.upsert_entity("document", "部署手册", body, id="doc_long")
    for n in range(12):
        cb.record("user_message", session_id="s", text=f"redis cache order queries note {n}")
    cb.wait_for_embeddings()
    g = Gatherer(
        cb, "p", load_default_policies().default, session_id=None, intent="x", exclude=set()
    )
    config = get_preset("hybrid", top_k=5)
    g.search("redis cache order queries", config, None, "semantic_recall", 0.0, 1.0)
    passages = cb.search("redis cache order queries", config=config).considered
    assert sum(c.item.owner_id == "doc_long" and bool(c.dropped) for c in passages) > 1
    keys = [(d["id"], d["reason"], d["detail"]) for d in g.dropped]
    assert ("doc_long", "top_k", "semantic_recall: ranked below top_k 5") in keys
    assert len(keys) == len(set(keys)), keys


def test_the_text_trace_says_how_each_item_was_found(cb: ContextBase) -> None:
    for text in ("the redis cache ttl is 10 minutes", "deploy went fine", "lunch at noon"):
        cb.record("user_message", session_id="s", text=text)
    cb.wait_for_embeddings()
    ctx = Assembler(cb).assemble(agent_role="coder", user_intent="redis cache ttl")
    text = explain_trace(get_trace(cb, ctx.context_id))
    # the policy's search is named as `ctxbase search --preset` takes it
    assert "preset 'default'" not in text
    assert "min_score=0.35 relative to the best hit, preset 'hybrid' + 1 graph hop" in text
    lines = text.splitlines()
    items = [n for n, line in enumerate(lines) if line.startswith("  + ev_")]
    assert items
    for n in items:  # under each memory item: how it was found, and the compared score
        assert lines[n + 1].startswith("      "), lines[n : n + 2]
    top = lines[items[0] + 1].strip()
    assert top.startswith("semantic_recall: keyword rank 1, vector similarity ")
    # and why the relevance gate let it in: its own shared words
    assert top.endswith(
        "relative score 1.000 >= min_score 0.35; on topic: shares 'redis', 'cache', 'ttl' "
        "with the intent"
    )


def test_the_text_trace_names_keyword_vector_and_graph_origins() -> None:
    def hit(owner: str, strategy: str, rel: float | None, **how: object) -> dict[str, object]:
        base = {"keyword_rank": None, "similarity": None, "graph_via": None}
        found = {"owner_id": owner, "strategy": strategy, "relative": rel, "min_score": 0.35}
        return found | base | how

    item = {"source": "semantic_recall", "score": 0.5, "text": "x", "truncated": False}
    trace = {
        "layers": {
            "memory": {
                "tokens": 9,
                "items": [item | {"id": i} for i in ("a", "b", "c", "d")],
            }
        },
        "search_considered": [
            hit("a", "semantic_recall", 1.0, keyword_rank=2, similarity=0.41234),
            hit("b", "semantic_recall", 0.3, graph_via="REFERENCES from a"),
            hit("c", "semantic_recall", None, keyword_rank=9),  # cut by top_k: no line
        ],
        "candidates": [
            {"id": "c", "reasons": ["project_scope_fallback: linked to a seed"]},
            {
                "id": "d",
                "reasons": ["semantic_recall: search hit"],
                "explain": {"keyword_rank": 3},
            },
        ],
    }
    lines = [line.strip() for line in explain_trace(trace).splitlines()]
    assert lines[lines.index("+ a [semantic_recall] score 0.500: x") + 1] == (
        "semantic_recall: keyword rank 2, vector similarity 0.412; "
        "relative score 1.000 >= min_score 0.35"
    )
    assert lines[lines.index("+ b [semantic_recall] score 0.500: x") + 1] == (
        "semantic_recall: graph via REFERENCES from a; relative score 0.300 < min_score 0.35"
    )
    assert lines[lines.index("+ c [semantic_recall] score 0.500: x") + 1] == (
        "project_scope_fallback: linked to a seed"
    )
    # a trace stored without its search hits still says how its candidate was found
    assert lines[lines.index("+ d [semantic_recall] score 0.500: x") + 1] == "keyword rank 3"


def test_the_text_trace_shows_the_monitoring_points(cb: ContextBase) -> None:
    # seed 002's fallback alarm must be visible to a CLI user, not only in --json
    cb.record("user_message", session_id="s", text="the redis cache ttl is 10 minutes")
    cb.wait_for_embeddings()
    hit = get_trace(
        cb, Assembler(cb).assemble(agent_role="coder", user_intent="redis ttl").context_id
    )
    m = hit["monitoring"]
    line = next(x for x in explain_trace(hit).splitlines() if x.startswith("monitoring: "))
    assert line.startswith(f"monitoring: memory hit ({m['memory_items']} items); ")
    assert f"memory {m['memory_tokens']} of {m['prompt_tokens']} prompt tokens" in line
    assert f"(injected share {m['injected_share']:.1%})" in line
    assert f"retrieval {m['retrieval_ms']} ms" in line
    # the memory layer's line gives both counts: its items' and the prompt's, as monitoring
    layer = next(x for x in explain_trace(hit).splitlines() if x.startswith("layer memory: "))
    items = hit["layers"]["memory"]["tokens"]
    assert layer == (
        f"layer memory: {items} tokens of items "
        f"({m['memory_tokens']} in the prompt, with its message frame)"
    )
    off = dict(hit, monitoring={**m, "memory_hit": False, "fallback": True, "memory_tokens": 0})
    assert "monitoring: fallback (no retrieved memory injected); memory 0 of" in explain_trace(off)
