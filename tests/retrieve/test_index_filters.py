"""Structured filters applied inside the in-memory indexes (retrieve/row_filter.py): the
same hits as checking every candidate in the store, with about `limit` candidates checked
there instead of several times as many, and the attributes kept current as items change."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from ctxbase import ContextBase
from ctxbase.anchor.entities import write_entity
from ctxbase.model import Entity
from ctxbase.retrieve import keyword_index
from ctxbase.retrieve.config import get_preset
from ctxbase.retrieve.filter_scope import FilterScope
from ctxbase.retrieve.keyword_index import KeywordIndex
from ctxbase.retrieve.search import Searcher
from ctxbase.retrieve.tokenize import query_terms
from ctxbase.store.base import ItemFilter, Store

WORDS = ["orders", "cache", "latency", "payment", "retry", "deploy", "schema", "缓存", "查询"]
QUERIES = ["orders cache", "payment retry", "deploy schema latency", "缓存 查询", "orders"]
OTHERS = ItemFilter(kinds=("event",), exclude_session_ids=("s0",))  # project_scope_fallback's
FILTERS = [
    OTHERS,
    ItemFilter(latest_only=True),
    ItemFilter(kinds=("event",)),
    ItemFilter(kinds=("entity", "chunk"), types=("document", "requirement")),
    ItemFilter(types=("assistant_message",), latest_only=True),
    ItemFilter(session_ids=("s1", "s3"), agent_ids=("a1",)),
    ItemFilter(agent_roles=("tester",)),
    ItemFilter(since=1_000_020.0, until=1_000_090.0, exclude_session_ids=("s2",)),
    ItemFilter(exclude_session_ids=("s1",), latest_only=True),
    ItemFilter(types=()),  # admits nothing, as the store's empty IN
    ItemFilter(session_ids=("no-such-session",)),
    # conditions the index does not hold: left to the store
    ItemFilter(kinds=("event",), path_prefix="src/"),
]


def _text(i: int) -> str:
    picked = [WORDS[(i * k + k * k) % len(WORDS)] for k in range(1, 2 + i % 5)]
    return f"{' '.join(picked)} note {i} " + "filler " * (i % 3)


def _fill(cb: ContextBase, n: int = 120) -> None:
    for i in range(n):
        cb.record(
            "user_message" if i % 3 else "assistant_message",
            session_id=f"s{i % 5}",
            agent_id=f"a{i % 3}",
            agent_role="tester" if i % 4 == 0 else "coder",
            text=_text(i),
            ts=1_000_000.0 + i,
        )
    for i in range(6):
        kind = "document" if i % 2 else "requirement"
        cb.upsert_entity(type=kind, name=f"doc {i}", text=f"{_text(i)} spec {i}", id=f"doc-{i}")
    # an older version, kept as not latest (as ingestion keeps a file's history)
    old = Entity(id="doc-1@v1", project_id=cb.project, type="document", name="doc 1")
    write_entity(cb, old.model_copy(update={"text": "orders cache before", "latest": False}))


class Checked:
    """Counts the ids the store was asked to check (`filter_item_ids(among=...)`)."""

    def __init__(self, store: Store) -> None:
        self.ids = 0
        self.calls: list[int] = []
        self.listings = 0  # filters listed whole (`limit=`)
        real = store.filter_item_ids

        def counted(project_id: str, flt: ItemFilter, **kw: object) -> set[str]:
            among = kw.get("among")
            if among is not None:
                self.ids += len(among)  # type: ignore[arg-type]
                self.calls.append(len(among))  # type: ignore[arg-type]
            elif kw.get("limit") is not None:
                self.listings += 1
            return real(project_id, flt, **kw)  # type: ignore[arg-type]

        self.real: Callable[..., set[str]] = real
        store.filter_item_ids = counted  # type: ignore[method-assign]


@pytest.fixture
def checked(cb: ContextBase) -> Iterator[Checked]:
    counter = Checked(cb.store)
    yield counter
    cb.store.filter_item_ids = counter.real  # type: ignore[method-assign]


def _store_checked(
    store: Store, pid: str, found: list[tuple[str, float]], flt: ItemFilter, limit: int
) -> list[tuple[str, float]]:
    """The reference: every candidate checked in the store, the first `limit` that pass."""
    ok = store.filter_item_ids(pid, flt, among=[i for i, _ in found]) if found else set()
    return [h for h in found if h[0] in ok][:limit]


def _same_ranking(got: list[tuple[str, float]], want: list[tuple[str, float]]) -> None:
    """Equal, but for the order of equal scores (pgvector orders ties its own way in each
    query) and which tied items the cut at `limit` kept."""
    assert [round(s, 6) for _, s in got] == [round(s, 6) for _, s in want]
    last = round(want[-1][1], 6) if want else None
    assert {i for i, s in got if round(s, 6) != last} == {i for i, s in want if round(s, 6) != last}


def test_filtered_keyword_hits_equal_the_store_checked_path(cb: ContextBase) -> None:
    _fill(cb)
    index = KeywordIndex(cb.store)
    nonempty = 0
    for flt in FILTERS:
        for query in QUERIES:
            terms = query_terms(query)
            ranked = index.search(cb.project, terms, 10_000)  # all, checked in the store
            for limit in (3, 10):
                want = _store_checked(cb.store, cb.project, ranked, flt, limit)
                assert index.search(cb.project, terms, limit, flt) == want, (flt, query)
                scope = FilterScope(cb.store, cb.project, flt, index.count_admitted)
                assert index.search(cb.project, terms, limit, flt, scope) == want, (flt, query)
                nonempty += bool(want)
    assert nonempty > 60  # most filters find something
    assert index.reloads == 1


def test_filtered_vector_hits_equal_the_store_checked_path(
    cb: ContextBase, monkeypatch: pytest.MonkeyPatch
) -> None:
    _fill(cb)
    cb.wait_for_embeddings()
    searcher = cb.searcher
    assert searcher.embedder is not None
    monkeypatch.setattr(FilterScope, "LISTED", 2)  # every filter here is checked on candidates
    cfg = get_preset("hybrid", candidates=7, min_similarity=-1.0)
    searcher.keywords.search(cb.project, ["orders"], 1)  # loaded, as a hybrid search does
    broad = 0
    for flt in FILTERS:
        scope = FilterScope(cb.store, cb.project, flt)
        if scope.ids is not None:  # two items or fewer: listed, no candidates checked
            continue
        broad += 1
        for query in QUERIES:
            got = searcher._semantic_hits(cb.project, query, scope, cfg)
            everything = searcher.vectors.search(
                cb.project, searcher.embedder.name, searcher.query_vector(query), 10_000
            )
            _same_ranking(got, _store_checked(cb.store, cb.project, everything, flt, 7))
    assert broad >= 9


def test_store_checks_are_bounded_by_the_limit(cb: ContextBase, checked: Checked) -> None:
    """A broad filter checked about `limit` candidates in the store, not 4 x limit + 64
    (keyword) or 4 x limit (vector) as before the index held the attributes."""
    _fill(cb, 300)
    cb.wait_for_embeddings()
    searcher = cb.searcher
    index = searcher.keywords
    limit = 20
    for flt in (OTHERS, ItemFilter(latest_only=True), ItemFilter(kinds=("event",))):
        for query in QUERIES:
            checked.ids = 0
            hits = index.search(cb.project, query_terms(query), limit, flt)
            assert len(hits) == limit
            assert checked.ids <= limit + 8, (flt, query)
    cfg = get_preset("hybrid", candidates=limit, min_similarity=-1.0)
    scope = FilterScope(cb.store, cb.project, OTHERS)
    for query in QUERIES:
        checked.ids = 0
        assert len(searcher._semantic_hits(cb.project, query, scope, cfg)) == limit
        assert checked.ids <= limit + 8, query
    # the whole search, keyword and vector, with its filter scope
    checked.ids, checked.calls = 0, []
    resp = cb.search("orders cache", config=get_preset("hybrid", candidates=limit), filters=OTHERS)
    assert resp.results and all(c.item.session_id != "s0" for c in resp.results)
    assert checked.calls and max(checked.calls) <= limit + 8


def test_a_filter_far_above_the_listing_size_is_not_listed(
    cb: ContextBase, checked: Checked, monkeypatch: pytest.MonkeyPatch
) -> None:
    _fill(cb, 60)
    monkeypatch.setattr(FilterScope, "LISTED", 10)
    index = KeywordIndex(cb.store)
    events = ItemFilter(kinds=("event",))
    assert FilterScope(cb.store, cb.project, events, index.count_admitted).ids is None
    assert checked.listings == 1  # the index was not loaded: it cannot tell, so listed
    index.search(cb.project, ["orders"], 1)
    assert index.count_admitted(cb.project, events) == 60
    assert FilterScope(cb.store, cb.project, events, index.count_admitted).ids is None
    assert checked.listings == 1  # 60 > 2 x 10 by the index: not listed
    few = ItemFilter(kinds=("event",), session_ids=("s1",), agent_ids=("a1",))
    assert index.count_admitted(cb.project, few) == 4
    assert len(FilterScope(cb.store, cb.project, few, index.count_admitted).ids or ()) == 4
    assert checked.listings == 2  # few by the index: listed from the store as before
    # a condition the index does not hold: it cannot tell
    assert index.count_admitted(cb.project, ItemFilter(kinds=("event",), repos=("r",))) is None


def test_the_attributes_follow_what_changes(cb: ContextBase, second: ContextBase) -> None:
    """An event's kind, type, session, agent and time never change once stored; an entity's
    type and latest flag do (written again through another connection here): its units are
    stored again, the index marks the old rows dead, appends the new ones and filters by the
    new attributes."""
    _fill(cb, 30)
    index = KeywordIndex(cb.store)
    docs = ItemFilter(types=("document",))
    reqs = ItemFilter(types=("requirement",))
    latest = ItemFilter(latest_only=True)

    def found(flt: ItemFilter, words: str = "wombat") -> set[str]:
        return {i for i, _ in index.search(cb.project, query_terms(words), 50, flt)}

    assert found(docs) == set()
    second.upsert_entity(type="document", name="zoo", text="the wombat spec", id="zoo")
    assert found(docs) == {"zoo"} and found(reqs) == set()
    assert index.reloads == 1  # appended
    # written over in place: a kept version (zoo@v1, a document) would be another item
    second.upsert_entity(
        type="requirement", name="zoo", text="the wombat spec", id="zoo", keep_history=False
    )
    assert index.screen(cb.project, ["zoo"], reqs) is None  # behind the store: not used
    assert found(reqs) == {"zoo"} and found(docs) == set()
    # current again: ids it does not hold pass, to be checked in the store
    assert index.screen(cb.project, ["zoo", "not-held"], reqs) == [True, True]
    assert index.screen(cb.project, ["zoo", "not-held"], docs) == [False, True]
    assert index.reloads == 1  # stored again: the old rows dead, the new ones appended
    # superseded: the same entity written again as not latest
    zoo = second.store.get_entities(cb.project, ["zoo"])[0]
    assert found(latest) == {"zoo"}
    write_entity(second, zoo.model_copy(update={"latest": False}))
    assert found(latest) == set() and found(reqs) == {"zoo"}
    assert index.reloads == 1
    # a new event of a new session, appended: its session is held at once
    ev = second.record("user_message", session_id="s-new", agent_id="zed", text="wombat here")
    assert found(ItemFilter(session_ids=("s-new",))) == {ev.id}
    assert ev.id not in found(ItemFilter(exclude_session_ids=("s-new",)))
    assert found(ItemFilter(agent_ids=("zed",), kinds=("event",))) == {ev.id}
    # hidden through the other connection: gone from filtered searches too
    second.soft_delete([ev.id])
    assert ev.id not in found(ItemFilter(kinds=("event",)))


def test_a_stale_screen_still_defers_to_the_store(cb: ContextBase) -> None:
    """The screen passes what it last read; the store check still drops a row hidden since
    (an index that missed the change, as if it read the generation just before it)."""
    import dataclasses

    _fill(cb, 30)
    target = cb.record("user_message", session_id="s1", text="an okapi at the gate")
    index = KeywordIndex(cb.store)
    flt = ItemFilter(kinds=("event",), exclude_session_ids=("s0",))
    assert [i for i, _ in index.search(cb.project, ["okapi"], 5, flt)] == [target.id]
    cb.soft_delete([target.id])
    stale = index._cache[cb.project]
    index._cache[cb.project] = dataclasses.replace(
        stale, generation=cb.store.index_generation(cb.project)
    )
    assert index.search(cb.project, ["okapi"], 5, flt) == []


def test_a_listed_filter_scores_only_its_items(
    cb: ContextBase, second: ContextBase, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A filter listed whole (a session, some entity types) scores its own items' postings,
    not every posting of the query's terms, with the same hits (appended postings too)."""
    monkeypatch.setattr(keyword_index, "_TAIL_POSTINGS", 100_000)  # appends stay unmerged
    _fill(cb, 150)
    index = KeywordIndex(cb.store)
    index.search(cb.project, ["orders"], 1)
    for i in range(12):
        second.record("user_message", session_id="s-tail", text=_text(i), agent_id=f"a{i % 3}")
    filters = [
        ItemFilter(session_ids=("s1",)),
        ItemFilter(session_ids=("s-tail", "s2"), agent_ids=("a1", "a2")),
        ItemFilter(kinds=("entity", "chunk")),
        ItemFilter(types=("document",), latest_only=True),
    ]
    fewer = 0
    for flt in filters:
        scope = FilterScope(cb.store, cb.project, flt)
        assert scope.ids is not None
        for query in QUERIES:
            terms = query_terms(query)
            ranked = index.search(cb.project, terms, 10_000)
            for mode in ("or", "and"):
                everything = index.scored
                index.search(cb.project, terms, 10, mode=mode)
                everything = index.scored - everything
                before = index.scored
                got = index.search(cb.project, terms, 10, flt, scope, mode=mode)
                scored = index.scored - before
                if mode == "or":
                    assert got == _store_checked(cb.store, cb.project, ranked, flt, 10)
                else:
                    anded = index.search(cb.project, terms, 10_000, mode="and")
                    assert got == _store_checked(cb.store, cb.project, anded, flt, 10)
                assert scored <= len(scope.ids) * len(set(terms))
                fewer += scored < everything
    assert fewer > 30
    assert index.reloads == 1 and index._cache[cb.project].postings.tail_docs.size


def test_graph_expansion_screens_its_nodes_before_the_store(
    cb: ContextBase, checked: Checked, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Nodes the graph reaches under a broad filter: the index's attributes rule out what
    they can, the store checks the rest; the same results as checking every node there."""
    _fill(cb, 150)
    cb.wait_for_embeddings()
    monkeypatch.setattr(FilterScope, "LISTED", 2)  # checked on candidates, never listed
    cfg = get_preset("hybrid_graph", candidates=20)
    # session neighbours of the seeds are of both roles: some fail the filter
    flt = ItemFilter(agent_roles=("coder",))
    cb.search("orders", config=cfg, filters=flt)  # loads the index: its screen is current

    def run() -> tuple[list[tuple[str, float, str | None]], int]:
        checked.ids = 0
        resp = cb.search("orders cache latency", config=cfg, filters=flt)
        return [(c.item_id, c.score, c.graph_via) for c in resp.considered], checked.ids

    screened, asked = run()
    # the former way: every node the graph reached checked in the store
    monkeypatch.setattr(Searcher, "_screen", lambda self, pid, ids, allowed: [True] * len(ids))
    unscreened, asked_before = run()
    assert screened == unscreened
    assert any(via for _, _, via in screened)  # the graph added candidates
    found = cb.store.get_items(cb.project, [i for i, *_ in screened])
    assert {it.agent_role for it in found} == {"coder"}
    assert asked < asked_before, (asked, asked_before)
