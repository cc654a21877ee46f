"""Signed metadata: tampering with a stored entity or relation is detected."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

import ctxbase
from ctxbase import ContextBase
from ctxbase.anchor.ingest import ingest_path
from ctxbase.anchor.signing import (
    filter_signed,
    key_env_var,
    project_key,
    sign_entity,
    sign_stored_entities,
    verify_entity,
    verify_relation,
    verify_results,
)

KEY = b"project-secret"


@pytest.fixture
def signed(tmp_path: Path) -> tuple[ContextBase, Path]:
    root = tmp_path / "src"
    root.mkdir()
    (root / "pay.py").write_text(
        "def cross_border_limit(amount):\n    return amount <= 50000\n\n\n"
        "def apply_limit(amount):\n    return cross_border_limit(amount)\n"
    )
    db = tmp_path / "x.db"
    cb = ctxbase.open(str(db), project="p", embedder="hash", background_embedding=False)
    ingest_path(cb, root, sign_key=KEY)
    return cb, db


def test_ingested_entities_and_relations_are_signed(signed: tuple[ContextBase, Path]) -> None:
    cb, _ = signed
    entities = cb.list_entities()
    assert entities and all(verify_entity(e, KEY) for e in entities)
    assert not any(verify_entity(e, b"another key") for e in entities)
    rels = cb.relationships()
    assert rels and all(verify_relation(r, KEY) for r in rels)


def test_tampered_entity_is_detected_and_filtered(signed: tuple[ContextBase, Path]) -> None:
    cb, db = signed
    cb.wait_for_embeddings()
    target = next(e for e in cb.list_entities(type="code") if e.name.endswith("cross_border_limit"))
    with sqlite3.connect(db) as conn:  # someone edits the database behind our back
        conn.execute(
            "UPDATE entities SET text=replace(text, '50000', '5000000') WHERE entity_id=?",
            (target.id,),
        )
    tampered_entity = cb.get_entity(target.id)
    assert "5000000" in tampered_entity.text and not verify_entity(tampered_entity, KEY)

    response = cb.search("cross_border_limit amount", preset="keyword")
    owners = {c.item.owner_id for c in response.results}
    assert target.id in owners
    assert verify_results(cb, response, KEY) == [target.id]
    kept, tampered = filter_signed(response.results, KEY, cb.store, "p")
    assert tampered == [target.id]
    assert target.id not in {c.item.owner_id for c in kept} and kept


def test_unsigned_entities_fail_a_required_signature(tmp_path: Path) -> None:
    cb = ctxbase.open(str(tmp_path / "x.db"), project="p", embedder="hash")
    plain = cb.upsert_entity("requirement", "cache_orders", "cache order queries for 5 minutes")
    cb.upsert_entity("requirement", "page_orders", "page order queries by user id")
    results = cb.search("order queries", preset="keyword").results
    kept, tampered = filter_signed(results, KEY, cb.store, "p")
    assert kept == [] and tampered == []  # unsigned: dropped, not tampered
    kept, _ = filter_signed(results, KEY, cb.store, "p", require_signature=False)
    assert len(kept) == 2
    assert sign_stored_entities(cb, [plain.id], KEY) == 1
    kept, tampered = filter_signed(results, KEY, cb.store, "p")
    assert [c.item.owner_id for c in kept] == [plain.id] and tampered == []


def test_a_required_signature_returns_top_k_verified_hits(tmp_path: Path) -> None:
    """Unsigned entities ranked above the events must not take their places: the search
    goes deeper until `top_k` verified hits (or everything) are found."""
    cb = ctxbase.open(str(tmp_path / "x.db"), project="p", embedder="hash")
    for n in range(8):
        cb.upsert_entity("requirement", f"cache_{n}", f"cache cache cache rule {n}")
    events = [
        cb.record("user_message", session_id="s", text=f"the cache is cold {n}") for n in range(2)
    ]
    response = cb.search(
        "cache", preset="keyword", top_k=2, require_signature=True, signing_key=KEY
    )
    assert {c.item.owner_id for c in response.results} == {e.id for e in events}
    assert response.unsigned >= 1


def test_project_keys_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    assert key_env_var("shop-v2") == "CTXBASE_HMAC_KEY_SHOP_V2"
    monkeypatch.delenv("CTXBASE_HMAC_KEY", raising=False)
    monkeypatch.delenv("CTXBASE_HMAC_KEY_SHOP_V2", raising=False)
    assert project_key("shop-v2") is None
    monkeypatch.setenv("CTXBASE_HMAC_KEY", "global")
    assert project_key("shop-v2") == b"global"
    monkeypatch.setenv("CTXBASE_HMAC_KEY_SHOP_V2", "own")
    assert project_key("shop-v2") == b"own"
    assert project_key("shop-v2", "given") == b"given"


def test_signature_covers_name_properties_and_text(signed: tuple[ContextBase, Path]) -> None:
    cb, _ = signed
    entity = cb.list_entities(type="code")[0]
    for change in (
        {"name": entity.name + "_x"},
        {"text": entity.text + " "},
        {"properties": {**entity.properties, "line_end": 999}},
        {"version": entity.version + 1},
    ):
        assert not verify_entity(entity.model_copy(update=change), KEY)
    moved = entity.model_copy(update={"latest": False, "active": False})
    assert verify_entity(moved, KEY)  # bookkeeping flags are not signed
    assert sign_entity(entity, KEY) == entity.properties["_sig"]
