"""Capture anchoring keeps each project's symbol index between messages (weave.py,
SymbolIndexCache): read whole once, then only what was written since, and whole again when
an entity it holds was hidden, restored, forgotten or superseded. What a message links to is
what the project holds when it is anchored, on every backend."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from ctxbase import ContextBase
from ctxbase.anchor.weave import SymbolIndex


@pytest.fixture
def whole_reads(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """The projects whose index was read whole, in order."""
    read: list[str] = []
    real = SymbolIndex.from_store.__func__  # type: ignore[attr-defined]

    def counted(cls: type[SymbolIndex], store: object, project_id: str) -> SymbolIndex:
        read.append(project_id)
        return real(cls, store, project_id)  # type: ignore[no-any-return]

    monkeypatch.setattr(SymbolIndex, "from_store", classmethod(counted))
    yield read


def _code(cb: ContextBase, name: str) -> str:
    cb.upsert_entity(
        "code",
        name,
        f"def {name}(): ...",
        id=f"code_{name}",
        properties={"kind": "function", "symbol": f"app.pay.{name}"},
    )
    return f"code_{name}"


def _linked(cb: ContextBase, text: str, target: str) -> bool:
    """Record `text`, wait for its anchoring: does it (or its requirement) name `target`?"""
    ev = cb.record("user_message", session_id="s1", text=text)
    cb.flush()
    sources = {ev.id} | {
        e.id for e in cb.list_entities(type="requirement") if e.properties.get("event_id") == ev.id
    }
    return any(r.from_id in sources for r in cb.relationships(target, types=["REFERENCES"]))


def test_each_message_links_to_what_the_project_holds_then(
    cb: ContextBase, whole_reads: list[str]
) -> None:
    refund = _code(cb, "refund_order")
    assert _linked(cb, "We must call refund_order twice.", refund)
    assert whole_reads == [cb.project]

    charge = _code(cb, "charge_card")  # written since: read alone, added to the kept index
    assert _linked(cb, "We must call charge_card once.", charge)
    assert _linked(cb, "We must call refund_order again.", refund)
    assert whole_reads == [cb.project]  # nothing it held changed: not read whole again

    cb.soft_delete([charge])
    assert not _linked(cb, "We must call charge_card before shipping.", charge)
    cb.restore([charge])
    assert _linked(cb, "We must call charge_card after shipping.", charge)
    cb.forget(entity_ids=[refund])
    assert not _linked(cb, "We must call refund_order on failure.", refund)
    # whole after the hide and the forget; the restored entity is newer than any the index
    # held, so it was read alone
    assert len(whole_reads) == 3


def test_a_renamed_entity_is_matched_by_its_new_name_only(cb: ContextBase) -> None:
    old = _code(cb, "settle_batch")
    assert _linked(cb, "We must call settle_batch nightly.", old)
    cb.upsert_entity(  # a new version under the same id: the old name is no longer it
        "code",
        "close_batch",
        "def close_batch(): ...",
        id=old,
        properties={"kind": "function", "symbol": "app.pay.close_batch"},
    )
    assert _linked(cb, "We must call close_batch nightly.", old)
    assert not _linked(cb, "We must call settle_batch hourly.", old)


def test_a_batch_that_fails_leaves_no_index_behind(
    cb: ContextBase, whole_reads: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """An index a failed batch may have added to (code blocks it rolled back) is read
    whole again by the next batch."""
    from ctxbase.anchor import capture_rules

    refund = _code(cb, "refund_order")
    assert _linked(cb, "We must call refund_order twice.", refund)
    real = capture_rules._anchor_one

    def failing(*args: object, **kwargs: object) -> object:
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(capture_rules, "_anchor_one", failing)
    cb.record("user_message", session_id="s1", text="We must call refund_order later.")
    cb.flush()
    assert cb.anchor_stats().errors == 1
    monkeypatch.setattr(capture_rules, "_anchor_one", real)
    assert _linked(cb, "We must call refund_order at last.", refund)
    assert whole_reads == [cb.project, cb.project]
