"""A project for the web console's tests: a multi-agent session with causes, typed entities
and relations, and two assembled contexts of the same intent for two roles and budgets (so
their diff shows policy, item and token changes); and a session of many events for paging."""

from __future__ import annotations

from dataclasses import dataclass, field

import ctxbase
from ctxbase.assemble.assembler import Assembler
from ctxbase.capture.events import build_event

_STRICT = """
version: 1
inherit_presets: false
policies:
  - name: strict
    match: {default: true}
    relevance_floor: 0.99
    strategies:
      - {name: semantic_recall}
"""


@dataclass
class Seeded:
    project: str
    session: str
    events: dict[str, str] = field(default_factory=dict)  # name -> event id
    entities: dict[str, str] = field(default_factory=dict)  # name -> entity id
    contexts: list[str] = field(default_factory=list)  # [wide budget, narrow budget]


def seed_project(db: str, project: str = "shop") -> Seeded:
    out = Seeded(project=project, session="s1")
    cb = ctxbase.open(db, project=project, embedder="hash")
    try:
        cb.create_session("s1", title="订单缓存上线")
        steps = [
            ("ask", "user_message", "alice", "把预算控制在5万以内，订单查询加Redis缓存", []),
            (
                "plan",
                "assistant_message",
                "planner",
                "Plan: cache the order query in Redis for 5 minutes, per the Redis cache spec.",
                ["ask"],
            ),
            (
                "sql",
                "tool_invocation",
                "coder",
                "run_sql(SELECT * FROM orders WHERE user_id = 42 LIMIT 20)",
                ["plan"],
            ),
            ("rows", "tool_result", "coder", "20 rows in 840 ms (no cache hit)", ["sql"]),
            (
                "test",
                "assistant_message",
                "tester",
                "test_orders_cache fails: every query misses the cache",
                ["rows"],
            ),
            (
                "fix",
                "assistant_message",
                "coder",
                "Fix: set the TTL to 300 s and key the cache by user id",
                ["test", "plan"],
            ),
        ]
        for i, (name, type_, agent, text, parents) in enumerate(steps):
            ev = cb.record(
                type_,
                session_id="s1",
                agent_id=agent,
                text=text,
                parent_event_ids=[out.events[p] for p in parents],
                ts=1_790_000_000.0 + 7 * i,
            )
            out.events[name] = ev.id
        spec = cb.upsert_entity(
            "document",
            "Redis cache spec",
            "Order queries must be cached in Redis for 5 minutes, keyed by user id.",
            id="doc_redis_spec",
        )
        req = cb.upsert_entity(
            "requirement", "cache orders", "订单查询接口缓存 5 分钟", id="req_cache_orders"
        )
        code = cb.upsert_entity(
            "code",
            "orders.query_orders",
            "def query_orders(user_id):\n    return "
            "cache.get_or_set(user_id, lambda: db.orders(user_id), ttl=300)",
            id="code_orders",
        )
        test = cb.upsert_entity(
            "test_case",
            "test_orders_cache",
            "def test_orders_cache(): assert hit_rate() > 0.9",
            id="test_orders_cache",
        )
        out.entities = {"spec": spec.id, "req": req.id, "code": code.id, "test": test.id}
        cb.upsert_relationship(code.id, "FOLLOWS", spec.id, confidence=0.9, source="reviewer")
        cb.upsert_relationship(req.id, "REFERENCES", spec.id, confidence=0.95, source="planner")
        cb.upsert_relationship(test.id, "VALIDATES", code.id, confidence=0.8, source="tester")
        cb.upsert_relationship(
            code.id, "IMPLEMENTS", req.id, confidence=0.55, source="ctxbase:rule"
        )
        cb.flush()
        cb.wait_for_embeddings(30)
        # the same intent for the coder with room, then for the tester with little
        for role, budget in (("coder", 3000), ("tester", 300)):
            ctx = cb.assemble_context(
                agent_role=role,
                user_intent="缓存没生效查下原因: orders Redis cache misses",
                session_id="s1",
                max_tokens=budget,
            )
            out.contexts.append(ctx.context_id)
    finally:
        cb.close()
    return out


def seed_big_session(db: str, project: str, session: str, n: int) -> None:
    """`n` events of three agents in one session, written in batches (no anchoring)."""
    cb = ctxbase.open(db, project=project, embedder="none", anchoring=False)
    try:
        agents = ("planner", "coder", "tester")
        types = ("user_message", "assistant_message", "tool_invocation", "tool_result")
        for start in range(0, n, 1000):
            batch = [
                build_event(
                    project_id=project,
                    session_id=session,
                    type=types[i % 4],
                    agent_id=agents[i % 3],
                    text=f"step {i} of the long run",
                    ts=1_790_000_000.0 + i,
                )
                for i in range(start, min(n, start + 1000))
            ]
            cb.record_events(batch)
    finally:
        cb.close()


@dataclass
class Docs:
    """The "docs" project: a session with one event shown and one hidden, an entity graph of
    14 nodes with long Chinese names, and an assembly whose memory hits were all off topic
    (one of them, an event of another session, hidden since)."""

    project: str
    entities: dict[str, str] = field(default_factory=dict)  # name -> entity id
    context: str = ""
    hidden_event: str = ""


def seed_docs_project(db: str, project: str = "docs") -> Docs:
    out = Docs(project=project)
    cb = ctxbase.open(db, project=project, embedder="hash")
    try:
        cb.create_session("d1", title="文档整理")
        cb.record("user_message", session_id="d1", agent_id="alice", text="整理订单API规范的目录")
        gone = cb.record("user_message", session_id="d1", agent_id="alice", text="写错了，忽略")
        spec = "docs/订单API规范.md"
        nodes = [
            ("file", "file", spec, "订单API规范的文档文件"),
            ("doc", "document", "订单API规范 V2.1", "订单查询接口的规范，第二版第一次修订"),
            ("s_main", "section", f"{spec} > 订单API规范 V2.1", "规范正文：分页、缓存、限流"),
            ("s_page", "section", f"{spec} > 分页", "每页最多50条，超出时返回下一页的游标"),
            ("s_cache", "section", f"{spec} > 缓存", "订单查询结果在Redis缓存5分钟，按用户区分"),
            ("py", "file", "shop/orders.py", "orders module of the shop service"),
            ("init", "file", "shop/__init__.py", "package marker"),
            ("mod", "code", "shop.orders", "import cache, db"),
            ("query", "code", "shop.orders.query_orders", "def query_orders(user_id): ..."),
            ("run_sql", "code", "shop.orders.run_sql", "def run_sql(sql): ..."),
            ("block", "code", "python block 1 of ev_01a236bcfcaeaa9f4ae62cf08b8e917e", "x = 1"),
            ("sql", "sql", "select orders", "SELECT * FROM orders WHERE user_id = ? LIMIT 50"),
            ("req", "requirement", "订单查询接口必须按照《订单API规范》分页，每页最多50条。", "-"),
            ("test", "test_case", "test_orders_page_size", "assert len(page) <= 50"),
        ]
        for key, type_, name, text in nodes:
            out.entities[key] = cb.upsert_entity(type_, name, text, id=f"{type_}_{key}").id
        e = out.entities
        for a, rel, b, conf in [
            ("req", "GENERATES", "sql", 0.7),
            ("req", "GENERATES", "block", 0.7),
            ("req", "GENERATES", "test", 0.7),
            ("query", "CALLS", "run_sql", 0.95),
            ("file", "CONTAINS", "doc", 1.0),
            ("doc", "CONTAINS", "s_main", 1.0),
            ("doc", "CONTAINS", "s_page", 1.0),
            ("doc", "CONTAINS", "s_cache", 1.0),
            ("py", "CONTAINS", "mod", 1.0),
            ("mod", "CONTAINS", "query", 1.0),
            ("mod", "CONTAINS", "run_sql", 1.0),
            ("s_main", "REFERENCES", "doc", 0.9),
        ]:
            cb.upsert_relationship(e[a], rel, e[b], confidence=conf, source="auto:contains")
        for text in ("zebras crossed the road", "migrating the old schema", "weather report"):
            cb.record("assistant_message", session_id="d2", agent_id="bot", text=text)
        cb.flush()
        cb.wait_for_embeddings(30)
        # a floor no hash similarity reaches: every search hit is off topic
        ctx = Assembler(cb, _STRICT).assemble(
            agent_role="coder", user_intent="zebr migra", session_id="d1", max_tokens=2000
        )
        out.context = ctx.context_id
        trace = cb.get_trace(ctx.context_id)
        # an event dropped off topic, hidden since (the graph keeps its 14 entities)
        off_topic = [d["id"] for d in trace["dropped"] if d["reason"] == "off topic"]
        out.hidden_event = next(i for i in off_topic if i.startswith("ev_"))
        cb.soft_delete([gone.id, out.hidden_event])
    finally:
        cb.close()
    return out
