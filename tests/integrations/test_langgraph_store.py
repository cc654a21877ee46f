"""The LangGraph store over ctxbase, op by op beside LangGraph's own InMemoryStore, on both
storage backends; then a real LangGraph graph that reads and writes memories through it."""

from __future__ import annotations

import asyncio
import json
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from langgraph.store.base import BaseStore, Item
from langgraph.store.memory import InMemoryStore

import ctxbase
from ctxbase import ContextBase
from ctxbase.errors import ValidationError
from ctxbase.integrations.langgraph_store import ITEM_TYPE, CtxbaseStore


def view(result: Any) -> Any:
    """What must be equal across stores: everything but timestamps and scores."""
    if isinstance(result, Item):
        return (result.namespace, result.key, result.value)
    if isinstance(result, list):
        return [view(r) for r in result]
    return result


def both(stores: tuple[BaseStore, BaseStore], method: str, *args: Any, **kw: Any) -> Any:
    ours, theirs = (view(getattr(s, method)(*args, **kw)) for s in stores)
    assert ours == theirs, (method, args, kw)
    return ours


def _without_empty(store: InMemoryStore) -> InMemoryStore:
    for ns in [ns for ns, items in store._data.items() if not items]:
        del store._data[ns]
    return store


def keys(items: list[Any]) -> set[str]:
    return {i[1] for i in items}


def test_same_answers_as_in_memory_store(cb: ContextBase) -> None:
    stores = (CtxbaseStore(cb), InMemoryStore())
    for s in stores:
        s.put(("users", "u1", "memories"), "m1", {"text": "likes Redis", "stars": 3})
        s.put(("users", "u1", "memories"), "m2", {"text": "budget 50k", "stars": 5})
        s.put(("users", "u2", "memories"), "m1", {"text": "prefers SQL", "stars": 4})
        s.put(("users", "u1", "prefs"), "lang", {"text": "中文", "nested": {"a": 1}})
        s.put(("docs",), "readme", {"text": "install with pip", "tags": ["a", "b"]})

    got = both(stores, "get", ("users", "u1", "memories"), "m1")
    assert got == (("users", "u1", "memories"), "m1", {"text": "likes Redis", "stars": 3})
    assert both(stores, "get", ("users", "u1", "memories"), "missing") is None
    assert both(stores, "get", ("users", "u9", "memories"), "m1") is None

    # Overwrite, delete, and what the namespace listing says after each.
    for s in stores:
        s.put(("users", "u1", "memories"), "m1", {"text": "likes Redis a lot", "stars": 4})
        s.delete(("docs",), "readme")
        s.delete(("docs",), "readme")  # again: deleting what is not there is no error
        s.delete(("nowhere",), "never")
    assert both(stores, "get", ("users", "u1", "memories"), "m1")[2]["stars"] == 4
    assert both(stores, "get", ("docs",), "readme") is None
    # InMemoryStore keeps listing a namespace once its last item is gone; a namespace
    # here exists while it holds items (as in LangGraph's PostgresStore).
    assert ("docs",) in stores[1].list_namespaces()
    assert ("docs",) not in stores[0].list_namespaces()
    stores = (stores[0], _without_empty(stores[1]))
    assert both(stores, "list_namespaces") == [
        ("users", "u1", "memories"),
        ("users", "u1", "prefs"),
        ("users", "u2", "memories"),
    ]
    assert both(stores, "list_namespaces", prefix=("users", "u1")) == [
        ("users", "u1", "memories"),
        ("users", "u1", "prefs"),
    ]
    both(stores, "list_namespaces", suffix=("memories",))
    both(stores, "list_namespaces", prefix=("users", "*", "memories"))
    assert both(stores, "list_namespaces", max_depth=2) == [("users", "u1"), ("users", "u2")]
    both(stores, "list_namespaces", limit=1, offset=1)

    # Search without a query: the same items (the order is the store's own).
    def same_set(*args: Any, **kw: Any) -> set[str]:
        ours, theirs = (keys(view(s.search(*args, **kw))) for s in stores)
        assert ours == theirs, (args, kw)
        return ours

    assert same_set(("users",), limit=10) == {"m1", "m2", "lang"}
    assert same_set(("users", "u1", "memories"), filter={"stars": {"$gte": 4}}) == {"m1", "m2"}
    assert same_set(("users",), filter={"stars": {"$ne": 4}}) == {"m2", "lang"}
    assert same_set(("users",), filter={"nested": {"a": 1}}) == {"lang"}
    assert same_set(("users",), filter={"stars": 5, "text": "budget 50k"}) == {"m2"}
    assert same_set(("nothing",)) == set()
    pages = [keys(view(stores[0].search(("users",), limit=2, offset=o))) for o in (0, 2)]
    assert len(pages[0]) == 2 and len(pages[1]) == 2 and pages[0] | pages[1] == {"m1", "m2", "lang"}

    # A batch reads the state before its own writes, like InMemoryStore.
    from langgraph.store.base import GetOp, PutOp

    ns = ("users", "u1", "memories")
    ops = [PutOp(ns, "m9", {"text": "new"}), GetOp(ns, "m9"), PutOp(ns, "m9", {"text": "last"})]
    assert [view(r) for r in stores[0].batch(ops)] == [view(r) for r in stores[1].batch(ops)]
    both(stores, "get", ns, "m9")

    # The async API runs the same operations.
    ours = asyncio.run(stores[0].aget(ns, "m2"))
    assert ours is not None and ours.value["stars"] == 5


def test_search_by_meaning_and_visible_to_ctxbase(cb: ContextBase) -> None:
    store = CtxbaseStore(cb)
    store.put(("mem",), "a", {"text": "the orders query needs a Redis cache"})
    store.put(("mem",), "b", {"text": "the budget is below fifty thousand"})
    store.put(("mem",), "c", {"text": "Redis cache for orders", "secret": 1}, index=False)
    store.put(("other",), "d", {"text": "Redis cache for orders"})
    cb.wait_for_embeddings()
    hits = store.search(("mem",), query="Redis cache orders", limit=3)
    assert hits[0].key == "a" and hits[0].score is not None
    assert {h.key for h in hits} == {"a", "b", "c"}  # all of the namespace, matches first
    assert hits[-1].score is None  # not indexed: found by namespace, never by the query
    # The same memories are ctxbase entities: search and assembly see them.
    found = cb.search("Redis cache orders", filters=None)
    owners = [c.item.owner_id for c in found.results]
    assert store._entity_id(("mem",), "a") in owners
    assert len(cb.list_entities(type=ITEM_TYPE)) == 4


def test_ttl_expires_and_reading_refreshes(cb: ContextBase) -> None:
    store = CtxbaseStore(cb, ttl={"default_ttl": 1.0 / 60 / 2, "refresh_on_read": True})  # 0.5 s
    store.put(("t",), "short", {"v": 1})
    store.put(("t",), "long", {"v": 2}, ttl=10.0)
    store.put(("t",), "forever", {"v": 5}, ttl=None)  # LangGraph: None is no expiration
    assert store.get(("t",), "short") is not None
    time.sleep(0.7)
    assert store.get(("t",), "short") is None
    assert [i.key for i in store.search(("t",))] == ["forever", "long"]
    store.delete(("t",), "forever")
    assert store.list_namespaces() == [("t",)]
    # other agents do not see it either, before any sweep: ctxbase search and assembly
    gone = store._entity_id(("t",), "short")
    assert gone not in {c.item.owner_id for c in cb.search('"v": 1', top_k=20).results}
    ctx = cb.assemble_context(agent_role="coder", user_intent='"v": 1')
    assert gone not in json.dumps(ctx.messages)
    assert gone in {d["id"] for d in cb.get_trace(ctx.context_id)["dropped"]}
    assert store.sweep_ttl() == 1
    assert len(cb.list_entities(type=ITEM_TYPE)) == 1
    # Reading pushes the expiry out again.
    store.put(("t",), "kept", {"v": 3}, ttl=1.0 / 60)  # 1 s
    for _ in range(3):
        time.sleep(0.45)
        assert store.get(("t",), "kept") is not None
    assert store.get(("t",), "kept", refresh_ttl=False) is not None
    # a ttl that is no positive number of minutes is refused, nothing written
    for bad in (-1, 0, float("nan")):
        with pytest.raises(ValidationError, match="ttl: must be a positive number of minutes"):
            store.put(("t",), "bad", {"v": 4}, ttl=bad)
    assert store.get(("t",), "bad") is None
    with pytest.raises(Exception, match="TTL"):
        CtxbaseStore.supports_ttl = False
        try:
            store.put(("t",), "x", {"v": 1}, ttl=1.0)
        finally:
            CtxbaseStore.supports_ttl = True


def test_a_read_refreshing_the_expiry_keeps_a_put_made_since(cb: ContextBase) -> None:
    """Two agents on one project: A's get reads an item with a TTL, B puts a new value,
    then A's get pushes the expiry out (what `get` does, split so B's put lands between
    its two steps, as it does between processes). B's value stays; it wrote its own
    expiry. The refresh wrote the whole item back before: B's update was undone."""
    a, b = CtxbaseStore(cb), CtxbaseStore(cb)
    ns = ("users", "alice")
    b.put(ns, "prefs", {"food": "pizza"}, ttl=60)
    read = a._load(ns, "prefs")
    assert read is not None
    b.put(ns, "prefs", {"food": "sushi"}, ttl=60)
    a._refresh(read, True)
    got = b.get(ns, "prefs", refresh_ttl=False)
    assert got is not None and got.value == {"food": "sushi"}
    # with nothing written between, the refresh moves the expiry, and a put after it wins
    again = a._load(ns, "prefs")
    assert again is not None and again.expires_at is not None
    a._refresh(again, True)
    moved = a._load(ns, "prefs")
    assert moved is not None and moved.expires_at is not None
    assert moved.expires_at > again.expires_at and moved.value == {"food": "sushi"}
    b.put(ns, "prefs", {"food": "ramen"}, ttl=60)
    last = a.get(ns, "prefs")
    assert last is not None and last.value == {"food": "ramen"}


def test_an_explicit_refresh_wins_over_the_stores_default(cb: ContextBase) -> None:
    """BaseStore reads `refresh_on_read` only when the call says nothing."""
    store = CtxbaseStore(cb, ttl={"default_ttl": 1.0 / 60, "refresh_on_read": False})  # 1 s
    store.put(("t",), "a", {"x": 1})
    for _ in range(3):
        time.sleep(0.45)
        assert store.get(("t",), "a", refresh_ttl=True) is not None
    time.sleep(1.1)
    assert store.get(("t",), "a") is None  # the default: reading does not refresh


def test_an_item_put_again_after_it_expired_is_created_anew(cb: ContextBase) -> None:
    store = CtxbaseStore(cb)
    store.put(("t",), "a", {"x": 1}, ttl=1.0 / 60 / 4)  # 0.25 s
    first = store.get(("t",), "a", refresh_ttl=False)
    assert first is not None
    time.sleep(0.4)
    store.put(("t",), "a", {"x": 2})
    again = store.get(("t",), "a")
    assert again is not None and again.created_at > first.created_at  # as after a delete


def test_a_blank_query_and_values_that_are_no_json(cb: ContextBase) -> None:
    stores = (CtxbaseStore(cb), InMemoryStore())
    for s in stores:
        s.put(("a",), "k", {"text": "hello"})
    both(stores, "search", ("a",), query="   ")  # a blank query is no query, as LangGraph's
    ours = stores[0]
    for bad, why in (
        ({"when": datetime(2026, 1, 1)}, "Object of type datetime is not JSON serializable"),
        ({"raw": b"x"}, "Object of type bytes is not JSON serializable"),
        ({"n": float("nan")}, "Out of range float values are not JSON compliant"),
    ):
        with pytest.raises(ValidationError) as err:
            ours.put(("a",), "bad", bad)
        assert (err.value.field, err.value.message) == ("value", f"must be JSON data: {why}")
    with pytest.raises(ValidationError) as err:  # the limits name the value, not properties
        ours.put(("a",), "huge", {"v": "word " * 300_000})
    assert err.value.field == "value" and "over the limit of 1000000" in err.value.message
    assert ours.get(("a",), "bad") is None and ours.get(("a",), "huge") is None


def test_query_ranks_within_a_namespace_crowded_by_others(cb: ContextBase) -> None:
    store = CtxbaseStore(cb)
    for i in range(12):
        store.put(("noise",), f"n{i}", {"text": "Redis cache orders"})  # better matches
    store.put(("mine",), "a", {"text": "the orders service sits behind a Redis cache layer"})
    store.put(("mine",), "b", {"text": "unrelated budget"})
    hits = store.search(("mine",), query="Redis cache orders", limit=2)
    assert [h.key for h in hits] == ["a", "b"]
    assert hits[0].score is not None  # ranked by the query, not appended


def test_delete_hides_and_a_put_brings_the_key_back(cb: ContextBase) -> None:
    store = CtxbaseStore(cb)
    ns = ("mem", "alice")
    store.put(ns, "k1", {"text": "Alice wants invoices in EUR"})
    store.put(ns, "k2", {"text": "Alice deploys on Tuesdays"})
    gone = store._entity_id(ns, "k1")
    store.delete(ns, "k1")
    store.delete(ns, "k1")  # again: no error
    assert store.get(ns, "k1") is None
    assert [i.key for i in store.search(ns)] == ["k2"]
    assert [i.key for i in store.search(ns, query="invoices in EUR")] == ["k2"]
    owners = {c.item.owner_id for c in cb.search("invoices EUR", preset="keyword").results}
    assert gone not in owners  # other agents' searches do not find it either
    # hidden, not forgotten: restorable, and purged with the other soft-deleted rows
    assert cb.set_hidden([gone], True).unchanged == [gone]
    # a put to the key afterwards stores it afresh, visible everywhere again
    store.put(ns, "k1", {"text": "Alice wants invoices in CHF now"})
    item = store.get(ns, "k1")
    assert item is not None and item.value == {"text": "Alice wants invoices in CHF now"}
    assert {i.key for i in store.search(ns, query="invoices in CHF")} == {"k1", "k2"}
    owners = {c.item.owner_id for c in cb.search("invoices CHF", preset="keyword").results}
    assert gone in owners
    # a namespace whose every item is deleted is listed no more
    store.put(("scratch",), "x", {"v": 1})
    store.delete(("scratch",), "x")
    assert store.list_namespaces() == [ns]
    store.put(("scratch",), "x", {"v": 2})
    assert store.list_namespaces() == [ns, ("scratch",)]


def test_hard_delete_forgets_for_good(cb: ContextBase) -> None:
    store = CtxbaseStore(cb, hard_delete=True)
    store.put(("mem",), "k", {"text": "forget me"})
    eid = store._entity_id(("mem",), "k")
    store.delete(("mem",), "k")
    assert store.get(("mem",), "k") is None
    report = cb.set_hidden([eid], False)  # nothing left to restore: only its tombstone
    assert report.already_forgotten == [eid] and report.changed == 0
    store.delete(("mem",), "k")  # forgetting again is no error
    store.put(("mem",), "k", {"text": "new"})
    got = store.get(("mem",), "k")
    assert got is not None and got.value == {"text": "new"}


def test_other_searches_see_an_item_as_lines_of_its_value_not_json(tmp_path: Path) -> None:
    """What another agent's search (and an assembled prompt) shows of an item put with no
    index fields: one `path: text` line per leaf, a list of plain values on one line."""
    cb = ctxbase.open(str(tmp_path / "lines.db"), project="p", embedder="hash")
    try:
        store = CtxbaseStore(cb)
        value = {
            "food": "用户喜欢辣的川菜",
            "tags": ["food", "spicy"],
            "meta": {"source": "chat", "count": 3},
            "seen": [{"day": "Mon"}],
        }
        store.put(("users", "u1"), "m1", value)
        hits = cb.search("川菜", preset="keyword").results
        assert len(hits) == 1
        assert hits[0].item.text.splitlines()[1:] == [
            "food: 用户喜欢辣的川菜",
            "tags: food, spicy",
            "meta.source: chat",
            "meta.count: 3",
            "seen[0].day: Mon",
        ]
        found = store.search(("users",), query="spicy")
        assert [(i.key, i.value) for i in found] == [("m1", value)]  # the value, unchanged
    finally:
        cb.close()
