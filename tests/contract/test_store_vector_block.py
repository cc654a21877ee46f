"""The storage contract for Store.vector_block: every active vector of a (project, model) in
one float32 matrix, read in blocks, with the marker vector_changes continues from."""

from __future__ import annotations

import tracemalloc

import numpy as np
from contract_helpers import make_event, write

from ctxbase.store.base import Store


def _events(store: Store, project_id: str, n: int) -> list[str]:
    events = [make_event(project_id, f"s{i % 5}", f"note {i}") for i in range(n)]
    return [e.id for e in write(store, *events)]


def _vectors(n: int, dim: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((n, dim)).astype(np.float32)


def test_the_block_holds_each_active_vector_of_the_model_once(
    store: Store, project_id: str
) -> None:
    ids = _events(store, project_id, 6)
    vecs = _vectors(6, 8)
    store.put_vectors("m1", [(project_id, i, v) for i, v in zip(ids[:5], vecs, strict=False)])
    store.put_vectors("m2", [(project_id, ids[5], _vectors(1, 3)[0])])  # another model
    store.set_active(project_id, [ids[1]], False)  # hidden: not searchable
    block = store.vector_block(project_id, "m1")
    assert sorted(block.ids) == sorted([ids[0], *ids[2:5]])
    assert block.matrix.dtype == np.float32 and block.matrix.shape == (4, 8)
    want = dict(zip(ids, vecs, strict=False))
    for row, item_id in zip(block.matrix, block.ids, strict=True):
        np.testing.assert_array_equal(row, want[item_id])
    iterated = sorted(r.item_id for b in store.iter_vectors(project_id, "m1") for r in b)
    assert sorted(block.ids) == iterated
    empty = store.vector_block(project_id, "m3")
    assert empty.ids == [] and empty.matrix.shape[0] == 0


def test_vector_changes_continue_from_the_blocks_marker(store: Store, project_id: str) -> None:
    ids = _events(store, project_id, 3)
    store.put_vectors("m", [(project_id, ids[0], _vectors(1, 4)[0])])
    block = store.vector_block(project_id, "m")
    changes = store.vector_changes(project_id, "m", block.marker)
    if changes is None:  # the backend cannot tell what changed: readers reload
        assert block.marker == 0
        return
    assert block.marker > 0 and changes.rows == [] and changes.removals == block.removals
    store.put_vectors("m", [(project_id, ids[2], _vectors(1, 4, seed=1)[0])])
    after = store.vector_changes(project_id, "m", block.marker)
    assert after is not None and [r.item_id for r in after.rows] == [ids[2]]


def test_a_large_block_is_read_without_an_object_per_vector(store: Store, project_id: str) -> None:
    """More rows than one read batch; the memory the read takes at its peak stays near the
    matrix and the ids (an object per row cost several times the vector itself)."""
    n, dim = 16_000, 64
    ids = _events(store, project_id, n)
    vecs = _vectors(n, dim)
    store.put_vectors("m", [(project_id, i, v) for i, v in zip(ids, vecs, strict=True)])
    tracemalloc.start()
    try:
        block = store.vector_block(project_id, "m")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert block.matrix.shape == (n, dim) and len(set(block.ids)) == n
    by_id = dict(zip(block.ids, block.matrix, strict=True))
    np.testing.assert_array_equal(np.stack([by_id[i] for i in ids]), vecs)
    held = block.matrix.nbytes + sum(len(i) + 57 for i in block.ids)  # str objects, list
    assert peak <= 1.6 * held, (peak, held)


def test_vector_ids_list_the_active_vectors_with_the_same_marks(
    store: Store, project_id: str
) -> None:
    ids = _events(store, project_id, 5)
    store.put_vectors("m", [(project_id, i, v) for i, v in zip(ids, _vectors(5, 4), strict=True)])
    listed = store.vector_ids(project_id, "m")
    if listed is None:  # the backend cannot tell (it searches its own index): readers reload
        assert store.vector_changes(project_id, "m", 0) is None
        return
    block = store.vector_block(project_id, "m")
    assert listed.ids == block.ids == ids and listed.matrix.size == 0
    assert (listed.marker, listed.removals) == (block.marker, block.removals)
    store.set_active(project_id, [ids[1]], False)  # hidden: no longer listed, counted
    hidden = store.vector_ids(project_id, "m")
    assert hidden is not None and hidden.ids == [ids[0], *ids[2:]]
    changes = store.vector_changes(project_id, "m", block.marker)
    assert changes is not None and hidden.removals == changes.removals != block.removals
    assert hidden.marker == changes.marker
