""" "The SQL from last time": the newest SQL first in search and in the coder's context, the
older one still there below it; the decision behind the SQL stays in the coder's context."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

import ctxbase
from ctxbase.retrieve.search import Candidate

DAY = 86400.0
OLD_SQL = "SELECT id, user_id, total FROM orders WHERE created_at > now() - interval '30 days'"
NEW_SQL = (
    "SELECT o.id, u.name, o.total FROM orders o JOIN users u ON u.id = o.user_id "
    "WHERE o.created_at > now() - interval '30 days'"
)


def _two_sqls(db: Path) -> ctxbase.ContextBase:
    """Session A (five days ago) writes the orders query, session B (three days ago) a
    revised one with a JOIN; session C asks about "the SQL from last time"."""
    t0 = time.time() - 5 * DAY
    cb = ctxbase.open(str(db), project="shop", embedder="hash")
    u1 = cb.capture(
        "user_message",
        session_id="A",
        agent_role="user",
        ts=t0,
        text="订单列表太慢，帮我写个查询最近30天订单的SQL",
    )
    cb.capture(
        "assistant_message",
        session_id="A",
        agent_id="coder",
        agent_role="coder",
        parent_event_ids=[u1],
        ts=t0 + 10,
        text=f"Here is the query:\n```sql\n{OLD_SQL};\n```",
    )
    u2 = cb.capture(
        "user_message",
        session_id="B",
        agent_role="user",
        ts=t0 + 2 * DAY,
        text="再加上用户名，关联一下用户表",
    )
    cb.capture(
        "assistant_message",
        session_id="B",
        agent_id="coder",
        agent_role="coder",
        parent_event_ids=[u2],
        ts=t0 + 2 * DAY + 10,
        text=f"Revised query:\n```sql\n{NEW_SQL};\n```",
    )
    cb.flush()
    cb.wait_for_embeddings()
    return cb


def _sql_places(texts: list[str]) -> tuple[int, int]:
    """The first place holding the newer SQL and the first holding the older one."""
    new = next(i for i, t in enumerate(texts) if "JOIN users" in t)
    old = next(i for i, t in enumerate(texts) if "SELECT id, user_id, total" in t)
    return new, old


@pytest.mark.parametrize(
    "question", ["上次那个SQL为什么慢来着？", "Why was the SQL from last time slow?"]
)
def test_the_newest_sql_ranks_first_and_the_older_stays(tmp_path: Path, question: str) -> None:
    with _two_sqls(tmp_path / "sql.db") as cb:
        cb.capture("user_message", session_id="C", agent_role="user", text=question)
        cb.flush()
        results: list[Candidate] = cb.search(question, project="shop").results
        new, old = _sql_places([c.item.text for c in results])
        assert new < old  # the newer SQL first, the older still found
        first = results[new]
        assert first.item.session_id == "B"
        assert "newest 1 of" in str(first.explain().get("recency"))

        ctx = cb.assemble_context(
            agent_role="coder", user_intent=question, session_id="C", max_tokens=800
        )
        memory: list[dict[str, Any]] = ctx.trace["layers"]["memory"]["items"]
        new, old = _sql_places([str(i["text"]) for i in memory])
        assert new < old
        # the newest SQL is the memory section's first item, and said to be the newest
        assert new == 0 and "JOIN users" in memory[0]["text"]
        reasons = {c["id"]: c["reasons"] for c in cb.get_trace(ctx.context_id)["candidates"]}
        assert any("the newest sql made in conversation" in r for r in reasons[memory[0]["id"]])


def test_without_a_recency_cue_nothing_is_reordered(tmp_path: Path) -> None:
    with _two_sqls(tmp_path / "sql.db") as cb:
        results = cb.search("订单SQL为什么慢", project="shop").results
        assert results and all(c.explain().get("recency") is None for c in results)
        # the cue alone (no kind named) does not reorder either
        results = cb.search("上次说到订单为什么慢", project="shop").results
        assert results and all(c.explain().get("recency") is None for c in results)


def test_recency_order_can_be_turned_off(tmp_path: Path) -> None:
    from ctxbase.retrieve.config import get_preset

    with _two_sqls(tmp_path / "sql.db") as cb:
        question = "上次那个SQL为什么慢来着？"
        on = cb.search(question, project="shop").results
        off = cb.search(question, project="shop", config=get_preset("hybrid", recency_order=False))
        assert any(c.explain().get("recency") for c in on)
        assert all(c.explain().get("recency") is None for c in off.results)


def _three_days_en(db: Path) -> tuple[ctxbase.ContextBase, str]:
    """The English mirror of the demo: day 1 the slow query, day 2 the decision and the
    migration it led to, and the tester; returns the base and the decision message's id."""
    t0 = time.time() - 3 * DAY
    cb = ctxbase.open(str(db), project="shop-en", embedder="hash")
    u1 = cb.capture(
        "user_message",
        session_id="day1",
        agent_id="alice",
        agent_role="user",
        ts=t0,
        text="The order list API is too slow. Add a Redis cache for the last-30-days orders "
        "query and keep the budget under 50k.",
    )
    p1 = cb.capture(
        "assistant_message",
        session_id="day1",
        agent_id="planner",
        agent_role="planner",
        parent_event_ids=[u1],
        ts=t0 + 5,
        text="Plan: 1) find the slow SQL for recent orders 2) cache it in Redis with a "
        "10-minute TTL 3) add a test for cache hits.",
    )
    inv = cb.capture(
        "tool_invocation",
        session_id="day1",
        agent_id="coder",
        agent_role="coder",
        parent_event_ids=[p1],
        ts=t0 + 9,
        data={"tool": "run_sql", "arguments": {"sql": OLD_SQL}},
        text=f"run_sql: {OLD_SQL}",
    )
    cb.capture(
        "tool_result",
        session_id="day1",
        agent_id="sql-tool",
        agent_role="tool",
        parent_event_ids=[inv],
        ts=t0 + 11,
        text="12,408 rows in 2.3 s; seq scan on orders (no index on created_at)",
    )
    decision = cb.capture(
        "assistant_message",
        session_id="day2",
        agent_id="planner",
        agent_role="planner",
        ts=t0 + DAY,
        text="Decision: create an index on orders(created_at) before adding the cache.",
    )
    migration = cb.capture(
        "assistant_message",
        session_id="day2",
        agent_id="coder",
        agent_role="coder",
        parent_event_ids=[decision],
        ts=t0 + DAY + 30,
        text="Added the migration:\n```sql\n"
        "CREATE INDEX idx_orders_created_at ON orders (created_at);\n```",
    )
    cb.capture(
        "assistant_message",
        session_id="day2",
        agent_id="tester",
        agent_role="tester",
        parent_event_ids=[migration],
        ts=t0 + DAY + 60,
        text="Tests: test_recent_orders_cache_hit passes; the recent-orders query now takes 40 ms.",
    )
    cb.flush()
    cb.wait_for_embeddings()
    assert decision is not None
    return cb, decision


def test_the_decision_behind_the_sql_stays_in_the_coder_context(tmp_path: Path) -> None:
    cb, decision = _three_days_en(tmp_path / "en.db")
    with cb:
        question = "Why was the SQL from last time slow?"
        cb.capture("user_message", session_id="day3", agent_role="user", text=question)
        ctx = cb.assemble_context(
            agent_role="coder", user_intent=question, session_id="day3", max_tokens=800
        )
        memory = ctx.trace["layers"]["memory"]["items"]
        kept = [i for i in memory if "Decision: create an index" in str(i["text"])]
        assert kept, [i["id"] for i in memory]
        trace = cb.get_trace(ctx.context_id)
        why = {c["id"]: c["reasons"] for c in trace["candidates"]}
        # it came as what the message that made the newest SQL answered (said by the decision
        # itself, or by the statement anchoring cut from it, which it is merged into)
        holder = (kept[0]["id"],) if decision not in why else (decision,)
        assert holder[0] == decision or "decision:" in holder[0]
        assert any("in answer to it" in r for r in why[holder[0]])
        # the newest SQL (the migration) leads, the slow query's evidence is still there
        assert "CREATE INDEX" in str(memory[0]["text"])
        assert any("seq scan on orders" in str(i["text"]) for i in memory)
