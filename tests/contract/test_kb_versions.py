"""Knowledge-base versions on every backend: tag an ingest, re-ingest changed files, pin the
tag (searches and assemblies see the tagged text), unpin (the newest again), and a pin that
holds after the store is reopened. Pinning is a view: nothing written since is lost."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from contract_helpers import add_entity, make_event, write

from ctxbase import ContextBase
from ctxbase.errors import NotFoundError, ValidationError
from ctxbase.store.base import ItemFilter, KnowledgeView, Store

Opener = Callable[[], ContextBase]

OLD = "The refund window is fourteen days from delivery."
NEW = "The refund window is thirty days from delivery."


def _write(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        target = root / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
    return root


@pytest.fixture
def opener(
    backend: str, tmp_path: Path, project_id: str, request: pytest.FixtureRequest
) -> Iterator[Opener]:
    """Opens a ContextBase on one database, as often as asked (to reopen it)."""
    url = request.getfixturevalue("pg_url") if backend == "postgres" else None
    target = url if url is not None else str(tmp_path / f"kb-{uuid.uuid4().hex[:6]}.db")
    opened: list[ContextBase] = []

    def open_base() -> ContextBase:
        base = ContextBase(target, project=project_id, embedder="hash", background_embedding=False)
        opened.append(base)
        return base

    yield open_base
    for base in opened:
        base.close()


def _texts(cb: ContextBase, query: str, **overrides: Any) -> str:
    response = cb.search(query, preset="keyword", top_k=10, **overrides)
    return "\n".join(c.item.text for c in response.results)


def _hybrid(cb: ContextBase, query: str) -> str:
    cb.wait_for_embeddings(timeout=60)
    response = cb.search(query, preset="hybrid", top_k=10)
    return "\n".join(c.item.text for c in response.results)


def _repo(tmp_path: Path) -> Path:
    return _write(
        tmp_path / "shop",
        {
            "docs/refunds.md": f"# Refunds\n\n{OLD}\n\n## Contacts\n\nMail the billing team.\n",
            "docs/shipping.md": "# Shipping\n\nParcels leave the warehouse every morning.\n",
            "src/refund.py": '"""Refunds."""\n\n\ndef refund_days():\n    return 14\n',
        },
    )


def test_pin_rolls_back_and_unpin_returns(opener: Opener, tmp_path: Path) -> None:
    root = _repo(tmp_path)
    cb = opener()
    cb.ingest(str(root))
    tag = cb.tag_knowledge("v1")
    assert tag.repos == ("shop",) and tag.entities > 0
    with pytest.raises(ValidationError):
        cb.tag_knowledge("v1")  # a version is recorded once
    with pytest.raises(ValidationError):
        cb.tag_knowledge("latest")
    with pytest.raises(NotFoundError):
        cb.tag_knowledge("v9", repos=["no-such-repo"])

    # a changed section, a changed function, a removed file and a new file
    (root / "docs/refunds.md").write_text(
        f"# Refunds\n\n{NEW}\n\n## Contacts\n\nMail the billing team.\n", encoding="utf-8"
    )
    (root / "src/refund.py").write_text(
        '"""Refunds."""\n\n\ndef refund_days():\n    return 30\n', encoding="utf-8"
    )
    (root / "docs/shipping.md").unlink()
    _write(root, {"docs/returns.md": "# Returns\n\nLabels are printed at the kiosk.\n"})
    cb.ingest(str(root))

    assert "thirty" in _texts(cb, "refund window days") and "fourteen" not in _texts(
        cb, "refund window days"
    )
    assert "kiosk" in _texts(cb, "labels kiosk")
    assert "warehouse" not in _texts(cb, "parcels warehouse")

    report = cb.pin_knowledge("v1")
    assert (report.tag, report.missing) == ("v1", 0)
    assert report.hidden > 0 and report.shown > 0
    pinned = _texts(cb, "refund window days")
    assert "fourteen" in pinned and "thirty" not in pinned
    assert "return 14" in _texts(cb, "refund_days")
    assert "return 30" not in _texts(cb, "refund_days")
    assert "warehouse" in _texts(cb, "parcels warehouse")  # removed since: kept for the tag
    assert "kiosk" not in _texts(cb, "labels kiosk")  # written since: hidden
    assert "billing" in _texts(cb, "billing team")  # unchanged units are there either way
    semantic = _hybrid(cb, "refund window days")
    assert "fourteen" in semantic and "thirty" not in semantic
    # one call may ask for the latest (or another version) whatever is pinned
    assert "thirty" in _texts(cb, "refund window days", kb_version="latest")
    assert "fourteen" in _texts(cb, "refund window days", kb_version="v1")
    with pytest.raises(NotFoundError):
        cb.search("refund", kb_version="v7")
    ctx = cb.assemble_context(agent_role="coder", user_intent="how long is the refund window")
    assert "fourteen" in str(ctx.messages) and "thirty days" not in str(ctx.messages)
    assert [t.name for t in cb.knowledge_tags() if t.pinned] == ["v1"]

    assert cb.unpin_knowledge() == "v1"
    assert cb.unpin_knowledge() is None
    latest = _texts(cb, "refund window days")
    assert "thirty" in latest and "fourteen" not in latest
    assert "kiosk" in _texts(cb, "labels kiosk")
    assert "warehouse" not in _texts(cb, "parcels warehouse")


def test_pin_holds_after_reopening_and_follows_ingests(opener: Opener, tmp_path: Path) -> None:
    root = _repo(tmp_path)
    cb = opener()
    cb.ingest(str(root))
    cb.tag_knowledge("v1.2")
    cb.pin_knowledge("v1.2")
    # an ingest while pinned writes the newest text, and the pinned view hides it
    (root / "docs/refunds.md").write_text(f"# Refunds\n\n{NEW}\n", encoding="utf-8")
    cb.ingest(str(root))
    assert "fourteen" in _texts(cb, "refund window days")
    assert "thirty" not in _texts(cb, "refund window days")
    # an ingest that changes nothing writes no new pin record
    written = len(cb.store.state_history(cb.project, "kb_pin", "", "pin"))
    assert cb.ingest(str(root)).files_changed == 0
    assert len(cb.store.state_history(cb.project, "kb_pin", "", "pin")) == written
    cb.close()

    again = opener()
    assert [t.name for t in again.knowledge_tags() if t.pinned] == ["v1.2"]
    assert "fourteen" in _texts(again, "refund window days")
    assert "thirty" not in _texts(again, "refund window days")
    # a second tag of the newer ingest, pinned instead
    again.tag_knowledge("v1.3")
    again.pin_knowledge("v1.3")
    assert "thirty" in _texts(again, "refund window days")
    assert "fourteen" not in _texts(again, "refund window days")
    assert [t.name for t in again.knowledge_tags()] == ["v1.2", "v1.3"]


def test_view_filter_leaves_other_items_alone(opener: Opener, tmp_path: Path) -> None:
    """Items of repositories a view does not cover, and of no repository, pass it."""
    cb = opener()
    cb.ingest(str(_repo(tmp_path)))
    cb.record("user_message", session_id="s1", text="the refund window question again")
    pid = cb.project
    every = cb.store.filter_item_ids(pid, ItemFilter(latest_only=True))
    none_hidden = ItemFilter(latest_only=True, view=KnowledgeView(("shop",)))
    assert cb.store.filter_item_ids(pid, none_hidden) == every
    owners = {it.item_id: it.owner_id for it in cb.store.get_items(pid, sorted(every))}
    one = next(o for o in owners.values() if o.startswith("section:"))
    hiding = ItemFilter(view=KnowledgeView(("shop",), hidden_owner_ids=(one,)))
    assert cb.store.filter_item_ids(pid, hiding) == {i for i, o in owners.items() if o != one}
    other_repo = ItemFilter(view=KnowledgeView(("other",), hidden_owner_ids=(one,)))
    assert cb.store.filter_item_ids(pid, other_repo) == every


def test_versions_not_kept_are_reported_missing(opener: Opener, tmp_path: Path) -> None:
    root = _repo(tmp_path)
    cb = opener()
    cb.ingest(str(root))
    cb.tag_knowledge("v1")
    (root / "docs/refunds.md").write_text(f"# Refunds\n\n{NEW}\n", encoding="utf-8")
    cb.ingest(str(root), keep_history=False)  # the tagged section is overwritten
    report = cb.pin_knowledge("v1")
    assert report.missing >= 1
    pinned = _texts(cb, "refund window days")
    assert "thirty" not in pinned and "fourteen" not in pinned


def test_tagged_units_hidden_since_are_reported_hidden_not_missing(
    opener: Opener, tmp_path: Path
) -> None:
    root = _repo(tmp_path)
    cb = opener()
    cb.ingest(str(root))
    cb.tag_knowledge("v1")
    (section,) = [e for e in cb.list_entities() if OLD in (e.text or "")]
    cb.soft_delete([section.id])
    report = cb.pin_knowledge("v1")
    assert (report.soft_deleted, report.missing) == (1, 0)
    assert report.to_dict()["soft_deleted"] == 1
    cb.restore([section.id])
    assert (cb.pin_knowledge("v1").soft_deleted, cb.pin_knowledge("v1").missing) == (0, 0)
    cb.forget(entity_ids=[section.id])
    assert (cb.pin_knowledge("v1").soft_deleted, cb.pin_knowledge("v1").missing) == (0, 1)


def test_touch_index_changes_the_generation_and_nothing_else(store: Store, project_id: str) -> None:
    write(store, make_event(project_id, "s1", "hello there"))
    before = store.index_generation(project_id)
    count = store.count_items(project_id)
    store.touch_index(project_id)
    assert store.index_generation(project_id) != before
    assert store.count_items(project_id) == count


def test_assembly_does_not_reach_newer_units_by_their_edges(opener: Opener, tmp_path: Path) -> None:
    """A document of the tag links to code by its stable id, which holds the newer version:
    followed while pinned, that edge brings nothing written since the tag."""
    root = _write(
        tmp_path / "shop",
        {
            "docs/policy.md": "# Policy\n\nThe window is computed by `refund_days`.\n",
            "src/refund.py": '"""Refunds."""\n\n\ndef refund_days():\n    return 14\n',
        },
    )
    cb = opener()
    cb.ingest(str(root))
    cb.tag_knowledge("v1")
    (root / "src/refund.py").write_text(
        '"""Refunds."""\n\n\ndef refund_days():\n    return 30\n', encoding="utf-8"
    )
    cb.ingest(str(root))

    def code(ctx: Any) -> str:
        return "\n".join(str(c.get("content") or c.get("text")) for c in ctx.code_snippets)

    def assemble() -> Any:
        return cb.assemble_context(
            agent_role="coder",
            user_intent="what does the window policy say",
            strategy="referenced_code_first",
        )

    assert "return 30" in code(assemble())
    cb.pin_knowledge("v1")
    pinned = assemble()
    assert "return 30" not in code(pinned)
    dropped = [d for d in pinned.trace["dropped"] if d.get("reason") == "not in the pinned version"]
    assert dropped


def test_a_view_of_many_units_is_one_argument_each(store: Store, project_id: str) -> None:
    """A pinned view hiding more units than a statement takes arguments still filters."""
    ev = make_event(project_id, "s1", "hello there")
    write(store, ev)
    ent = add_entity(store, project_id, "section", "a.md > A", "alpha", properties={"repo": "shop"})
    many = tuple(f"code:{i:020d}" for i in range(40_000))
    items = store.filter_item_ids(project_id, ItemFilter())
    own = {i for i in items if i != ev.id}
    assert own  # the entity's units
    view = KnowledgeView(("shop",), hidden_owner_ids=many, shown_owner_ids=many)
    assert store.filter_item_ids(project_id, ItemFilter(latest_only=True, view=view)) == items
    hiding = KnowledgeView(("shop",), hidden_owner_ids=(*many, ent.id, ev.id))
    # the event is of no repository: a view does not concern it
    assert store.filter_item_ids(project_id, ItemFilter(view=hiding)) == {ev.id}
