"""Seed 000's outdated document served as the current one (V2.1 for V3.2), on every backend:
a document written again, under its id or under the same name with another id, supersedes
the old one, which is kept as history; and no assembly strategy serves a superseded version,
however it reaches it (a reference, an edge, a failing run, another agent's context)."""

from __future__ import annotations

from ctxbase import ContextBase
from ctxbase.assemble.assembler import Assembler
from ctxbase.assemble.facts import RuleFactExtractor
from ctxbase.assemble.manager import ContextManager
from ctxbase.assemble.trace import AssembledContext


def _current(cb: ContextBase) -> set[str]:
    return {e.id for e in cb.list_entities(type="document")}


def _superseded(ctx: AssembledContext, eid: str) -> str:
    """The trace's detail for `eid` left out as superseded (AssertionError if it was not)."""
    assert eid not in ctx.included_ids
    found = [d for d in ctx.trace["dropped"] if d["id"] == eid and d["reason"] == "superseded"]
    assert found, [d for d in ctx.trace["dropped"] if d["id"] == eid]
    return str(found[0]["detail"])


def test_a_document_written_again_supersedes_the_old_one(cb: ContextBase) -> None:
    # the article's spelling, twice under its id
    cb.upsert_entity(
        entity_type="document",
        entity_id="doc_101",
        properties={"title": "Redis 规范", "content": "缓存过期时间 300 秒"},
    )
    new = cb.upsert_entity(
        entity_type="document",
        entity_id="doc_101",
        properties={"title": "Redis 规范", "content": "缓存过期时间 600 秒"},
    )
    assert (new.id, new.version, new.latest) == ("doc_101", 2, True)
    assert cb.get_entity("doc_101@v1").text == "缓存过期时间 300 秒"  # kept as history
    assert not cb.get_entity("doc_101@v1").latest
    # the same name under another id: the new one is current, the old one kept
    cb.upsert_entity(
        entity_type="document",
        entity_id="doc_201",
        properties={"name": "支付规范", "content": "单笔限额一万元"},
    )
    cb.upsert_entity(
        entity_type="document",
        entity_id="doc_202",
        properties={"name": "支付规范", "content": "单笔限额两万元"},
    )
    old = cb.get_entity("doc_201")
    assert not old.latest and old.properties["superseded_by"] == "doc_202"
    assert old.text == "单笔限额一万元"
    links = cb.relationships("doc_202", types=["MODIFIES"])
    assert [(r.to_id, r.source) for r in links] == [("doc_201", "auto:same_name")]
    # titles that carry their version: the newer version is current whatever the order
    cb.upsert_entity("document", "订单 API 文档 V3.2", "订单字段 total_amount")
    cb.upsert_entity("document", "订单 API 文档 V2.1", "订单字段 amount")
    names = {cb.get_entity(i).name for i in _current(cb)}
    assert names == {"Redis 规范", "支付规范", "订单 API 文档 V3.2"}
    assert {e.id for e in cb.list_entities(type="document", latest_only=False)} >= {
        "doc_101@v1",
        "doc_201",
    }
    # another document is left alone
    cb.upsert_entity("document", "退款规范", "退款三天内到账")
    assert len(_current(cb)) == 4
    cb.wait_for_embeddings()
    # searches and assemblies serve the current versions only
    hits = {h.item.owner_id for h in cb.search("单笔限额").results}
    assert "doc_202" in hits and "doc_201" not in hits
    ctx = cb.assemble_context(agent_role="coder", user_intent="参考支付规范的单笔限额写下单接口")
    assert "doc_202" in ctx.included_ids and "doc_201" not in ctx.included_ids


def test_no_strategy_serves_a_superseded_version(cb: ContextBase) -> None:
    cm = ContextManager(cb, extractor=RuleFactExtractor())
    sid = cm.create_session(session_id="s")
    cb.upsert_entity("code", "list_orders", "@cache(expire='300')", id="code_301")
    cb.upsert_entity("code", "list_orders", "@cache(expire=300)", id="code_301")  # v2
    cb.upsert_entity("test_case", "test_cache", "assert ttl == 300", id="test_401")
    cb.upsert_relationship("code_301", "VALIDATES", "test_401", source="human")
    cb.upsert_relationship("code_301@v1", "VALIDATES", "test_401", source="human")
    # a message that points at the first version by its versioned id
    cm.add_message(sid, "assistant", "代码在这里", refers_to=["code_301@v1"])
    cb.wait_for_embeddings()
    refs = Assembler(cb).assemble(
        session_id=sid,
        agent_role="coder",
        user_intent="把刚才那个接口改一下",
        strategy="referenced_code_first",
    )
    assert "version 1 of code_301" in _superseded(refs, "code_301@v1")
    # a failing run that names it
    cm.add_message(
        sid,
        "tool",
        "FAILED test_cache: ttl is -1",
        refers_to=["code_301@v1", "test_401"],
        metadata={"exit_code": 1},
    )
    repair = Assembler(cb).assemble(
        session_id=sid, agent_role="coder", user_intent="缓存没生效查下原因"
    )
    assert "error_driven_repair" in repair.strategies
    assert "code_301" in repair.included_ids
    _superseded(repair, "code_301@v1")
    # edges to it (MODIFIES from the current version, VALIDATES from the test)
    follow = Assembler(cb).assemble(
        agent_role="coder", user_intent="list_orders 的缓存", strategy="referenced_code_first"
    )
    assert "code_301" in follow.included_ids and "code_301@v1" not in follow.included_ids
    for name in ("semantic_recall", "project_scope_fallback", "recent_window"):
        ctx = Assembler(cb).assemble(
            session_id=sid, agent_role="coder", user_intent="list_orders 缓存", strategy=name
        )
        assert "code_301@v1" not in ctx.included_ids, name


CONSENSUS = """\
policies:
  - name: api_dev
    match: {agent_roles: [code_gen, test_gen]}
    strategy: multi_agent_consensus
    parameters: {agents: [code_gen, test_gen], consensus_threshold: 0.8}
"""


def test_consensus_leaves_out_what_was_superseded_since_the_agents_saw_it(cb: ContextBase) -> None:
    cb.upsert_entity(
        entity_type="document",
        entity_id="doc_201",
        properties={"name": "支付规范", "content": "单笔限额一万元"},
    )
    assembler = Assembler(cb, CONSENSUS)
    for role in ("code_gen", "test_gen"):
        seen = assembler.assemble(
            agent_role=role, user_intent="支付规范 单笔限额", strategy="semantic_recall"
        )
        assert "doc_201" in seen.included_ids
    cb.upsert_entity(
        entity_type="document",
        entity_id="doc_202",
        properties={"name": "支付规范", "content": "单笔限额两万元"},
    )
    merged = assembler.assemble(agent_role="test_gen", user_intent="写支付限额的测试")
    assert "multi_agent_consensus" in merged.strategies
    assert _superseded(merged, "doc_201") == "superseded by doc_202"
