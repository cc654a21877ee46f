"""How many store calls one assembly makes, on every backend: each is a round trip on
PostgreSQL, so a change that adds some fails here (raise a ceiling only on purpose)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from contract_helpers import assembly_project

from ctxbase import ContextBase
from store_calls import StoreCalls

# shape -> (the assembly, ceiling of store calls, what its prompt states). Measured: no
# session 28 (a memory tool result read with its call: one read more; 26 before),
# session 24, planner (global view: every task's facts) 27, user scope 25 on both backends
# (each one more since the stored trace is read against the tombstones: a forget that
# committed while the assembly ran is redacted from it, assemble/trace.py store_trace)
# (the planner 24 before a session turn older than its history window could be recalled:
# memory recalls the old tool call, reads its result with it and traces its links);
# before one get_states read, one generation reading per search and the session read once:
# 29, 27 and 34 (SQLite), 27, 25 and 32 (PostgreSQL).
SHAPES: dict[str, tuple[Callable[[ContextBase, str], Any], int, list[str]]] = {
    "no_session": (
        lambda cb, sid: cb.assemble_context(agent_role="coder", user_intent="refund column"),
        28,
        ["- region: eu"],
    ),
    "session": (
        lambda cb, sid: cb.assemble_context(
            agent_role="coder", user_intent="refund column", session_id=sid
        ),
        24,
        ["- owner: alice", "- goal: ship the refund report"],
    ),
    # memory_scope user: the project's sessions read once, to know whose each is
    "user_scope": (
        lambda cb, sid: cb.assembler.assemble(
            agent_role="coder", user_intent="refund column", session_id=sid, memory_scope="user"
        ),
        25,
        ["- owner: alice", "- goal: ship the refund report"],
    ),
    "planner": (
        lambda cb, sid: cb.assemble_context(
            agent_role="planner", user_intent="refund report plan", session_id=sid
        ),
        27,
        [
            "- owner: alice",
            "- format: csv",
            "- region: eu",
            "- audience: finance (task ",
            "- suspended task: draft the refund report",
        ],
    ),
}


@pytest.mark.parametrize("shape", list(SHAPES))
def test_store_calls_per_assembly(cb: ContextBase, shape: str) -> None:
    sid = assembly_project(cb)
    run, ceiling, stated = SHAPES[shape]
    searches = 0
    search = cb.searcher.search

    def counted(*args: Any, **kwargs: Any) -> Any:
        nonlocal searches
        searches += 1
        return search(*args, **kwargs)

    cb.searcher.search = counted  # type: ignore[method-assign]
    run(cb, sid)  # warm: the indexes load
    calls = StoreCalls(cb.store)
    searches = 0
    ctx = run(cb, sid)
    assert ctx.messages
    counts = dict(calls.counts)
    assert calls.total() <= ceiling, counts
    assert searches >= 1
    assert counts.get("index_generation", 0) <= searches, counts  # one reading per search
    assert counts.get("put_trace") == 1
    # the statuses of the sessions a search's hits are in: read with them, not one by one
    assert "get_state" not in counts, counts
    if shape != "no_session":
        # the facts of every scope and the message statuses: one read; the session once
        assert counts.get("get_states") == 1 and "get_state" not in counts, counts
        assert counts.get("get_session") == 1, counts
        assert counts.get("list_tasks", 0) <= 1, counts
    assert counts.get("list_sessions", 0) == (shape == "user_scope"), counts
    text = "\n".join(m["content"] for m in ctx.messages)
    assert all(line in text for line in stated), text
