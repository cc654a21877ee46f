"""`count_pending_embeddings`: what searches report as `pending_vectors`; `pending_projects`:
the projects the embedding worker serves in turn; on every backend."""

from __future__ import annotations

import uuid

import numpy as np
from contract_helpers import make_event, write

from ctxbase.store.base import Store


def test_count_pending_embeddings_per_project_and_model(store: Store) -> None:
    a, b = f"a-{uuid.uuid4().hex[:8]}", f"b-{uuid.uuid4().hex[:8]}"
    write(store, make_event(a, "s", "first text"), make_event(a, "s", "second text"))
    write(store, make_event(b, "s", "other project"))
    assert store.count_pending_embeddings("m1", 100, a) == 2
    assert store.count_pending_embeddings("m1", 1, a) == 1  # capped
    first = store.pending_embeddings("m1", 1, a)[0]
    store.put_vectors("m1", [(first[0], first[1], np.ones(8, dtype=np.float32))])
    assert store.count_pending_embeddings("m1", 100, a) == 1
    assert store.count_pending_embeddings("m2", 100, a) == 2  # a vector of another model
    assert store.count_pending_embeddings("m1", 100, b) == 1
    store.set_active(a, [store.pending_embeddings("m1", 1, a)[0][1]], False)
    assert store.count_pending_embeddings("m1", 100, a) == 0  # hidden items wait for nothing


def test_pending_among_names_the_listed_items_without_a_vector(store: Store) -> None:
    a, b = f"a-{uuid.uuid4().hex[:8]}", f"b-{uuid.uuid4().hex[:8]}"
    write(store, *(make_event(a, "s", f"text {n}") for n in range(3)))
    write(store, make_event(b, "s", "other project"))
    ids = sorted(i for _, i, _ in store.pending_embeddings("m1", 100, a))
    other = store.pending_embeddings("m1", 100, b)[0][1]
    store.put_vectors("m1", [(a, ids[0], np.ones(8, dtype=np.float32))])
    assert store.pending_among(a, "m1", [*ids, other, "missing"]) == set(ids[1:])
    assert store.pending_among(a, "m2", ids) == set(ids)  # a vector of another model
    assert store.pending_among(a, "m1", []) == set()
    store.set_active(a, [ids[1]], False)
    assert store.pending_among(a, "m1", ids) == {ids[2]}  # hidden items wait for nothing


def test_pending_projects_lists_the_projects_with_items_without_a_vector(store: Store) -> None:
    # other tests' projects share the PostgreSQL database: only these three are looked at
    a, b, c = (f"{x}-{uuid.uuid4().hex[:8]}" for x in "abc")
    write(store, make_event(a, "s", "first text"), make_event(a, "s", "second text"))
    write(store, make_event(b, "s", "other project"))
    store.ensure_project(c)  # no items: nothing to embed

    def ours(model: str) -> list[str]:
        return [p for p in store.pending_projects(model) if p in (a, b, c)]

    assert ours("m1") == sorted([a, b])
    only = store.pending_embeddings("m1", 1, b)[0]
    store.put_vectors("m1", [(b, only[1], np.ones(8, dtype=np.float32))])
    assert ours("m1") == [a]
    assert ours("m2") == sorted([a, b])  # a vector of another model
    store.set_active(a, [i for _, i, _ in store.pending_embeddings("m1", 10, a)], False)
    assert ours("m1") == []  # hidden items wait for nothing
