"""The storage contract, part 2: keyword search with filters, item filters, vectors, and the
same keyword ranking on SQLite and PostgreSQL."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from contract_helpers import item, make_event, match, write

from ctxbase import ContextBase
from ctxbase.model import Entity, Event
from ctxbase.store.base import ItemFilter, Store
from ctxbase.store.postgres import PostgresStore
from ctxbase.store.sqlite import SQLiteStore

DOCS = [
    ("我们用缓存加速查询，缓存命中率很高", "s1", "alice", "coder", "user_message", 100.0),
    (
        "the caching layer speeds up every query",
        "s1",
        "bob",
        "reviewer",
        "assistant_message",
        200.0,
    ),
    ("数据库连接池的配置需要调整", "s2", "alice", "coder", "tool_result", 300.0),
    ("user_id is the primary key of the users table", "s2", "carol", None, "user_message", 400.0),
    ("预算控制在五万以内，缓存服务器另算", "s3", "bob", "reviewer", "user_message", 500.0),
]


def _load(store: Store, project_id: str) -> list[str]:
    evs = [
        make_event(project_id, sid, text, agent_id=agent, agent_role=role, type=typ, ts=ts)
        for text, sid, agent, role, typ, ts in DOCS
    ]
    write(store, *evs)
    return [e.id for e in evs]


def _hits(store: Store, project_id: str, q: str, flt: ItemFilter | None = None) -> list[str]:
    return [h.item_id for h in store.keyword_search(project_id, match(q), flt, 10)]


def test_keyword_search_chinese_and_english(store: Store, project_id: str) -> None:
    ids = _load(store, project_id)
    assert set(_hits(store, project_id, "缓存")) == {ids[0], ids[4]}
    assert _hits(store, project_id, "缓存")[0] == ids[0]  # two occurrences rank first
    assert _hits(store, project_id, "cache") == [ids[1]]  # stemmed: caching ~ cache
    assert _hits(store, project_id, "user_id") == [ids[3]]
    assert _hits(store, project_id, "连接池") == [ids[2]]
    assert _hits(store, project_id, "nothing-like-this") == []
    hits = store.keyword_search(project_id, match("缓存"), None, 10)
    assert all(h.score > 0 for h in hits)
    assert hits == sorted(hits, key=lambda h: -h.score)
    assert len(store.keyword_search(project_id, match("缓存 query"), None, 1)) == 1


def test_keyword_search_and_mode(store: Store, project_id: str) -> None:
    ids = _load(store, project_id)
    assert _hits(store, project_id, "缓存 预算") != [ids[4]]  # OR: both documents
    got = [h.item_id for h in store.keyword_search(project_id, match("缓存 预算", "and"), None, 9)]
    assert got == [ids[4]]


@pytest.mark.parametrize(
    ("flt", "expected"),
    [
        (ItemFilter(session_ids=("s3",)), [4]),
        (ItemFilter(agent_ids=("alice",)), [0]),
        (ItemFilter(agent_roles=("reviewer",)), [4]),
        (ItemFilter(types=("user_message",)), [0, 4]),
        (ItemFilter(kinds=("entity",)), []),
        (ItemFilter(since=150.0), [4]),
        (ItemFilter(until=150.0), [0]),
        (ItemFilter(since=450.0, until=600.0), [4]),
    ],
)
def test_keyword_search_applies_filters(
    store: Store, project_id: str, flt: ItemFilter, expected: list[int]
) -> None:
    ids = _load(store, project_id)
    assert sorted(_hits(store, project_id, "缓存", flt)) == sorted(ids[i] for i in expected)


def test_filter_item_ids_paths_lines_latest(store: Store, project_id: str) -> None:
    rows = [
        item(project_id, "a", "alpha", path="src/app/main.py", line_start=1, line_end=20),
        item(project_id, "b", "alpha", path="src/app/util.py", line_start=30, line_end=40),
        item(project_id, "c", "alpha", path="docs/readme.md", latest=False),
        item(project_id, "d", "alpha"),
    ]
    rows = [replace(r, owner_id="doc:x", kind="chunk") for r in rows]
    ent = Entity(id="doc:x", project_id=project_id, type="document", name="x")
    store.upsert_entity(ent, rows)
    assert store.filter_item_ids(project_id, ItemFilter(path_prefix="src/app/")) == {"a", "b"}
    assert store.filter_item_ids(project_id, ItemFilter(line_from=15, line_to=35)) == {"a", "b"}
    assert store.filter_item_ids(project_id, ItemFilter(line_from=21, line_to=29)) == set()
    assert store.filter_item_ids(project_id, ItemFilter(latest_only=True)) == {"a", "b", "d"}
    assert store.filter_item_ids(project_id, ItemFilter(owner_ids=("doc:x",))) == set("abcd")
    hits = store.keyword_search(project_id, match("alpha"), ItemFilter(path_prefix="docs/"), 5)
    assert [h.item_id for h in hits] == ["c"]
    assert [i.item_id for i in store.get_items(project_id, ["d", "zz", "a"])] == ["d", "a"]


def test_filter_item_ids_among_limit_and_excluded_sessions(store: Store, project_id: str) -> None:
    ids = _load(store, project_id)
    ent = Entity(id="doc:y", project_id=project_id, type="document", name="y")
    unit = replace(item(project_id, "doc-unit", "beta"), owner_id="doc:y", kind="entity")
    store.upsert_entity(ent, [unit])
    items_of = {
        sid: {
            i.item_id
            for i in store.get_items(
                project_id, list(store.filter_item_ids(project_id, ItemFilter(session_ids=(sid,))))
            )
        }
        for sid in ("s1", "s2", "s3")
    }
    everything = store.filter_item_ids(project_id, ItemFilter())
    assert len(everything) == len(ids) + 1
    # all sessions but s1, and items of no session (the entity's unit)
    assert store.filter_item_ids(project_id, ItemFilter(exclude_session_ids=("s1",))) == (
        items_of["s2"] | items_of["s3"] | {"doc-unit"}
    )
    only_events = ItemFilter(kinds=("event",), exclude_session_ids=("s1", "s3"))
    assert store.filter_item_ids(project_id, only_events) == items_of["s2"]
    # among: only the named candidates are checked; unknown ids are ignored
    among = [*items_of["s1"], *items_of["s2"], "no-such-item"]
    assert (
        store.filter_item_ids(project_id, ItemFilter(exclude_session_ids=("s1",)), among=among)
        == items_of["s2"]
    )
    # limit: at most that many
    limited = store.filter_item_ids(project_id, ItemFilter(), limit=2)
    assert len(limited) == 2 and limited <= everything


def _unit(v: list[float]) -> np.ndarray:
    a = np.asarray(v, dtype=np.float32)
    return a / np.linalg.norm(a)


def test_vectors_pending_put_iter_search(store: Store, project_id: str) -> None:
    ids = _load(store, project_id)
    pending = store.pending_embeddings("m1", 100, project_id)
    assert sorted(p[1] for p in pending) == sorted(ids)
    assert all(p[0] == project_id for p in pending)
    vecs = {i: _unit([float(n == k) + 0.1 for k in range(8)]) for n, i in enumerate(ids)}
    assert store.put_vectors("m1", [(project_id, i, v) for i, v in vecs.items()]) == len(ids)
    assert store.pending_embeddings("m1", 100, project_id) == []
    assert len(store.pending_embeddings("m2", 100, project_id)) == len(ids)  # another model
    loaded = {r.item_id: r.vector for batch in store.iter_vectors(project_id, "m1") for r in batch}
    assert loaded.keys() == vecs.keys()
    assert np.allclose(loaded[ids[2]], vecs[ids[2]])
    query = vecs[ids[2]]
    hits = store.vector_search(project_id, "m1", query, 3)
    if hits is None:  # no native index: the retriever searches the iterated vectors itself
        assert isinstance(store, SQLiteStore)
        return
    assert hits[0][0] == ids[2] and hits[0][1] == pytest.approx(1.0, abs=1e-5)
    assert len(hits) == 3 and [s for _, s in hits] == sorted((s for _, s in hits), reverse=True)
    everything = dict(store.vector_search(project_id, "m1", query, 10) or [])
    assert everything.keys() == vecs.keys()
    for i, v in vecs.items():
        assert everything[i] == pytest.approx(float(v @ query), abs=1e-5)
    allowed = {ids[0], ids[4]}
    assert {i for i, _ in store.vector_search(project_id, "m1", query, 5, allowed) or []} == allowed
    assert store.vector_search(project_id, "m2", query, 5) == []
    assert store.vector_search("other-" + project_id, "m1", query, 5) == []


def test_vectors_of_hidden_or_forgotten_items(store: Store, project_id: str) -> None:
    ids = _load(store, project_id)
    store.set_active(project_id, [ids[0]], False)
    assert ids[0] not in {p[1] for p in store.pending_embeddings("m", 100, project_id)}
    store.set_active(project_id, [ids[0]], True)
    store.forget(project_id, event_ids=[ids[1]])
    rows = [(project_id, i, _unit([1.0] * 4)) for i in ids]
    assert store.put_vectors("m", rows) == len(ids) - 1  # a forgotten item gets no vector
    store.set_active(project_id, [ids[2]], False)
    seen = {r.item_id for b in store.iter_vectors(project_id, "m") for r in b}
    assert seen == {ids[0], ids[3], ids[4]}
    hits = store.vector_search(project_id, "m", _unit([1.0] * 4), 10)
    assert hits is None or {i for i, _ in hits} == seen


def test_vectors_replace_on_model_change(store: Store, project_id: str) -> None:
    ids = _load(store, project_id)
    store.put_vectors("m1", [(project_id, ids[0], _unit([1, 0, 0, 0]))])
    store.put_vectors("m2", [(project_id, ids[0], _unit([0, 1, 0, 0, 0, 0]))])
    assert [r.item_id for b in store.iter_vectors(project_id, "m1") for r in b] == []
    (row,) = [r for b in store.iter_vectors(project_id, "m2") for r in b]
    assert row.vector.shape == (6,)
    assert ids[0] in {p[1] for p in store.pending_embeddings("m1", 100, project_id)}


def test_retrieval_through_contextbase(cb: ContextBase) -> None:
    """End to end on each backend: capture, embed, hybrid search finds the right event."""
    for text in (
        "把预算控制在5万以内",
        "the deploy failed because of a missing env var",
        "午饭吃什么",
    ):
        cb.record("user_message", session_id="s1", text=text)
    assert cb.wait_for_embeddings()
    for query, expected in (("预算", "把预算控制在5万以内"), ("deploy failure", "the deploy")):
        res = cb.search(query, preset="hybrid", top_k=3)
        # An event is also indexed with its predecessor's words, so its follower may tie.
        assert any(c.item.text.startswith(expected) for c in res.results[:2]), query
    sem = cb.search("missing env var deploy", preset="semantic", top_k=1)
    assert sem.results[0].item.text.startswith("the deploy")


# -- the same data, the same top results on both backends ---------------------------------

_CORPUS_WORDS = (
    "缓存 查询 数据库 索引 预算 部署 失败 用户 权限 日志 配置 服务器 网络 延迟 测试 "
    "cache query database index budget deploy failure user permission log config "
    "server network latency test retry timeout migration schema vector"
)


def _corpus(n: int) -> list[str]:
    rng = np.random.default_rng(7)
    docs = []
    for _ in range(n):
        words = rng.choice(_CORPUS_WORDS.split(" "), size=int(rng.integers(4, 14)))
        docs.append(" ".join(words) if rng.random() < 0.5 else "".join(words))
    return docs


@pytest.mark.parametrize(
    "query", ["缓存 查询", "数据库索引", "部署失败", "cache latency", "deploy failure retry"]
)
def test_keyword_top5_agree_between_backends(
    tmp_path: Path, pg_url: str, project_id: str, query: str
) -> None:
    sqlite_store = SQLiteStore(str(tmp_path / "parity.db"))
    pg_store = PostgresStore(pg_url, max_size=2)
    try:
        top: list[list[str]] = []
        for s in (sqlite_store, pg_store):
            evs = [make_event(project_id, "s1", t, ts=float(i)) for i, t in enumerate(_corpus(300))]
            write(s, *evs)
            top.append([h.item_id for h in s.keyword_search(project_id, match(query), None, 5)])
        assert len(top[0]) == 5
        overlap = len(set(top[0]) & set(top[1])) / 5
        assert overlap >= 0.8, (query, top)
    finally:
        sqlite_store.close()
        pg_store.close()


def test_keyword_search_finds_filtered_hits_below_many_better_ones(
    store: Store, project_id: str
) -> None:
    """The best matches of the whole index belong to another project, another session or
    to hidden items: the hits asked for rank far below them and are still found, in order."""
    other = f"{project_id}-other"
    strong = "缓存 缓存 缓存 cache cache cache 命中"
    crowd = [make_event(other, "o1", f"{strong} {n}") for n in range(400)]
    crowd += [make_event(project_id, "busy", f"{strong} busy {n}") for n in range(300)]
    write(store, *crowd)
    mine = [
        make_event(project_id, "quiet", "缓存 的 配置 见 文档 cache notes"),
        make_event(project_id, "quiet", "the cache was cold after the deploy, and the logs say so"),
    ]
    write(store, *mine)
    flt = ItemFilter(session_ids=("quiet",))
    hits = store.keyword_search(project_id, match("缓存 cache"), flt, 5)
    assert [h.item_id for h in hits] == [mine[0].id, mine[1].id]
    assert hits[0].score > hits[1].score > 0
    # unfiltered: the project's own strong matches first, never the other project's
    top = store.keyword_search(project_id, match("缓存 cache"), None, 350)
    assert len(top) == 302
    assert {h.item_id for h in top[:300]} == {e.id for e in crowd[400:]}
    assert [h.item_id for h in top[300:]] == [mine[0].id, mine[1].id]
    assert store.keyword_search(project_id, match("缓存 cache"), flt, 1)[0].item_id == mine[0].id


def _typed_events(project_id: str) -> list[Event]:
    return [
        make_event(project_id, "s1", f"step {n}", type="tool_result" if n % 4 else "user_message")
        for n in range(40)
    ]


def test_sqlite_type_filter_reads_items_by_index(tmp_path: Path, project_id: str) -> None:
    """A type filter (code entities, tool results) lists its items through the type index;
    without it every item of the project was read on each such search."""
    st = SQLiteStore(str(tmp_path / "typed.db"))
    try:
        write(st, *_typed_events(project_id))
        sent: list[str] = []
        conn = st._conn()
        conn.set_trace_callback(sent.append)
        ids = st.filter_item_ids(project_id, ItemFilter(types=("user_message",)), limit=1001)
        conn.set_trace_callback(None)
        assert len(ids) == 10
        (sql,) = [s for s in sent if "FROM items" in s]
        plan = " ".join(str(r[3]) for r in conn.execute("EXPLAIN QUERY PLAN " + sql))
        assert "items_type" in plan, plan
    finally:
        st.close()


def test_postgres_type_filter_reads_items_by_index(pg_url: str, project_id: str) -> None:
    sent: list[str] = []
    pg = PostgresStore(pg_url, max_size=2, on_statement=sent.append)
    try:
        write(pg, *_typed_events(project_id))
        sent.clear()
        ids = pg.filter_item_ids(project_id, ItemFilter(types=("user_message",)), limit=1001)
        assert len(ids) == 10
        (sql,) = [s for s in sent if "FROM items" in s]
        import psycopg

        with psycopg.connect(pg_url) as conn:
            conn.execute("ANALYZE items")
            conn.execute("SET enable_seqscan = off")  # a tiny table: is the index usable?
            rows = conn.execute("EXPLAIN " + sql, (project_id, ["user_message"], 1001))
            plan = " ".join(str(r[0]) for r in rows.fetchall())
        assert "items_type" in plan, plan
    finally:
        pg.close()


def test_keyword_search_reaches_past_another_projects_better_matches(
    store: Store, project_id: str
) -> None:
    other = f"{project_id}-loud"
    write(store, *[make_event(other, "o", f"缓存 缓存 缓存 命中 {n}") for n in range(300)])
    mine = [
        make_event(project_id, "a", "缓存 命中 after the warmup, then the logs"),
        make_event(project_id, "b", "缓存 is mentioned once in this longer and wordier note"),
        make_event(project_id, "c", "nothing relevant here at all"),
    ]
    write(store, *mine)
    hits = store.keyword_search(project_id, match("缓存 命中"), None, 2)
    assert [h.item_id for h in hits] == [mine[0].id, mine[1].id]
    latest = store.keyword_search(project_id, match("缓存 命中"), ItemFilter(latest_only=True), 5)
    assert [h.item_id for h in latest] == [mine[0].id, mine[1].id]
