"""The in-memory BM25 keyword index: same hits and order as the store's keyword query, kept
in step with writes from any connection, and never returning what the store would not."""

from __future__ import annotations

import dataclasses

import pytest

from ctxbase import ContextBase
from ctxbase.retrieve import keyword_index
from ctxbase.retrieve.keyword_index import KeywordIndex
from ctxbase.retrieve.search import FilterScope
from ctxbase.retrieve.tokenize import fts_match_expression, query_terms
from ctxbase.store.base import SCHEMA_VERSION, ItemFilter, Store

WORDS = [
    "orders",
    "cache",
    "invalidation",
    "latency",
    "payment",
    "retry",
    "deploy",
    "pipeline",
    "rollback",
    "schema",
    "migration",
    "index",
    "tokenizer",
    "postgres",
    "sqlite",
    "vector",
    "embedding",
    "budget",
    "session",
    "agent",
    "库存",
    "同步",
    "缓存",
    "查询",
]

QUERIES = [
    "orders cache",
    "payment retry rollback",
    "deploy",
    "schema migration index",
    "库存 缓存",
    "vector embedding budget tokenizer",
    "latency",
    "nothing matches this zzzqqq",
]


def _text(i: int) -> str:
    # distinct mixes and lengths, so few scores tie
    picked = [WORDS[(i * k + k * k) % len(WORDS)] for k in range(1, 2 + i % 6)]
    return f"{' '.join(picked)} note {i} " + "filler " * (i % 4)


def _fill(cb: ContextBase, n: int = 60) -> list[str]:
    ids = []
    for i in range(n):
        ids.append(
            cb.record(
                "user_message" if i % 3 else "assistant_message",
                session_id=f"s{i % 4}",
                agent_id=f"a{i % 3}",
                text=_text(i),
                ts=1_000_000.0 + i,
            ).id
        )
    return ids


def _fts(
    store: Store, pid: str, query: str, limit: int, flt: ItemFilter | None = None
) -> list[tuple[str, float]]:
    match = fts_match_expression(query_terms(query), "or")
    if match is None:
        return []
    return [(h.item_id, h.score) for h in store.keyword_search(pid, match, flt, limit)]


def _grouped(hits: list[tuple[str, float]]) -> list[tuple[float, frozenset[str]]]:
    """Hits as (score, ids of that score) in rank order: tied items may come in any order."""
    groups: list[tuple[float, set[str]]] = []
    for item_id, score in hits:
        if groups and abs(groups[-1][0] - score) <= 1e-6 * max(1.0, abs(score)):
            groups[-1][1].add(item_id)
        else:
            groups.append((score, {item_id}))
    return [(round(s, 4), frozenset(ids)) for s, ids in groups]


def _same(got: list[tuple[str, float]], want: list[tuple[str, float]]) -> None:
    # the cut at `limit` may split a group of ties: compare whole groups before it
    g, w = _grouped(got), _grouped(want)
    assert len(got) == len(want)
    assert g[:-1] == w[:-1]
    assert g[-1][0] == w[-1][0] if g else not w


def test_ranking_equals_the_store_query(cb: ContextBase) -> None:
    _fill(cb)
    index = KeywordIndex(cb.store)
    for query in QUERIES:
        for limit in (5, 20, 100):
            got = index.search(cb.project, query_terms(query), limit)
            want = _fts(cb.store, cb.project, query, limit)
            _same(got, want)
            for (_, a), (_, b) in zip(got, want, strict=True):
                assert a == pytest.approx(b, rel=1e-5)
    assert index.search(cb.project, query_terms("orders"), 10)  # not vacuous


def test_filters_give_the_same_hits_as_the_store_query(cb: ContextBase) -> None:
    _fill(cb)
    index = KeywordIndex(cb.store)
    filters = [
        ItemFilter(types=("assistant_message",)),
        ItemFilter(session_ids=("s1",)),
        ItemFilter(agent_ids=("a2",)),
        ItemFilter(since=1_000_010.0, until=1_000_040.0),
        ItemFilter(exclude_session_ids=("s0", "s2")),
    ]
    for flt in filters:
        for query in QUERIES[:6]:
            want = _fts(cb.store, cb.project, query, 7, flt)
            assert want or query == "deploy"
            # the filter checked on candidates, and the filter listed whole
            _same(index.search(cb.project, query_terms(query), 7, flt), want)
            scope = FilterScope(cb.store, cb.project, flt)
            # listed whole, except a filter that only leaves sessions out (checked on candidates)
            assert (scope.ids is None) == (flt.exclude_session_ids is not None)
            _same(index.search(cb.project, query_terms(query), 7, flt, scope), want)


def test_search_uses_the_index_and_the_store_query_on_request(cb: ContextBase) -> None:
    _fill(cb)
    flt_hits = cb.search("payment retry", preset="keyword", keyword_index=False, top_k=5)
    idx_hits = cb.search("payment retry", preset="keyword", top_k=5)
    assert [r.item_id for r in idx_hits.results] == [r.item_id for r in flt_hits.results]
    assert cb.searcher.keywords.reloads == 1  # the default path loaded the index


def test_a_write_through_another_connection_is_found_next(
    cb: ContextBase, second: ContextBase, monkeypatch: pytest.MonkeyPatch
) -> None:
    # appended postings are merged into the sorted ones past a few dozen (here)
    monkeypatch.setattr(keyword_index, "_TAIL_POSTINGS", 48)
    _fill(cb, 20)
    index = KeywordIndex(cb.store)
    assert index.search(cb.project, ["quokka"], 5) == []
    loaded = index._cache[cb.project].postings.docs.size
    new = second.record("user_message", session_id="s9", text="a quokka in the pipeline")
    hits = index.search(cb.project, query_terms("quokka pipeline"), 5)
    assert hits[0][0] == new.id
    assert index.reloads == 1  # appended, not reloaded
    assert index._cache[cb.project].postings.tail_docs.size  # held unsorted
    # many appends, merged into the sorted postings, keep the same answers as the store
    for i in range(30):
        second.record("user_message", session_id="s9", text=f"quokka {i} " + _text(i))
    for query in ("quokka", "quokka orders cache", "pipeline"):
        want = _fts(cb.store, cb.project, query, 40)
        _same(index.search(cb.project, query_terms(query), 40), want)
    assert index.reloads == 1
    assert index._cache[cb.project].postings.docs.size > loaded  # merged on the way


def test_forgotten_and_hidden_items_are_never_returned(
    cb: ContextBase, second: ContextBase
) -> None:
    _fill(cb, 20)
    gone = cb.record("user_message", session_id="s1", text="the wombat ate the orders")
    hidden = cb.record("user_message", session_id="s2", text="a second wombat, quietly")
    index = KeywordIndex(cb.store)
    assert {i for i, _ in index.search(cb.project, ["wombat"], 10)} >= {gone.id, hidden.id}
    cb.forget(event_ids=[gone.id])
    second.soft_delete([hidden.id])  # another connection: this index still holds it
    found = {i for i, _ in index.search(cb.project, ["wombat"], 10)}
    assert gone.id not in found and hidden.id not in found
    assert found == {i for i, _ in _fts(cb.store, cb.project, "wombat", 10)}
    assert index.reloads == 1  # marked dead in place, not read again


def test_a_stale_index_is_checked_against_the_store(cb: ContextBase) -> None:
    _fill(cb, 20)
    target = cb.record("user_message", session_id="s1", text="an okapi at the gate")
    index = KeywordIndex(cb.store)
    assert index.search(cb.project, ["okapi"], 5)[0][0] == target.id
    cb.soft_delete([target.id])
    # an index that missed the change (as if it read the generation just before it)
    stale = index._cache[cb.project]
    index._cache[cb.project] = dataclasses.replace(
        stale, generation=cb.store.index_generation(cb.project)
    )
    assert index.search(cb.project, ["okapi"], 5) == []
    # and one project's index never answers for another
    assert index.search("another-project", ["okapi"], 5) == []


def test_forget_drops_the_postings(cb: ContextBase) -> None:
    _fill(cb, 10)
    event = cb.record("user_message", session_id="s1", text="a capybara")
    cb.search("capybara", preset="keyword")
    report = cb.forget(event_ids=[event.id])
    assert report.as_dict()  # the forget ran
    assert cb.project not in cb.searcher.keywords._cache
    assert cb.search("capybara", preset="keyword").results == []


def test_a_version_4_postgres_database_is_upgraded_for_the_index(pg_url: str) -> None:
    import uuid

    import psycopg
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    from ctxbase.store.postgres import PostgresStore

    name = f"kw_upgrade_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(pg_url, autocommit=True) as admin:
        admin.execute(f"CREATE DATABASE {name}")
    url = make_conninfo(**{**conninfo_to_dict(pg_url), "dbname": name})
    try:
        with ContextBase(PostgresStore(url, max_size=2), project="p", embedder=None) as cb:
            old = cb.record("user_message", session_id="s", text="an aardvark from before")
        with psycopg.connect(url, autocommit=True) as conn:  # back to what version 4 had
            conn.execute("DROP TRIGGER items_removed ON items")
            conn.execute("DROP TRIGGER items_changed ON items")
            conn.execute("DROP FUNCTION ctxbase_items_removed()")
            conn.execute("DROP TABLE item_removals")
            conn.execute("DROP TABLE keyword_removed")
            conn.execute("ALTER TABLE items DROP COLUMN change_seq")
            conn.execute("DROP SEQUENCE items_change_seq")
            conn.execute("UPDATE meta SET value='4' WHERE key='schema_version'")
        with ContextBase(PostgresStore(url, max_size=2), project="p", embedder=None) as cb:
            assert cb.store.schema_version() == SCHEMA_VERSION
            index = KeywordIndex(cb.store)
            assert [i for i, _ in index.search("p", ["aardvark"], 5)] == [old.id]
            new = cb.record("user_message", session_id="t", text="an aardvark from after")
            assert {i for i, _ in index.search("p", ["aardvark"], 5)} == {old.id, new.id}
            cb.soft_delete([old.id])
            assert [i for i, _ in index.search("p", ["aardvark"], 5)] == [new.id]
            assert index.reloads == 1  # the write appended, the delete marked in place
    finally:
        with psycopg.connect(pg_url, autocommit=True) as admin:
            admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
