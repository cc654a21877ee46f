"""Seed 000's walkthrough under its own policy file (section 3.3) with three roles, on every
backend: each agent of `multi_agent_consensus` is given what the others established, and a
disagreement between agents is shown in the prompt rather than settled silently."""

from __future__ import annotations

from ctxbase import ContextBase
from ctxbase.assemble.assembler import Assembler
from ctxbase.assemble.loop import record_outcome
from ctxbase.assemble.manager import ContextManager
from ctxbase.assemble.trace import AssembledContext
from seed000_policy import SEED_POLICY

REDIS_SPEC = (
    "Redis 缓存规范 V3.2。第2条：缓存过期时间 expire 必须是整数秒（int），禁止使用字符串。"
    "第3条：分页查询按 page 与 page_size 组成 key，缓存 5 分钟（300 秒）。"
)
REQUIREMENT = "我们需要订单查询接口支持按用户 ID 分页，缓存 5 分钟，符合公司 Redis 规范。"
CODE = """@router.get("/orders")
@cache(expire="300")
async def list_orders(user_id: int, page: int = 1, page_size: int = 20):
    return await repo.orders_of(user_id, offset=(page - 1) * page_size, limit=page_size)
"""
TEST = """def test_list_orders_cache_hit(client, redis):
    client.get("/orders?user_id=7&page=1")
    assert redis.ttl("orders:list:7:1:20") == 300
"""


def _reasons(ctx: AssembledContext, eid: str) -> list[str]:
    return list(next(c for c in ctx.trace["candidates"] if c["id"] == eid)["reasons"])


def _note(ctx: AssembledContext, start: str) -> str:
    return next(n for n in ctx.trace["notes"] if n.startswith(start))


def _generated(cb: ContextBase, event_id: str) -> set[str]:
    return {r.to_id for r in cb.relationships(event_id, types=["GENERATES"], direction="out")}


def test_each_agent_is_given_what_the_others_established(cb: ContextBase) -> None:
    assembler = Assembler(cb, SEED_POLICY.replace("ecommerce_backend_v2", cb.project))
    cm = ContextManager(cb, assembler=assembler)

    def turn(session: str, role: str, ask: str, strategy: str | None = None) -> AssembledContext:
        cm.add_message(session, "user", ask)
        cb.flush()  # stored and anchored
        return assembler.assemble(
            session_id=session, agent_role=role, user_intent=ask, strategy=strategy
        )

    cb.upsert_entity("document", "Redis 缓存规范 V3.2", REDIS_SPEC, id="document_101")
    # Day 1 morning: the requirement analyst, a role the file leaves to the shipped presets
    s1 = cm.create_session("pm", session_id="day1-requirements")
    ctx = turn(s1, "requirement_analyst", REQUIREMENT)
    assert (ctx.policy, ctx.trace["policy_origin"]) == ("planner", "preset")
    record_outcome(
        cb, ctx.context_id, "需求已记录：按用户 ID 分页，缓存 300 秒，遵循 Redis 规范 V3.2。"
    )
    (req,) = cb.list_entities(type="requirement")
    # Day 1 afternoon: the code generator; the article's step 2 names its strategy
    s2 = cm.create_session("dev", session_id="day1-codegen")
    coder = turn(s2, "code_gen", "生成分页版订单查询接口，用 FastAPI。", "referenced_code_first")
    assert {req.id, "document_101"} <= set(coder.included_ids)
    wrote = record_outcome(cb, coder.context_id, f"```python\n{CODE}```")
    cb.flush()
    code = _generated(cb, wrote.event_id)
    assert code and all(cb.get_entity(c).type == "code" for c in code)

    # Day 2: the test generator under multi_agent_consensus is given the code it never saw
    s3 = cm.create_session("qa", session_id="day2-tests")
    tests = turn(s3, "test_gen", "为刚写的分页接口写测试用例。")
    assert tests.policy == "ecommerce_api_dev" and "multi_agent_consensus" in tests.strategies
    assert code | {req.id, "document_101"} <= set(tests.included_ids)
    for c in code:
        assert any(f"produced by code_gen ({coder.context_id})" in r for r in _reasons(tests, c))
    assert coder.context_id in _note(tests, "multi_agent_consensus: merged")
    wrote = record_outcome(cb, tests.context_id, f"```python\n{TEST}```")
    cb.flush()
    test_case = {t for t in _generated(cb, wrote.event_id) if cb.get_entity(t).type == "test_case"}
    assert test_case

    # Day 3: the code generator is given the test the test generator wrote
    s4 = cm.create_session("dev", session_id="day3-fix")
    fix = turn(s4, "code_gen", "缓存没生效，查下原因。")
    assert "multi_agent_consensus" in fix.strategies
    assert test_case | code <= set(fix.included_ids)
    (t,) = test_case
    assert any(f"produced by test_gen ({tests.context_id})" in r for r in _reasons(fix, t))
    merged = _note(fix, "multi_agent_consensus: merged")
    assert f"code_gen ({coder.context_id}), test_gen ({tests.context_id})" in merged
    assert "0 conflicts" in merged and not any("[conflict" in m["content"] for m in fix.messages)
    # only relations at or above the consensus threshold are followed
    seen = [r for r in fix.trace["relations"] if r["strategy"] == "multi_agent_consensus"]
    assert seen and all(r["followed"] == (r["confidence"] >= 0.8) for r in seen)


CONSENSUS = """\
policies:
  - name: api_dev
    match: {agent_roles: [code_gen, test_gen]}
    strategy: multi_agent_consensus
    parameters: {agents: [code_gen, test_gen], consensus_threshold: 0.8}
"""


def _prompt(ctx: AssembledContext) -> str:
    return "\n".join(m["content"] for m in ctx.messages)


def test_agents_that_worked_from_different_versions_are_shown_in_conflict(
    cb: ContextBase,
) -> None:
    assembler = Assembler(cb, CONSENSUS)
    cm = ContextManager(cb, assembler=assembler)
    ask = "Redis 缓存规范 过期时间"
    cb.upsert_entity(
        "document", "Redis 缓存规范 V3.2", "过期时间 expire 为整数秒", id="document_101"
    )
    cb.wait_for_embeddings()
    coder = assembler.assemble(agent_role="code_gen", user_intent=ask, strategy="semantic_recall")
    assert "document_101" in coder.included_ids
    # a new edition of the spec, under another id, before the test generator's turn
    cb.upsert_entity(
        "document",
        "Redis 缓存规范 V3.3",
        "过期时间 expire 为整数秒，上限 600 秒",
        id="document_102",
    )
    cb.wait_for_embeddings()
    tester = assembler.assemble(agent_role="test_gen", user_intent=ask, strategy="semantic_recall")
    assert "document_102" in tester.included_ids and "document_101" not in tester.included_ids
    merged = assembler.assemble(agent_role="code_gen", user_intent="写缓存过期的实现")
    note = _note(merged, "multi_agent_consensus: conflict:")
    assert f"code_gen ({coder.context_id}) worked from document_101 (superseded by" in note
    assert f"test_gen ({tester.context_id}) worked from document_102" in note
    assert "The current version is document_102" in note
    assert "[conflict between agents]" in _prompt(merged)
    assert "document_102" in merged.included_ids and "document_101" not in merged.included_ids
    assert "1 conflicts" in _note(merged, "multi_agent_consensus: merged")

    # one agent's answer written over what the other's produced: both sides are shown
    sid = cm.create_session("dev", session_id="s")
    coder = assembler.assemble(
        session_id=sid, agent_role="code_gen", user_intent=ask, strategy="semantic_recall"
    )
    made = record_outcome(
        cb,
        coder.context_id,
        "实现如下",
        produced=[{"type": "code", "name": "set_ttl", "text": "redis.expire(key, '300')"}],
    )
    (code,) = made.entities
    tester = assembler.assemble(
        session_id=sid, agent_role="test_gen", user_intent="写测试", strategy="recent_window"
    )
    assert code.id not in tester.included_ids
    record_outcome(
        cb,
        tester.context_id,
        "测试前先修正",
        produced=[{"type": "code", "name": "set_ttl", "text": "redis.expire(key, 300)"}],
    )
    newer = cb.get_entity(f"{code.id}.v2")  # the tester's answer is the latest version
    older = cb.get_entity(code.id)  # the coder's is kept
    assert newer.text == "redis.expire(key, 300)" and older.text == "redis.expire(key, '300')"
    assert not older.latest and older.properties["superseded_by"] == newer.id
    again = assembler.assemble(session_id=sid, agent_role="code_gen", user_intent="继续")
    note = _note(again, "multi_agent_consensus: conflict:")
    assert f"code_gen ({coder.context_id}) worked from {code.id} (superseded by" in note
    assert f"test_gen ({tester.context_id}) worked from {newer.id}" in note
    assert "redis.expire(key, '300')" in _prompt(again)  # the side that would have been lost
    assert newer.id in again.included_ids and code.id not in again.included_ids


def test_two_agents_with_different_entities_of_one_name_are_shown_both(cb: ContextBase) -> None:
    assembler = Assembler(cb, CONSENSUS)
    cm = ContextManager(cb, assembler=assembler)
    sid = cm.create_session("dev", session_id="s")
    cm.add_message(sid, "user", "实现订单列表")
    outputs = {}
    for role, text in (
        ("code_gen", "def list_orders(): return cached()"),
        ("test_gen", "def list_orders(): return []"),
    ):
        ctx = assembler.assemble(
            session_id=sid, agent_role=role, user_intent="实现订单列表", strategy="recent_window"
        )
        eid = f"code_{role}"
        record_outcome(
            cb,
            ctx.context_id,
            "如下",
            produced=[{"id": eid, "type": "code", "name": "list_orders", "text": text}],
        )
        outputs[role] = (ctx.context_id, eid)
    merged = assembler.assemble(session_id=sid, agent_role="code_gen", user_intent="继续")
    note = _note(merged, "multi_agent_consensus: conflict: the agents hold different code")
    for role, (context_id, eid) in outputs.items():
        assert f"{role} ({context_id}) holds {eid}" in note
        assert eid in merged.included_ids  # both sides, neither wins silently
    assert "[conflict between agents]" in _prompt(merged)
