"""keyword_changes names the rows that left the keyword index since a marker (KeywordDelta
.removed), by change numbers that are never handed out twice: what an in-memory keyword
index needs to apply hides, forgets and replacements in place."""

from __future__ import annotations

from contract_helpers import add_entity, make_event, write

from ctxbase.model import Event
from ctxbase.retrieve.indexing import event_items
from ctxbase.retrieve.keyword_index import KeywordIndex
from ctxbase.store.base import KeywordDelta, Store


def _seqs(delta: KeywordDelta) -> dict[str, int]:
    return {r.item_id: r.seq for r in delta.rows}


def _write_after(store: Store, event: Event, context: Event) -> None:
    """`event` indexed with the words of `context` (the event it follows)."""
    store.write_events([event], [event_items(event, context=(context.id, context.text))])


def test_rows_are_numbered_in_order_and_nothing_removed_at_first(
    store: Store, project_id: str
) -> None:
    write(store, *(make_event(project_id, f"s{i}", f"walrus note {i}") for i in range(4)))
    first = store.keyword_changes(project_id, 0)
    seqs = [r.seq for r in first.rows]
    assert len(seqs) == 4 and seqs == sorted(set(seqs)) and seqs[0] > 0
    assert first.removed == [] and first.marker >= seqs[-1]
    again = store.keyword_changes(project_id, first.marker)
    assert again.rows == [] and again.removed == [] and again.marker == first.marker


def test_a_hidden_row_is_named_and_a_restored_one_comes_back_renumbered(
    store: Store, project_id: str
) -> None:
    a, b = write(store, make_event(project_id, "s1", "a heron"), make_event(project_id, "s2", "b"))
    start = store.keyword_changes(project_id, 0)
    seq_a = _seqs(start)[a.id]
    store.set_active(project_id, [a.id], False)
    hidden = store.keyword_changes(project_id, start.marker)
    assert hidden.removed == [seq_a] and hidden.rows == []
    assert hidden.marker > start.marker
    store.set_active(project_id, [a.id], True)
    shown = store.keyword_changes(project_id, hidden.marker)
    assert [r.item_id for r in shown.rows] == [a.id]
    assert shown.rows[0].seq > hidden.marker  # a new number: a reader appends it
    assert shown.removed == []  # its old number left already
    now = _seqs(store.keyword_changes(project_id, 0))
    assert now == {a.id: shown.rows[0].seq, b.id: _seqs(start)[b.id]}


def test_forgotten_and_replaced_rows_are_named(store: Store, project_id: str) -> None:
    (gone,) = write(store, make_event(project_id, "s1", "an ibis to forget"))
    entity = add_entity(store, project_id, "document", "spec", "the ibis spec")
    start = store.keyword_changes(project_id, 0)
    before = _seqs(start)
    store.forget(project_id, event_ids=[gone.id])
    add_entity(store, project_id, "document", "spec", "the ibis spec, second version")
    after = store.keyword_changes(project_id, start.marker)
    entity_rows = [i for i in before if i != gone.id]
    assert sorted(after.removed or []) == sorted(before[i] for i in [gone.id, *entity_rows])
    # the entity's units come back under the same ids, numbered after every row held
    assert entity_rows and {r.item_id for r in after.rows} == set(entity_rows)
    assert all(r.seq > max(before.values()) for r in after.rows)
    assert all(i.startswith(entity.id) for i in entity_rows)


def test_a_number_is_never_handed_out_again(store: Store, project_id: str) -> None:
    # SQLite hands the largest rowid out again once its row is deleted
    (last,) = write(store, make_event(project_id, "s1", "the newest row"))
    start = store.keyword_changes(project_id, 0)
    used = _seqs(start)[last.id]
    store.forget(project_id, event_ids=[last.id])
    (new,) = write(store, make_event(project_id, "s1", "written after the forget"))
    delta = store.keyword_changes(project_id, start.marker)
    assert delta.removed == [used]
    assert [r.item_id for r in delta.rows] == [new.id] and delta.rows[0].seq > used


def test_a_row_whose_context_changes_is_renumbered(store: Store, project_id: str) -> None:
    (first,) = write(store, make_event(project_id, "s1", "the lantern glows"))
    follower = make_event(project_id, "s1", "what follows", parent_event_ids=[first.id])
    _write_after(store, follower, first)
    start = store.keyword_changes(project_id, 0)
    old = _seqs(start)
    assert "lantern" in {r.item_id: r for r in start.rows}[follower.id].context_terms
    store.set_active(project_id, [first.id], False)  # its words leave the follower's row
    hidden = store.keyword_changes(project_id, start.marker)
    assert sorted(hidden.removed or []) == sorted(old.values())
    (row,) = hidden.rows
    assert row.item_id == follower.id and row.context_terms == "" and row.seq > max(old.values())


def test_another_projects_removals_are_not_named(store: Store, project_id: str) -> None:
    other = f"{project_id}-other"
    (mine,) = write(store, make_event(project_id, "s1", "mine"))
    (theirs,) = write(store, make_event(other, "s1", "theirs"))
    start = store.keyword_changes(project_id, 0)
    store.set_active(other, [theirs.id], False)
    assert store.keyword_changes(project_id, start.marker).removed == []
    store.set_active(project_id, [mine.id], False)
    assert store.keyword_changes(project_id, start.marker).removed == [_seqs(start)[mine.id]]


def test_forgetting_the_whole_project_cuts_the_record(store: Store, project_id: str) -> None:
    write(store, *(make_event(project_id, f"s{i}", f"an otter {i}") for i in range(3)))
    start = store.keyword_changes(project_id, 0)
    store.forget(project_id, whole_project=True)
    behind = store.keyword_changes(project_id, start.marker)
    assert behind.removed is None and behind.rows == []  # cannot say: a reader reloads
    (new,) = write(store, make_event(project_id, "s1", "a new otter"))
    fresh = store.keyword_changes(project_id, behind.marker)
    assert fresh.removed == [] and [r.item_id for r in fresh.rows] == [new.id]


def test_a_project_forgotten_whole_and_written_again_does_not_look_unchanged(
    store: Store, project_id: str
) -> None:
    """The project's row goes with a whole-project forget and its write count starts again:
    a reader that cached the count before (another process) must not find it unchanged
    after as many writes, keeping the forgotten words and missing the new items."""
    for i in range(2):
        write(store, make_event(project_id, "s1", f"a secret walrus {i}"))
    index = KeywordIndex(store)  # told nothing of the forget, as in another process
    assert len(index.search(project_id, ["walrus"], 10)) == 2
    before = store.index_generation(project_id)
    store.forget(project_id, whole_project=True)
    again = [write(store, make_event(project_id, "s1", f"a new walrus {i}"))[0] for i in range(2)]
    assert store.index_generation(project_id) != before
    assert {i for i, _ in index.search(project_id, ["walrus"], 10)} == {e.id for e in again}
    assert "secret" not in index._load(project_id).docs.vocab
