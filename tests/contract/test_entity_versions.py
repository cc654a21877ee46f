"""The public entity write keeps history and refuses a stale write, on every backend: changed
content raises `version` and keeps the previous one as `<id>@v<n>` (out of searches and
assemblies, as ingest's are); a `version` older than the stored one is a ConflictError;
the writes of the layers below (Components.upsert_entity) still overwrite in place."""

from __future__ import annotations

import json
import threading
from typing import Any

import pytest

from ctxbase import ContextBase
from ctxbase.errors import ConflictError, NotFoundError
from ctxbase.store.sqlite import SQLiteStore


def _write(cb: ContextBase, text: str, **kw: object) -> int:
    e = cb.upsert_entity(
        entity_type="document", entity_id="doc:spec", properties={"content": text}, **kw
    )
    return e.version


def _modifies(cb: ContextBase) -> set[tuple[str, str]]:
    return {(r.from_id, r.to_id) for r in cb.relationships(types=["MODIFIES"])}


def test_a_changed_write_raises_the_version_and_keeps_the_previous_one(cb: ContextBase) -> None:
    assert _write(cb, "Spec v1: timeout 30s") == 1
    assert _write(cb, "Spec v2: timeout 20s") == 2
    assert _write(cb, "Spec v2: timeout 20s") == 2  # the same content again changes nothing
    assert _write(cb, "Spec v3: timeout 10s") == 3

    head = cb.get_entity("doc:spec")
    assert (head.version, head.text, head.latest) == (3, "Spec v3: timeout 10s", True)
    v1, v2 = cb.get_entity("doc:spec@v1"), cb.get_entity("doc:spec@v2")
    assert (v1.version, v1.text, v1.latest) == (1, "Spec v1: timeout 30s", False)
    assert (v2.version, v2.text, v2.latest) == (2, "Spec v2: timeout 20s", False)
    assert v2.properties["archived_from"] == "doc:spec"
    with pytest.raises(NotFoundError):  # no copy for the write that changed nothing
        cb.get_entity("doc:spec@v3")
    # newest -> oldest, as ingest chains versions
    assert _modifies(cb) == {("doc:spec", "doc:spec@v2"), ("doc:spec@v2", "doc:spec@v1")}
    assert [e.id for e in cb.list_entities(type="document")] == ["doc:spec"]
    assert {e.id for e in cb.list_entities(type="document", latest_only=False)} == {
        "doc:spec",
        "doc:spec@v1",
        "doc:spec@v2",
    }


def test_a_change_of_properties_or_name_is_a_new_version(cb: ContextBase) -> None:
    e = cb.upsert_entity("requirement", "cache", "cache orders", properties={"status": "draft"})
    e2 = cb.upsert_entity("requirement", "cache", "cache orders", properties={"status": "final"})
    assert (e2.id, e2.version) == (e.id, 2)
    assert cb.get_entity(f"{e.id}@v1").properties["status"] == "draft"
    e3 = cb.upsert_entity("requirement", "cache v2", "cache orders", id=e.id,
                          properties={"status": "final"})  # fmt: skip
    assert e3.version == 3 and cb.get_entity(f"{e.id}@v2").name == "cache"


def test_a_stale_version_is_refused_naming_the_stored_one(cb: ContextBase) -> None:
    _write(cb, "v1 text")
    assert _write(cb, "v2 text", version=2) == 2
    with pytest.raises(ConflictError, match=r"at version 2.*send version=3"):
        _write(cb, "stale write", version=2)  # equal, other content: another writer's v2
    with pytest.raises(ConflictError, match=r"version=1 is older"):
        _write(cb, "older write", version=1)
    assert _write(cb, "v2 text", version=2) == 2  # a retried write of the stored version
    assert cb.get_entity("doc:spec").text == "v2 text"
    assert _write(cb, "v5 text", version=5) == 5  # a higher version is taken as given
    assert cb.get_entity("doc:spec@v2").text == "v2 text"
    assert ("doc:spec", "doc:spec@v2") in _modifies(cb)


def test_two_agents_updating_one_spec_lose_no_edit(cb: ContextBase) -> None:
    _write(cb, "base")
    seen_a = cb.get_entity("doc:spec").version
    seen_b = cb.get_entity("doc:spec").version
    assert _write(cb, "A's edit", version=seen_a + 1) == 2
    with pytest.raises(ConflictError):
        _write(cb, "B's edit", version=seen_b + 1)
    # B reads again and writes on top: A's edit is kept as v2
    assert _write(cb, "B's edit on A's", version=cb.get_entity("doc:spec").version + 1) == 3
    assert cb.get_entity("doc:spec@v2").text == "A's edit"


def test_archived_versions_stay_out_of_search_and_assembly(cb: ContextBase) -> None:
    _write(cb, "the retry budget is walrusfive attempts")
    _write(cb, "the retry budget is three attempts")
    found = {c.item.owner_id for c in cb.search("walrusfive", preset="keyword").results}
    assert found == set()
    now = {c.item.owner_id for c in cb.search("retry budget attempts", preset="keyword").results}
    assert now == {"doc:spec"}
    ctx = cb.assemble_context(agent_role="coder", user_intent="what is the retry budget")
    text = json.dumps(ctx.messages, ensure_ascii=False)
    assert "three attempts" in text and "walrusfive" not in text


def test_keep_history_false_overwrites_in_place(cb: ContextBase) -> None:
    _write(cb, "first", keep_history=False)
    assert _write(cb, "second", keep_history=False) == 1
    assert cb.get_entity("doc:spec").text == "second"
    with pytest.raises(NotFoundError):
        cb.get_entity("doc:spec@v1")
    with pytest.raises(ConflictError):  # the version check holds all the same
        _write(cb, "third", version=1, keep_history=False)


def test_the_layers_below_still_overwrite_in_place(cb: ContextBase) -> None:
    """Anchoring, the LangGraph store and the outcome loop write through Components and keep
    their own versions: theirs is the in-place write it always was."""
    write = cb.components.upsert_entity
    write("requirement", "page", "page by user id", id="requirement:x")
    again = write("requirement", "page", "page by user id, 20 a page", id="requirement:x")
    assert (again.version, again.text) == (1, "page by user id, 20 a page")
    with pytest.raises(NotFoundError):
        cb.get_entity("requirement:x@v1")
    assert write("requirement", "page", "older", id="requirement:x", version=1).text == "older"
    assert _modifies(cb) == set()


def test_forgetting_an_entity_forgets_its_kept_versions(cb: ContextBase) -> None:
    for text in ("alpha", "beta", "gamma"):
        _write(cb, text)
    cb.upsert_entity("document", "other", "kept apart")
    report = cb.forget(entity_ids=["doc:spec"])
    assert report.removed["entities"] == 3
    for eid in ("doc:spec", "doc:spec@v1", "doc:spec@v2"):
        with pytest.raises(NotFoundError):
            cb.get_entity(eid)
    assert [e.name for e in cb.list_entities(latest_only=False)] == ["other"]
    assert cb.relationships(types=["MODIFIES"], include_closed=True) == []


def _another_base(cb: ContextBase, backend: str, request: pytest.FixtureRequest) -> ContextBase:
    """A second base on the same database with its own connections: another agent."""
    if backend == "postgres":
        from ctxbase.store.postgres import PostgresStore

        store: Any = PostgresStore(request.getfixturevalue("pg_url"), max_size=4)
    else:
        store = SQLiteStore(cb.store.path)  # type: ignore[attr-defined]
    return ContextBase(store, project=cb.project, embedder="hash", background_embedding=False)


def test_racing_writers_lose_no_edit(
    cb: ContextBase, backend: str, request: pytest.FixtureRequest
) -> None:
    """Two agents, each writing 15 times as fast as it can, unconditionally and then with
    the version it read: every write that was accepted is one version, none replaced."""
    other = _another_base(cb, backend, request)
    accepted: list[str] = []
    refused: list[str] = []
    try:
        _write(cb, "start")

        def agent(base: ContextBase, who: str) -> None:
            for i in range(15):
                text = f"{who} plain {i}"
                _write(base, text)
                accepted.append(text)
            for i in range(15):
                text = f"{who} conditional {i}"
                seen = base.get_entity("doc:spec").version
                try:
                    _write(base, text, version=seen + 1)
                    accepted.append(text)
                except ConflictError:
                    refused.append(text)

        threads = [
            threading.Thread(target=agent, args=(b, w)) for b, w in ((cb, "A"), (other, "B"))
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        other.close()
    head = cb.get_entity("doc:spec")
    assert head.version == 1 + len(accepted)
    kept = [cb.get_entity(f"doc:spec@v{n}").text for n in range(1, head.version)]
    assert sorted([*kept, head.text]) == sorted(["start", *accepted])
    assert len(accepted) + len(refused) == 60


def test_an_edge_asserted_again_keeps_its_earlier_confidence(cb: ContextBase) -> None:
    _write(cb, "spec")
    cb.upsert_entity("code", "x.py", "x", id="doc:x")
    first = cb.create_edge(from_id="doc:spec", to_id="doc:x", edge_type="REFERENCES",
                           properties={"confidence": 0.9})  # fmt: skip
    again = cb.create_edge(from_id="doc:spec", to_id="doc:x", edge_type="REFERENCES",
                           properties={"confidence": 0.9})  # fmt: skip
    assert again.id == first.id  # the same assertion again: nothing kept
    assert len(cb.relationships("doc:spec", types=["REFERENCES"], include_closed=True)) == 1
    cb.create_edge(from_id="doc:spec", to_id="doc:x", edge_type="REFERENCES",
                   properties={"confidence": 0.2})  # fmt: skip
    [now] = cb.relationships("doc:spec", types=["REFERENCES"])
    assert (now.id, now.confidence, now.valid_to) == (first.id, 0.2, None)
    every = cb.relationships("doc:spec", types=["REFERENCES"], include_closed=True)
    [kept] = [r for r in every if r.id != first.id]
    assert (kept.id, kept.confidence) == (f"{first.id}@1", 0.9)
    assert kept.valid_to is not None and kept.valid_to <= now.valid_from
    assert [h.node_id for h in cb.neighbourhood("doc:spec", 1, types=["REFERENCES"])] == ["doc:x"]
    # anchoring's own edge write re-weighs in place, as before
    cb.components.upsert_relationship("doc:spec", "REFERENCES", "doc:x", source="auto:x",
                                      confidence=0.5)  # fmt: skip
    every = cb.relationships("doc:spec", types=["REFERENCES"], include_closed=True)
    assert sorted(r.confidence for r in every) == [0.5, 0.9]
