"""A project for the web console's tests: a multi-agent session with causes, typed entities
and relations, and two assembled contexts of the same intent for two roles and budgets (so
their diff shows policy, item and token changes); and a session of many events for paging."""

from __future__ import annotations

from dataclasses import dataclass, field

import ctxbase
from ctxbase.capture.events import build_event


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
