"""Time decay spares what is "explicitly linked" (seed 001, 6.2): an edge someone created on
purpose (the API, an event's explicit reference), never one a rule inferred from a name or a
co-occurrence. On every backend, through ContextBase; the assembled context's trace says
when each recalled memory was said."""

from __future__ import annotations

import time

import pytest

from ctxbase import ContextBase
from ctxbase.assemble.trace import explain_trace
from ctxbase.model import Relation
from ctxbase.store.rows import is_deliberate

DAY = 86400.0
DECAY = {"preset": "keyword", "time_decay_half_life_days": 30.0}


def _old_notes(cb: ContextBase, n: int) -> list[str]:
    then = time.time() - 90 * DAY
    return [
        cb.record(
            "assistant_message", session_id="s1", text=f"orders cache ttl note {i}", ts=then
        ).id
        for i in range(n)
    ]


def test_is_deliberate_tells_inferred_edges_from_made_ones() -> None:
    def rel(type_: str, source: str) -> Relation:
        return Relation(project_id="p", from_id="a", type=type_, to_id="b", source=source)

    assert is_deliberate(rel("REFERENCES", "human"))
    assert is_deliberate(rel("REFERENCES", "agent:coder-1"))
    assert is_deliberate(rel("REFERS_TO", "auto:capture"))  # an event's explicit reference
    assert not is_deliberate(rel("REFERENCES", "auto:mentions"))
    assert not is_deliberate(rel("REFERENCES", "ctxbase:mentions"))
    assert not is_deliberate(rel("NEXT", "auto:capture"))
    assert not is_deliberate(rel("MODIFIES", "auto:version"))


def test_only_deliberate_edges_spare_a_memory_from_decay(cb: ContextBase) -> None:
    notes = _old_notes(cb, 4)
    table = cb.upsert_entity("table", "orders_cache", "CREATE TABLE orders_cache (k text)")
    # inferred: a rule saw the name (as anchoring writes it), on two of the notes
    for n in notes[:2]:
        cb.upsert_relationship(n, "REFERENCES", table.id, source="auto:mentions")
    # made on purpose: through the API (the base's identity is the source) ...
    cb.upsert_relationship(notes[1], "REFERENCES", table.id)
    # ... and an explicit reference of a later event
    cb.record("user_message", session_id="s1", text="see that note", refers_to=[notes[2]])
    found = {c.item.owner_id: c for c in cb.search("orders cache ttl note", **DECAY).results}
    assert found[notes[0]].decay == pytest.approx(0.125, rel=1e-3)
    assert found[notes[0]].decay_spared is None
    assert found[notes[1]].decay == 1.0
    assert found[notes[1]].decay_spared == "linked by REFERENCES"
    assert found[notes[2]].decay_spared == "linked by REFERS_TO"
    assert found[notes[3]].decay == pytest.approx(0.125, rel=1e-3)
    # the store's filter is the same rule: the inferred edge of notes[0] is not read
    kept = cb.store.list_relations(
        cb.project, notes, types=["REFERENCES"], limit_per_node=1, deliberate_only=True
    )
    assert {r.from_id for r in kept} == {notes[1]}
    assert all(is_deliberate(r) for r in kept)
    everything = cb.store.list_relations(cb.project, notes, types=["REFERENCES"])
    assert {r.from_id for r in everything} == set(notes[:2])


def test_the_trace_says_when_each_recalled_memory_was_said(cb: ContextBase) -> None:
    said = time.time() - 90 * DAY
    old = cb.record(
        "assistant_message", session_id="s1", text="the redis cache ttl for orders is 60 s",
        ts=said,
    )  # fmt: skip
    ctx = cb.assemble_context(agent_role="coder", user_intent="redis cache ttl orders")
    entry = next(e for e in ctx.events if e["id"] == old.id)
    assert entry["said_at"] == pytest.approx(said)
    item = next(i for i in ctx.trace["layers"]["memory"]["items"] if i["id"] == old.id)
    assert item["said_at"] == pytest.approx(said)
    cand = next(c for c in ctx.trace["candidates"] if c["id"] == old.id)
    assert cand["said_at"] == pytest.approx(said)
    day = time.strftime("%Y-%m-%d", time.gmtime(said))
    assert f"said {day}" in explain_trace(ctx.trace)
