"""Writes that would break reads are refused at the door, on every backend; rows stored
before the checks existed stay readable; blank events match no search."""

from __future__ import annotations

import math
from typing import Any

import pytest

from ctxbase import ContextBase, NotFoundError, ValidationError
from ctxbase.assemble import state as facts
from ctxbase.model import Entity, Event, StateFact
from ctxbase.retrieve.indexing import entity_items, event_items
from ctxbase.store.base import ItemFilter
from ctxbase.validation import DEEP_JSON_PLACEHOLDER, MAX_JSON_DEPTH, MAX_QUERY_CHARS


def _deep(levels: int, as_dict: bool = False) -> Any:
    value: Any = 1
    for _ in range(levels):
        value = {"k": value} if as_dict else [value]
    return value


def _depth(value: Any) -> int:
    if isinstance(value, dict):
        return 1 + max((_depth(v) for v in value.values()), default=0)
    if isinstance(value, list):
        return 1 + max((_depth(v) for v in value), default=0)
    return 0


def _field(call: Any) -> str:
    return _refusal(call).field


def _refusal(call: Any) -> ValidationError:
    with pytest.raises(ValidationError) as exc:
        call()
    return exc.value


def test_events_refused_with_the_field_named(cb: ContextBase) -> None:
    capture = cb.capture
    assert _field(lambda: capture("tool_invocation", session_id="s", data=_deep(300))) == "data"
    assert _field(lambda: capture("user_message", session_id="s", text="x", ts=math.inf)) == "ts"
    assert _field(lambda: capture("user_message", session_id="s", text="x", ts=math.nan)) == "ts"
    assert _field(lambda: capture("tool_result", session_id="s", data={"v": math.nan})) == "data"
    meta = {"m": _deep(MAX_JSON_DEPTH + 1, as_dict=True)}
    assert _field(lambda: capture("user_message", session_id="s", text="x", metadata=meta)) == (
        "metadata"
    )
    assert _field(lambda: capture("user_message", session_id="s", text="")) == "text"
    assert _field(lambda: cb.record("user_message", session_id="s", text=" \n\t")) == "text"
    # blank text next to data is a real event (a tool call's arguments)
    assert cb.record("tool_invocation", session_id="s", text="", data={"tool": "ls"}).seq == 1
    # exactly at the depth limit is fine
    assert cb.record("tool_result", session_id="s", data=_deep(MAX_JSON_DEPTH - 1)).seq == 2
    cb.flush()
    assert len(cb.last_events("s")) == 2


def test_entities_state_and_search_refused(cb: ContextBase) -> None:
    deep = {"a": _deep(300)}
    assert _field(lambda: cb.upsert_entity("doc", "n", properties=deep)) == "properties"
    assert _field(lambda: cb.upsert_entity("doc", "n", version=2**63)) == "version"
    assert _field(lambda: cb.upsert_entity("doc", "   ")) == "name"
    bad_line = {"line_start": 2**64}
    assert _field(lambda: cb.upsert_entity("doc", "n", properties=bad_line)) == (
        "properties.line_start"
    )
    assert _field(lambda: cb.upsert_entity("doc", "n", properties={"line_end": "x"})) == (
        "properties.line_end"
    )
    set_fact = facts.set_fact
    assert _field(lambda: set_fact(cb, "k", _deep(300), scope_id="t")) == "value"
    assert _field(lambda: set_fact(cb, "k", [math.inf], scope_id="t")) == "value"
    assert _field(lambda: cb.search("\ud800 cache")) == "query"
    assert _field(lambda: cb.search("cache", filters=ItemFilter(line_from=2**63))) == (
        "filters.line_from"
    )
    assert _field(lambda: cb.search("cache", filters=ItemFilter(since=math.nan))) == (
        "filters.since"
    )
    assert _field(lambda: cb.search("  ")) == "query"
    assert cb.list_entities() == []
    assert facts.get_facts(cb, scope_id="t") == {}


@pytest.mark.parametrize("preset", ["keyword", "semantic", "hybrid", "hybrid_graph"])
def test_a_blank_event_matches_no_search(cb: ContextBase, preset: str) -> None:
    cb.record("user_message", session_id="s", text="the cache on orders is stale")
    cb.record("assistant_message", session_id="s", text="redis ttl is five minutes")
    # an empty turn of a transcript is kept, as a turn, but has nothing to be found by
    [blank] = cb.capture_messages([{"role": "user", "content": ""}], session_id="s2", sync=True)
    assert cb.get_event(blank).text == ""
    cb.wait_for_embeddings()
    for query in ["zebra quokka", "redis", "orders", "the", "?"]:
        owners = {h.item.owner_id for h in cb.search(query, preset=preset).results}
        assert blank not in owners, (query, preset)


def test_rows_stored_before_the_limits_read_back(cb: ContextBase) -> None:
    """What older versions let in (deep JSON, infinite times) reads back, capped."""
    pid = cb.project
    deep = _deep(300)
    event = Event(
        id="ev_old", project_id=pid, session_id="old", type="tool_result", data=deep, ts=math.inf
    )
    cb.store.write_events([event], [event_items(event)])
    entity = Entity(id="doc:old", project_id=pid, type="doc", name="old", properties={"p": deep})
    cb.store.upsert_entity(entity, entity_items(entity))
    cb.store.set_state(StateFact(project_id=pid, scope="task", scope_id="t", key="k", value=deep))

    [got] = cb.last_events("old")
    assert got.ts == 0.0  # the placeholder time, a finite number every client can read
    assert _depth(got.data) == MAX_JSON_DEPTH
    cut = got.data
    while isinstance(cut, list):
        cut = cut[0]
    assert cut == DEEP_JSON_PLACEHOLDER
    got.model_dump_json()  # what the REST service answers with
    [ent] = cb.list_entities()
    assert _depth(ent.properties) == MAX_JSON_DEPTH
    ent.model_dump_json()
    fact = facts.get_facts(cb, scope_id="t")["k"]
    assert _depth(fact.value) == MAX_JSON_DEPTH
    fact.model_dump_json()
    for hit in cb.search("old", preset="keyword").results:
        assert math.isfinite(hit.item.ts)


def test_an_event_without_text_or_data_says_text_is_missing(cb: ContextBase) -> None:
    for call in (
        lambda: cb.capture("user_message", session_id="s"),
        lambda: cb.record("user_message", session_id="s"),
        lambda: cb.capture("user_message", session_id="s", text=None),
    ):
        assert str(_refusal(call)) == "text: is missing"
    blank = _refusal(lambda: cb.record("user_message", session_id="s", text=" "))
    assert blank.field == "text" and "blank" in blank.message
    cb.flush()
    with pytest.raises(NotFoundError):  # nothing stored, not even the session
        cb.last_events("s")


def test_queries_and_intents_over_the_limit_are_refused(cb: ContextBase) -> None:
    cb.record("user_message", session_id="s", text="the cache on orders is stale")
    cb.wait_for_embeddings()
    over = "cache " * (MAX_QUERY_CHARS // 6) + "orders"
    assert len(over) > MAX_QUERY_CHARS
    err = _refusal(lambda: cb.search(over))
    assert err.field == "query"
    assert str(MAX_QUERY_CHARS) in err.message and str(len(over)) in err.message
    intent = _refusal(lambda: cb.assemble_context(agent_role="coder", user_intent=over))
    assert intent.field == "user_intent" and str(len(over)) in intent.message
    assert _field(lambda: cb.assemble_context(agent_role="coder", user_intent=" ")) == (
        "user_intent"
    )
    # exactly at the limit is a search like any other
    at_limit = over[len(over) - MAX_QUERY_CHARS :]
    assert len(at_limit) == MAX_QUERY_CHARS
    hits = cb.search(at_limit, preset="hybrid_graph").results
    assert [h.item.text for h in hits] == ["the cache on orders is stale"]
    ctx = cb.assemble_context(agent_role="coder", user_intent=at_limit, max_tokens=20_000)
    assert ctx.context_id
