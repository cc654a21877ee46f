"""The record of keyword removals (keyword_changes' `removed`) is kept bounded: past the
store's limit its oldest rows are dropped and a mark left at the newest one dropped, so an
in-memory keyword index that last read before it reloads, and one that read after it keeps
applying removals in place, answering as an index read afresh."""

from __future__ import annotations

from typing import Any

from contract_helpers import make_event, write

from ctxbase.retrieve.keyword_index import KeywordIndex
from ctxbase.store.base import Store

WORDS = ["heron", "ibis", "crane", "stork", "egret", "plover"]
QUERIES = [["walrus"], ["heron", "ibis"], ["crane", "walrus"], ["stork", "egret", "plover"]]


def _log_rows(store: Any, project_id: str) -> int:
    """Rows of the project's record of removals (read directly: not part of the protocol)."""
    sql = store._dialect.sql("SELECT count(*) FROM keyword_removed WHERE project_id=?")
    return int(store._fetch_one(sql, (project_id,))[0])


def _answers(index: KeywordIndex, project_id: str) -> list[dict[str, float]]:
    return [dict(index.search(project_id, q, 1000)) for q in QUERIES]


def _same(got: list[dict[str, float]], want: list[dict[str, float]]) -> None:
    for g, w in zip(got, want, strict=True):
        assert g.keys() == w.keys()
        assert all(abs(g[i] - w[i]) <= 1e-9 for i in w), (g, w)


def test_the_record_is_bounded_and_only_readers_behind_the_cut_reload(
    store: Store, project_id: str
) -> None:
    store.keyword_log_limit = 6
    store.keyword_log_check_every = 1
    events = write(store, *(
        make_event(project_id, f"s{i % 3}", f"walrus {WORDS[i % 6]} {WORDS[(i * 5) % 6]} {i}")
        for i in range(40)
    ))  # fmt: skip
    ids = [e.id for e in events]
    behind = KeywordIndex(store)  # reads now: every cut below comes after it
    assert len(behind.search(project_id, ["walrus"], 100)) == 40
    start = store.keyword_changes(project_id, 0).marker
    for i in range(12):  # one row leaves per hide
        store.set_active(project_id, [ids[i]], False)
        assert _log_rows(store, project_id) <= 6
    assert _log_rows(store, project_id) == 6  # the newest five and the mark
    cut = store.keyword_changes(project_id, start)
    assert cut.removed is None  # the store cannot say what left since `start`
    after = KeywordIndex(store)  # reads after the cut
    assert len(after.search(project_id, ["walrus"], 100)) == 28 and after.reloads == 1
    seqs = {r.item_id: r.seq for r in store.keyword_changes(project_id, 0).rows}
    for i in range(12, 15):  # the record is trimmed again, behind `after`'s last read
        store.set_active(project_id, [ids[i]], False)
        assert _log_rows(store, project_id) <= 6
    delta = store.keyword_changes(project_id, cut.marker)
    assert sorted(delta.removed or []) == sorted(seqs[i] for i in ids[12:15])
    fresh = KeywordIndex(store)
    want = _answers(fresh, project_id)
    _same(_answers(after, project_id), want)
    assert after.reloads == 1  # the three hides applied in place
    _same(_answers(behind, project_id), want)
    assert behind.reloads == 2  # behind the cut: read again (15 of 40 dead would not)
    shown = set().union(*want)
    assert shown and not shown & set(ids[:15])  # hidden rows never come back
    assert len(shown) == 25


def test_the_record_is_measured_every_so_many_writes(store: Store, project_id: str) -> None:
    store.keyword_log_limit = 4
    store.keyword_log_check_every = 5
    ids = [e.id for e in write(store, *(make_event(project_id, "s1", f"walrus {i}")
                                        for i in range(12)))]  # fmt: skip
    sizes = []
    for i in range(11):  # the write above was the first of five; each hide adds a row
        store.set_active(project_id, [ids[i]], False)
        sizes.append(_log_rows(store, project_id))
    # trimmed to four rows at the 5th and 10th hides (writes 5 and 10), growing between
    assert sizes == [1, 2, 3, 4, 4, 5, 6, 7, 8, 4, 5]
    index = KeywordIndex(store)
    assert {i for i, _ in index.search(project_id, ["walrus"], 100)} == {ids[11]}


def test_a_small_record_is_left_whole(store: Store, project_id: str) -> None:
    store.keyword_log_check_every = 1
    ids = [e.id for e in write(store, *(make_event(project_id, "s1", f"an ibis {i}")
                                        for i in range(5)))]  # fmt: skip
    start = store.keyword_changes(project_id, 0)
    store.set_active(project_id, ids[:3], False)
    assert _log_rows(store, project_id) == 3
    assert sorted(store.keyword_changes(project_id, start.marker).removed or []) == sorted(
        r.seq for r in start.rows if r.item_id in ids[:3]
    )
