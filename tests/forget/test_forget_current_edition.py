"""Forgetting the current edition of a document written again under the same name (another
id) makes the edition it superseded current again: nothing is left out of searches that
was there before it came."""

from __future__ import annotations

from ctxbase import ContextBase


def _doc(cb: ContextBase, doc_id: str, title: str, text: str) -> None:
    cb.upsert_entity(entity_type="document", entity_id=doc_id, name=title, text=text)


def _current(cb: ContextBase, *ids: str) -> list[str]:
    return [i for i in ids if (e := cb.get_entity(i)) is not None and e.latest]


def test_the_superseded_edition_is_current_again(cb: ContextBase) -> None:
    _doc(cb, "doc_101", "订单 API 文档 V2.1", "GET /orders returns a list of walrus orders")
    _doc(cb, "doc_102", "订单 API 文档 V3.2", "GET /v3/orders returns pages of walrus orders")
    assert _current(cb, "doc_101", "doc_102") == ["doc_102"]
    cb.forget(entity_ids=["doc_102"])
    assert _current(cb, "doc_101") == ["doc_101"]
    old = cb.get_entity("doc_101")
    assert old is not None and "superseded_by" not in old.properties
    cb.wait_for_embeddings()
    found = [h.item.owner_id for h in cb.search("walrus orders").results]
    assert found[:1] == ["doc_101"]


def test_of_three_editions_the_one_before_the_forgotten_is_current(cb: ContextBase) -> None:
    for n in (1, 2, 3):
        _doc(cb, f"doc_20{n}", "支付规范", f"edition {n}: refunds within {n} days")
    assert _current(cb, "doc_201", "doc_202", "doc_203") == ["doc_203"]
    cb.forget(entity_ids=["doc_203"])
    assert _current(cb, "doc_201", "doc_202") == ["doc_202"]
    first = cb.get_entity("doc_201")
    assert first is not None and first.properties.get("superseded_by") == "doc_202"


def test_forgetting_an_old_edition_leaves_the_current_one(cb: ContextBase) -> None:
    _doc(cb, "doc_301", "Runbook V1", "restart the walrus service")
    _doc(cb, "doc_302", "Runbook V2", "restart the walrus cluster")
    cb.forget(entity_ids=["doc_301"])
    assert _current(cb, "doc_302") == ["doc_302"]


def test_editions_written_oldest_last_follow_the_one_made_current(cb: ContextBase) -> None:
    _doc(cb, "doc_403", "Runbook V3", "third")
    _doc(cb, "doc_401", "Runbook V1", "first")  # older versions written later: superseded
    _doc(cb, "doc_402", "Runbook V2", "second")
    assert _current(cb, "doc_401", "doc_402", "doc_403") == ["doc_403"]
    cb.forget(entity_ids=["doc_403"])
    assert _current(cb, "doc_401", "doc_402") == ["doc_402"]
    first = cb.get_entity("doc_401")
    assert first is not None and first.properties.get("superseded_by") == "doc_402"


def test_a_hidden_current_edition_leaves_the_one_before_current_until_restored(
    cb: ContextBase,
) -> None:
    _doc(cb, "doc_501", "订单 API 文档 V2.1", "GET /orders returns walrus lists")
    _doc(cb, "doc_502", "订单 API 文档 V3.2", "GET /v3/orders returns walrus pages")
    assert cb.soft_delete(["doc_502"]) == 1
    assert _current(cb, "doc_501") == ["doc_501"]
    cb.wait_for_embeddings()
    assert [h.item.owner_id for h in cb.search("walrus orders").results][:1] == ["doc_501"]
    assert cb.restore(["doc_502"]) == 1
    assert _current(cb, "doc_501", "doc_502") == ["doc_502"]
    old = cb.get_entity("doc_501")
    assert old is not None and old.properties.get("superseded_by") == "doc_502"
