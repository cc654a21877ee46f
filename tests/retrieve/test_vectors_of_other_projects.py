"""A base embedding with one model never replaces the vectors another model made in a
project it does not address: a `--embedder hash` command on one project, beside a server
embedding with another model, left every project of the database to be re-embedded."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from ctxbase import ContextBase
from ctxbase.embedding_wait import pending_vectors
from ctxbase.retrieve.embed.hashing import HashingEmbedder


def _url(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> str:
    if backend == "postgres":
        return str(request.getfixturevalue("pg_url"))
    return str(tmp_path / "shared.db")


def _models(cb: ContextBase, project: str) -> set[str]:
    rows = cb.store._all(  # type: ignore[attr-defined]
        "SELECT DISTINCT embedded_model FROM items WHERE project_id=? AND active=1", (project,)
    )
    return {r[0] for r in rows}


def test_another_projects_vectors_stay_those_of_their_model(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    url, tag = _url(backend, tmp_path, request), uuid.uuid4().hex[:8]
    a, b, c = f"a-{tag}", f"b-{tag}", f"c-{tag}"
    try:
        _play(url, a, b, c)
    finally:  # the session's PostgreSQL is shared: leave no other model's vectors in it
        with ContextBase(url, project=a, embedder=None) as cleaner:
            for project in (a, b, c):
                cleaner.forget(whole_project=True, project=project)


def _play(url: str, a: str, b: str, c: str) -> None:
    first, second = HashingEmbedder(dim=64), HashingEmbedder(dim=32)
    assert first.name != second.name
    with ContextBase(url, project=a, embedder=first) as base:
        for n in range(5):
            base.capture("user_message", session_id="s", text=f"project a note {n}")
        assert base.wait_for_embeddings(60)
    with ContextBase(url, project=c, embedder=None) as bare:  # items with no vector at all
        bare.capture("user_message", session_id="s", text="project c note")
        bare.flush()
    with ContextBase(url, project=a, embedder=None) as reader:
        assert _models(reader, a) == {first.name}

    with ContextBase(url, project=b, embedder=second) as other:
        other.capture("user_message", session_id="s", text="project b note")
        assert other.wait_for_embeddings(60)  # does not wait for a's vectors
        assert other.wait_for_embeddings(60, all_projects=True)
        worker = other.embedding_worker
        assert worker is not None
        # what this worker embeds: b's item and c's, which had no vector; a's are first's
        assert pending_vectors(other.store, second.name, None, worker.replacing()) == 0
        assert _models(other, b) == {second.name} and _models(other, c) == {second.name}
        assert _models(other, a) == {first.name}
        # a search of a names it: that base now embeds a with its own model, as it says
        other.search("note", project=a)
        assert other.wait_for_embeddings(60, project=a)
        assert _models(other, a) == {second.name}


def test_the_store_tells_missing_vectors_from_another_models(cb: ContextBase) -> None:
    store, pid = cb.store, cb.project
    cb.capture("user_message", session_id="s", text="one")
    cb.capture("user_message", session_id="s", text="two")
    cb.flush()
    model = cb.embedder.name if cb.embedder else "hash"
    assert len(store.pending_embeddings(model, 10, pid, missing_only=True)) == 2
    cb.wait_for_embeddings(60)
    assert store.pending_embeddings(model, 10, pid, missing_only=True) == []
    assert len(store.pending_embeddings("other-model", 10, pid)) == 2
    assert store.pending_embeddings("other-model", 10, pid, missing_only=True) == []
    assert store.count_pending_embeddings("other-model", 10, pid) == 2
    assert store.count_pending_embeddings("other-model", 10, pid, missing_only=True) == 0
    assert pid in store.pending_projects("other-model")
    assert pid not in store.pending_projects("other-model", missing_only=True)
