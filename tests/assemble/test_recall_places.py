"""A search's top_k places in assembly go to memory that can enter: the intent's own
message and what the prompt already holds take none."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

import ctxbase
from ctxbase import ContextBase
from ctxbase.assemble.assembler import Assembler
from ctxbase.assemble.recall_gate import is_the_intent
from ctxbase.model import Event

POLICY = """
version: 1
inherit_presets: false
policies:
  - name: all
    match: {default: true}
    top_k: 3
    strategies:
      - {name: semantic_recall, top_k: 3, min_score: 0.0, search_preset: hybrid_graph}
      - {name: recent_window, max_messages: 20}
"""

QUESTION = "What was the SQL for the orders report?"


@pytest.fixture
def cb(tmp_path: Path) -> Iterator[ContextBase]:
    base = ctxbase.open(str(tmp_path / "p.db"), project="p", embedder="hash")
    notes = [
        "The SQL for the orders report: SELECT id, total FROM orders WHERE day = ?",
        "The orders report SQL is slow: a sequential scan of orders",
        "Decision: index orders(day) so the orders report SQL uses it",
        "The orders report runs at 02:00 and its SQL reads yesterday",
        "SQL style for reports: upper-case keywords, one clause per line",
    ]
    for n, text in enumerate(notes):
        base.capture("assistant_message", session_id=f"d{n}", text=text)
    base.capture("user_message", session_id="day3", text=QUESTION)
    base.flush()
    base.wait_for_embeddings()
    yield base
    base.close()


def _recalled(ctx: object) -> list[str]:
    cands = ctx.trace["candidates"]  # type: ignore[attr-defined]
    return [c["id"] for c in cands if "semantic_recall" in c["strategies"]]


def _question_id(cb: ContextBase) -> str:
    return cb.store.list_events("p", "day3")[0].id


def test_the_intents_own_message_takes_no_place(cb: ContextBase) -> None:
    asked = _question_id(cb)
    ctx = Assembler(cb, POLICY).assemble(agent_role="coder", user_intent=QUESTION)
    recalled = _recalled(ctx)
    assert asked not in recalled
    assert len(recalled) == 3  # the place it held went to the next hit
    dropped = [d for d in ctx.trace["dropped"] if d["id"] == asked]
    assert dropped and dropped[0]["reason"] == "the intent"
    # another session's question: the trace says so (not "the question's own message")
    assert dropped[0]["detail"] == "asks exactly the intent (session 'day3')"
    # spacing and case do not make it another question
    loose = Assembler(cb, POLICY).assemble(agent_role="coder", user_intent=f"  {QUESTION.upper()} ")
    assert asked not in _recalled(loose)


def test_a_hit_the_history_holds_takes_no_place(cb: ContextBase) -> None:
    asked = _question_id(cb)
    ctx = Assembler(cb, POLICY).assemble(
        agent_role="coder", user_intent=QUESTION, session_id="day3"
    )
    recalled = _recalled(ctx)
    assert asked not in recalled and len(recalled) == 3
    # it was found: the prompt holds it as the latest input, not the memory layer
    why = [(d["reason"], d["detail"]) for d in ctx.trace["dropped"] if d["id"] == asked]
    assert why == [("the intent", "(the latest input itself)")]
    body = "\n".join(str(m["content"]) for m in ctx.messages)
    assert body.count(QUESTION) == 1


def test_is_the_intent() -> None:
    def ev(type_: str, text: str) -> Event:
        return Event(id="ev_1", project_id="p", session_id="s", type=type_, text=text, ts=1.0)

    assert is_the_intent(ev("user_message", "Why  is it slow?"), "why is it slow?")
    assert not is_the_intent(ev("assistant_message", "why is it slow?"), "why is it slow?")
    assert not is_the_intent(ev("user_message", "why is it slow? the cache"), "why is it slow?")
    assert not is_the_intent(None, "why is it slow?")


def test_a_strategys_own_top_k_is_the_searchs_depth(cb: ContextBase) -> None:
    # The policy's top_k (default 5) is no cap on a semantic_recall that writes its own.
    deeper = POLICY.replace("    top_k: 3\n", "").replace("top_k: 3,", "top_k: 6,")
    ctx = Assembler(cb, deeper).assemble(agent_role="coder", user_intent="orders report SQL")
    assert len(_recalled(ctx)) == 6
    assert any("semantic_recall: intent is searchable (top_k=6" in r for r in ctx.trace["reasons"])
    # one that sets none takes the policy's, and the trace shows that value
    inherits = POLICY.replace("top_k: 3, ", "")
    ctx = Assembler(cb, inherits).assemble(agent_role="coder", user_intent="orders report SQL")
    assert len(_recalled(ctx)) == 3
    assert any("(top_k=3," in r for r in ctx.trace["reasons"])


def test_a_call_shown_with_its_message_takes_no_place(cb: ContextBase) -> None:
    # The demo's coder lost the answer this way: the call's place went unused.
    msg = cb.record(
        "assistant_message",
        session_id="d9",
        text="What was the SQL for the orders report? I run it.",
    )
    call = cb.record(
        "tool_invocation",
        session_id="d9",
        text="run_sql(What was the SQL for the orders report)",
        parent_event_ids=[msg.id],
    )
    cb.flush()
    cb.wait_for_embeddings()
    ctx = Assembler(cb, POLICY).assemble(agent_role="coder", user_intent=QUESTION)
    placed = [
        c["owner_id"]
        for c in ctx.trace["search_considered"]
        if c["strategy"] == "semantic_recall" and c["dropped"] is None
    ]
    assert {msg.id, call.id} <= set(placed)  # both ranked among the search's top 3
    why = [(d["reason"], d["detail"]) for d in ctx.trace["dropped"] if d["id"] == call.id]
    assert why == [("duplicate", f"a call of {msg.id}, shown with it")]
    recalled = _recalled(ctx)
    assert msg.id in recalled and call.id not in recalled
    assert len(recalled) == 3  # the next hit moved up into the call's place
