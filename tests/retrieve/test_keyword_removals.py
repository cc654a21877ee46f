"""Removals applied to the keyword index in place: after hides, forgets, restores and items
written again under the same ids, the index answers exactly as one read afresh from the
store (same ids, same scores), without reading the project again."""

from __future__ import annotations

import random
import sqlite3
from pathlib import Path
from typing import cast

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxbase import ContextBase
from ctxbase.retrieve import keyword_index as ki
from ctxbase.retrieve.bm25_scoring import exhaustive
from ctxbase.retrieve.keyword_index import KeywordIndex
from ctxbase.retrieve.tokenize import query_terms
from ctxbase.store.base import SCHEMA_VERSION, ItemFilter, KeywordRow, Store
from ctxbase.store.sqlite import SQLiteStore

WORDS = ["heron", "ibis", "crane", "stork", "egret"]
WORDS += ["plover", "lapwing", "curlew", "godwit", "dunlin"]
QUERIES = ["heron", "ibis crane", "stork egret plover", "curlew godwit dunlin heron", "lapwing"]


def _text(rng: random.Random) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 8)))


def _answers(index: KeywordIndex, project: str, flt: ItemFilter | None = None) -> list[dict]:
    return [
        dict(index.search(project, query_terms(q), 1000, flt)) for q in QUERIES
    ]  # every match: no cut among equal scores


def _same(got: list[dict], want: list[dict]) -> None:
    for g, w in zip(got, want, strict=True):
        assert g.keys() == w.keys()
        assert all(abs(g[i] - w[i]) <= 1e-9 for i in w), (g, w)


def test_hides_forgets_restores_and_rewrites_score_as_a_fresh_read(
    cb: ContextBase, second: ContextBase
) -> None:
    rng = random.Random(7)
    events = [
        cb.record("user_message", session_id=f"s{i % 5}", text=_text(rng)).id for i in range(80)
    ]
    for i in range(6):
        cb.upsert_entity(type="document", name=f"doc{i}", text=_text(rng), id=f"doc{i}")
    index = KeywordIndex(cb.store)
    _same(_answers(index, cb.project), _answers(KeywordIndex(cb.store), cb.project))
    hidden: list[str] = []
    for step in range(12):
        # through another connection: what another process does, learnt of by keyword_changes
        kind = step % 4
        if kind == 0:
            picked = rng.sample([e for e in events if e not in hidden], 3)
            second.soft_delete(picked)
            hidden += picked
        elif kind == 1:
            back = hidden.pop(rng.randrange(len(hidden)))
            second.restore([back])  # the same id back, renumbered
        elif kind == 2:
            gone = rng.choice([e for e in events if e not in hidden])
            second.forget(event_ids=[gone])
            events.remove(gone)
        else:
            doc = f"doc{rng.randrange(6)}"  # written again: its units replaced under their ids
            second.upsert_entity(type="document", name=doc, text=_text(rng), id=doc)
            second.record("user_message", session_id="s9", text=_text(rng))
        fresh = KeywordIndex(cb.store)
        _same(_answers(index, cb.project), _answers(fresh, cb.project))
        flt = ItemFilter(kinds=("event",), session_ids=("s1", "s2"))
        _same(_answers(index, cb.project, flt), _answers(fresh, cb.project, flt))
        assert index.frequencies(cb.project, WORDS) == fresh.frequencies(cb.project, WORDS)
        assert index.count_admitted(cb.project, flt) == fresh.count_admitted(cb.project, flt)
        assert index.stats(cb.project)["items"] == fresh.stats(cb.project)["items"]
    assert index.reloads == 1  # read once, every change applied in place
    assert index._cache[cb.project].live < index._cache[cb.project].n  # rows are dead


def test_most_rows_gone_reloads_to_compact(cb: ContextBase, second: ContextBase) -> None:
    ids = [cb.record("user_message", session_id=f"s{i}", text=f"heron {i}").id for i in range(10)]
    index = KeywordIndex(cb.store)
    assert len(index.search(cb.project, ["heron"], 20)) == 10
    second.soft_delete(ids[:4])
    assert len(index.search(cb.project, ["heron"], 20)) == 6 and index.reloads == 1
    second.soft_delete(ids[4:7])  # 7 of 10 dead: read again, without them
    assert len(index.search(cb.project, ["heron"], 20)) == 3 and index.reloads == 2
    assert index._cache[cb.project].n == 3


# -- the pure parts: rows killed and appended in memory vs the same live rows read afresh --


def _row(item_id: str, terms: list[str], context: list[str], seq: int) -> KeywordRow:
    return KeywordRow(item_id, " ".join(terms), " ".join(context), seq=seq)


def _built(rows: list[KeywordRow]) -> ki._Loaded:
    docs = ki._Docs()
    terms, positions, freqs = docs.add(rows)
    postings = ki._Postings.build(terms, positions, freqs, len(docs.vocab), docs.lengths)
    return ki._Loaded.of(0, 0, 0, docs, postings)


def _scores(loaded: ki._Loaded, terms: list[str]) -> dict[str, float]:
    index = KeywordIndex(cast(Store, None))  # scoring reads no store
    postings = index._postings(loaded, terms, "or", None)
    if not postings:
        return {}
    ranked = exhaustive(postings, loaded.norms, "or")
    keep = loaded.alive(ranked.positions)
    ids = loaded.docs.ids
    return {
        ids[int(p)]: float(s)
        for p, s in zip(ranked.positions[keep], ranked.scores[keep], strict=True)
    }


_terms = st.lists(st.sampled_from(WORDS[:6]), max_size=6)
_doc = st.tuples(st.integers(0, 11), _terms, _terms)  # (id number, own terms, context terms)
_step = st.tuples(st.lists(st.integers(0, 30), max_size=4), st.lists(_doc, max_size=5))


@settings(max_examples=60, deadline=None)
@given(first=st.lists(_doc, min_size=1, max_size=12), steps=st.lists(_step, max_size=5))
def test_rows_killed_in_place_score_as_a_fresh_build(
    first: list[tuple[int, list[str], list[str]]],
    steps: list[tuple[list[int], list[tuple[int, list[str], list[str]]]]],
) -> None:
    seq = 0
    live: dict[str, KeywordRow] = {}  # the store: id -> its current row

    def stored(docs: list[tuple[int, list[str], list[str]]]) -> tuple[list[KeywordRow], list[int]]:
        """New rows (a held id replaced: its old row leaves) and the numbers that left."""
        nonlocal seq
        rows, left = [], []
        for n, own, ctx in docs:
            item_id = f"i{n}"
            if item_id in live:
                left.append(live.pop(item_id).seq)
            seq += 1
            live[item_id] = _row(item_id, own, ctx, seq)
            rows.append(live[item_id])
        return [r for r in rows if live.get(r.item_id) is r], left

    rows, _ = stored(first)
    loaded = _built(rows)
    for picks, docs in steps:
        held = sorted(live)
        picked = {held[p % len(held)] for p in picks} if held else set()
        removed = [live.pop(i).seq for i in sorted(picked)]
        rows, left = stored(docs)
        gone = loaded.docs.held(removed + left + [10_000])  # a number never held is skipped
        loaded = ki._updated(loaded, gone, rows, 0, 0, 0)
        fresh = _built(sorted(live.values(), key=lambda r: r.seq))
        assert (loaded.live, loaded.total_length, loaded.avgdl) == (
            fresh.live,
            fresh.total_length,
            fresh.avgdl,
        )
        for query in ([w] for w in WORDS[:6]):
            got, want = _scores(loaded, query), _scores(fresh, query)
            assert got.keys() == want.keys()
            assert all(abs(got[i] - want[i]) <= 1e-9 for i in want)
        assert _scores(loaded, WORDS[:6]) == pytest.approx(_scores(fresh, WORDS[:6]), abs=1e-9)
        alive = loaded.alive(np.arange(loaded.n))
        assert sorted(loaded.docs.ids[int(p)] for p in np.flatnonzero(alive)) == sorted(live)


def test_a_version_5_sqlite_database_is_upgraded(tmp_path: Path) -> None:
    path = tmp_path / "v5.db"
    with ContextBase(SQLiteStore(path), project="p", embedder=None) as cb:
        old = [
            cb.record("user_message", session_id=f"s{i}", text=f"a heron {i}").id for i in range(3)
        ]
    conn = sqlite3.connect(path)  # back to what version 5 had
    for trigger in ("items_left_keywords", "items_renumbered_or_hidden"):
        conn.execute(f"DROP TRIGGER {trigger}")
    conn.execute("DROP TABLE keyword_removed")
    conn.execute("DELETE FROM meta WHERE key='item_rowid'")
    conn.execute("UPDATE meta SET value='5' WHERE key='schema_version'")
    conn.commit()
    conn.close()
    with ContextBase(SQLiteStore(path), project="p", embedder=None) as cb:
        assert cb.store.schema_version() == SCHEMA_VERSION
        index = KeywordIndex(cb.store)
        assert len(index.search("p", ["heron"], 10)) == 3
        cb.forget(event_ids=[old[-1]])  # the largest rowid: not handed out again
        new = cb.record("user_message", session_id="s9", text="a heron after")
        assert {i for i, _ in index.search("p", ["heron"], 10)} == {*old[:2], new.id}
        assert index.reloads == 1


def test_a_row_stored_without_the_counter_is_named_when_it_leaves(tmp_path: Path) -> None:
    """A process of version 5 still running after another upgraded the file stores items
    under SQLite's own rowids, past the counter; a hide of such a row is recorded under a
    number above them, else a reader whose marker already passed it never hears of it."""
    path = tmp_path / "mixed.db"
    with ContextBase(SQLiteStore(path), project="p", embedder=None) as cb:
        cb.record("user_message", session_id="s", text="a heron by this version")
        conn = sqlite3.connect(path)
        cols = [str(r[1]) for r in conn.execute("PRAGMA table_info(items)")]
        copied = ", ".join(
            {"item_id": "'old-item'", "owner_id": "'old-owner'"}.get(c, c) for c in cols
        )
        conn.execute(  # as version 5 stored it: the next rowid, the counter left alone
            f"INSERT INTO items({', '.join(cols)}) SELECT {copied} FROM items LIMIT 1"
        )
        conn.commit()
        conn.close()
        start = cb.store.keyword_changes("p", 0)
        seq = {r.item_id: r.seq for r in start.rows}["old-item"]
        assert start.marker >= seq
        cb.store.set_active("p", ["old-owner"], False)
        assert cb.store.keyword_changes("p", start.marker).removed == [seq]
