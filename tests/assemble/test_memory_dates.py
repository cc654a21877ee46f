"""Recalled memory is dated: each item's label shows the UTC day it was said (an event) or
last changed (an entity), so a reader given two memories that disagree can tell the later
one, and a "last Tuesday" said back then can be placed."""

from __future__ import annotations

import re
import time
from datetime import UTC, datetime
from typing import Any

import pytest

from ctxbase import ContextBase
from ctxbase.assemble.gatherer import Gatherer
from ctxbase.assemble.memory_candidate import entity_cand, event_cand, label_day, label_for
from ctxbase.assemble.memory_section import MEMORY_HEADER
from ctxbase.assemble.policy_loading import load_default_policies

DAY = 86400.0
OLD = "The billing database runs on MySQL 8."
NEW = "We moved the billing database to PostgreSQL 18; MySQL is gone."
OLD_DECISION = "We decided to keep invoices in MySQL."


def _memory(ctx: Any) -> str:
    (memory,) = [m["content"] for m in ctx.messages if m["content"].startswith("Retrieved")]
    return memory


def test_label_day_is_the_utc_day_and_empty_when_unknown() -> None:
    # 23:30 UTC on 8 May 2023 is the 9th east of UTC+1: the label says UTC's day
    at = datetime(2023, 5, 8, 23, 30, tzinfo=UTC).timestamp()
    assert label_day(at) == "2023-05-08"
    assert label_day(None) == ""
    assert label_day(1e20) == ""  # past any calendar: no day rather than an error
    assert label_for("user_message", "ev_1", day="2023-05-08") == "[message ev_1, 2023-05-08]"
    assert (
        label_for("tool_result", "ev_2", answers="ev_1 run_sql", day="2023-05-08")
        == "[tool result ev_2 of ev_1 run_sql, 2023-05-08]"
    )
    assert label_for("document", "doc_1", "Redis 规范") == "[document doc_1] Redis 规范"


def test_two_memories_that_disagree_each_show_their_day(cb: ContextBase) -> None:
    now = time.time()
    old = cb.capture("user_message", session_id="march", text=OLD, ts=now - 40 * DAY)
    new = cb.capture("user_message", session_id="may", text=NEW, ts=now - 3 * DAY)
    cb.flush()
    cb.wait_for_embeddings()
    ctx = cb.assemble_context(
        agent_role="coder", user_intent="Which database does billing use?", session_id="today"
    )
    memory = _memory(ctx)
    assert memory.startswith(MEMORY_HEADER) and "date, UTC" in MEMORY_HEADER
    assert f"[message {old}, {label_day(now - 40 * DAY)}]\n{OLD}" in memory
    assert f"[message {new}, {label_day(now - 3 * DAY)}]\n{NEW}" in memory
    assert label_day(now - 40 * DAY) < label_day(now - 3 * DAY)  # ISO days sort as they read
    # the trace still has the minute; the prompt spends a day's few tokens per item
    said = {e["id"]: e["said_at"] for e in ctx.events}
    assert said[old] == pytest.approx(now - 40 * DAY)


def test_an_entity_shows_the_day_it_last_changed(cb: ContextBase) -> None:
    cb.upsert_entity("document", "Redis 缓存规范", "缓存过期时间必须是整数秒。", id="doc_1")
    cb.wait_for_embeddings()
    ctx = cb.assemble_context(agent_role="coder", user_intent="Redis 缓存规范怎么要求过期时间")
    memory = _memory(ctx)
    (day,) = re.findall(r"\[document doc_1, (\d{4}-\d\d-\d\d)\] Redis 缓存规范", memory)
    assert day == label_day(cb.get_entity("doc_1").updated_at)


FILLER = (
    " Also, the lunch order for Friday is pizza and the office plants need water. Remember to"
    " update the wiki pages about onboarding and the holiday calendar for everyone in the team."
)


def test_a_statement_stands_in_for_its_message_when_the_message_does_not_fit(
    cb: ContextBase,
) -> None:
    """Two long messages that differ in one word, room for one and a bit: both are search
    hits (one word changed is another statement, not a copy), and what the newer one
    decided reaches the prompt, dated as it was said: the message cut where it still says
    it, or else the decision cut from it, left out as the message's repeat, in its place."""
    now = time.time()
    said = {
        cb.capture(
            "user_message",
            session_id=session,
            text=f"Good morning. We decided to use {db} for the billing database.{FILLER}",
            ts=now - days * DAY,
        ): days
        for session, db, days in (("march", "MySQL", 40), ("may", "PostgreSQL", 3))
    }
    cb.flush()
    cb.wait_for_embeddings()
    found = cb.search("billing database decision", top_k=10)
    assert set(said) <= {h.id for h in found.results}  # neither folded into the other
    ctx = cb.assemble_context(
        agent_role="coder", user_intent="billing database decision", max_tokens=240
    )
    memory = _memory(ctx)
    trace = cb.get_trace(ctx.context_id)
    assert "We decided to use MySQL for the billing database." in memory
    assert "We decided to use PostgreSQL for the billing database." in memory
    (newer,) = [e for e, days in said.items() if days == 3]
    decision = next(
        e.id for e in cb.list_entities(type="decision") if e.properties.get("event_id") == newer
    )
    day = label_day(now - 3 * DAY)
    assert f"[message {newer}, {day}]" in memory or f"[decision {decision}, {day}]" in memory
    if decision in memory:  # standing in: not also listed as left out
        assert not any(d["id"] == decision for d in trace["dropped"])
        assert any(f"{decision}, which says part of it, is shown" in n for n in trace["notes"])


def test_stand_ins_come_back_only_for_what_the_prompt_no_longer_says(cb: ContextBase) -> None:
    """The gatherer keeps what it left out as another item's repeat: the budget leaving
    that item out, or cutting it before the repeated words, brings it back, ranked just
    above the item; an item shown far enough to say it brings nothing back."""
    text = f"Good morning. We decided to use PostgreSQL for the billing database.{FILLER}"
    message = cb.capture("user_message", session_id="may", text=text)
    cb.flush()
    (decision,) = [
        e for e in cb.list_entities(type="decision") if e.properties.get("event_id") == message
    ]
    (event,) = cb.store.get_events(cb.project, [message])

    def gathered() -> Gatherer:
        policy = load_default_policies().default
        g = Gatherer(cb, cb.project, policy, session_id="x", intent="q", exclude=set())
        assert g.add(event_cand(event, 0.5, "semantic_recall", "hit"), event)
        assert g.add(entity_cand(decision, 0.9, "semantic_recall", "hit"))
        g.drop_repeats()
        assert list(g.cands) == [message]  # the message says the decision
        return g

    g = gathered()  # cut where it still says it: nothing comes back
    assert g.stand_in_for([], {message: text[:80]}) == []
    assert list(g.cands) == [message]
    g = gathered()  # cut before the decision's words: the decision, just above the message
    assert g.stand_in_for([], {message: "Good morning. …"}) == [(message, decision.id)]
    assert g.cands[decision.id].score > g.cands[message].score == 0.9
    assert not any(d["id"] == decision.id for d in g.dropped)
    g = gathered()  # left out whole
    assert g.stand_in_for([message], {}) == [(message, decision.id)]
    assert g.stand_in_for([message], {}) == []  # once


def test_a_statement_is_dated_as_its_message_was_said(cb: ContextBase) -> None:
    """A conversation captured with its own times (imported, replayed): the decision
    anchored from a message 40 days old is dated 40 days back in its properties and its
    memory label (memory_candidate.entity_said_at); its search item keeps the time it was
    anchored."""
    said = time.time() - 40 * DAY
    message = cb.capture("user_message", session_id="old", text=OLD_DECISION, ts=said)
    cb.flush()
    (decision,) = [
        e for e in cb.list_entities(type="decision") if e.properties.get("event_id") == message
    ]
    assert decision.properties["said_at"] == pytest.approx(said)
    assert decision.updated_at > said + 39 * DAY  # anchored now
    (item,) = cb.store.get_items(cb.project, [decision.id])
    assert item.ts == pytest.approx(decision.updated_at)
    assert entity_cand(decision, 1.0, "s", "r").label().endswith(f", {label_day(said)}]")
    # an entity of no message is dated by its last change
    doc = cb.upsert_entity("document", "Runbook", "Restart the billing workers first.")
    assert entity_cand(doc, 1.0, "s", "r").said_at == doc.updated_at
