"""Versions of one document in separate files (seed 000: an outdated API document V2.1
served as the current V3.2): after an ingest only the newest version is the latest."""

from __future__ import annotations

from pathlib import Path

from ctxbase import ContextBase
from ctxbase.anchor.doc_versions import document_title_key, version_order
from ctxbase.model import make_entity_id

V21 = "# 订单 API 文档 V2.1\n\n订单查询接口 GET /orders 返回列表，缓存 60 秒。\n"
V32 = "# 订单 API 文档 V3.2\n\n订单查询接口 GET /v3/orders 返回分页结构，缓存 300 秒。\n"
OTHER = "# 退款 API 文档 V1.0\n\n退款接口 POST /refunds，订单查询不缓存。\n"


def _texts(cb: ContextBase, query: str, **options: object) -> str:
    """The documents and sections found (a file's card names what it holds, of any version)."""
    hits = cb.search(query, top_k=20, **options).results  # type: ignore[arg-type]
    return "\n".join(c.item.text for c in hits if c.item.type in ("document", "section"))


def test_the_newest_version_is_served_and_the_older_kept(cb: ContextBase, tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "api_v21.md").write_text(V21)
    (docs / "api_v32.md").write_text(V32)
    (docs / "refunds.md").write_text(OTHER)
    cb.ingest(str(docs), repo="docs")
    query = "订单查询接口 缓存 秒"
    for preset in ("hybrid", "hybrid_graph"):
        found = _texts(cb, query, preset=preset)
        assert "V3.2" in found and "V2.1" not in found and "退款" in found
    assert "V2.1" in _texts(cb, query, latest_only=False)  # kept, as an older version
    ctx = cb.assemble_context(agent_role="coder", user_intent="订单查询接口文档 缓存")
    served = {d["id"] for d in ctx.documents}
    older = {
        e.id
        for t in ("document", "section")
        for e in cb.store.list_entities(cb.project, type=t, latest_only=False)
        if "V2.1" in e.name
    }
    assert older and not older & served
    assert any("V3.2" in d["name"] for d in ctx.documents)
    # the newest file removed: the version before it is the latest again
    (docs / "api_v32.md").unlink()
    cb.ingest(str(docs), repo="docs")
    found = _texts(cb, query)
    assert "V2.1" in found and "V3.2" not in found


def test_titles_and_versions_compare() -> None:
    assert document_title_key("订单 API 文档 V2.1") == document_title_key("订单 API 文档 v3.2")
    assert document_title_key("Guide version 2.0") == "guide"
    # whole-number versions after a V/v or a version word group too; bare numbers do not
    for title in ("Guide V1", "guide v2", "Guide version 3", "Guide_V4"):
        assert document_title_key(title) == "guide", title
    assert document_title_key("订单文档 版本2") == "订单文档"
    for title in ("Python 3", "Step 2", "Setup IPv6", "Part V", "Dev2"):
        assert document_title_key(title) == title.casefold(), title
    assert version_order("3.2") > version_order("2.10") > version_order("2.9")


def test_whole_number_versions_are_grouped_without_changing_ids(
    cb: ContextBase, tmp_path: Path
) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "guide_1.md").write_text("# Guide V1\n\nThe order cache keeps rows 60 s.\n")
    (docs / "guide_2.md").write_text("# Guide V2\n\nThe order cache keeps rows 300 s.\n")
    (docs / "py2.md").write_text("# Python 2\n\nUse format strings.\n")
    (docs / "py3.md").write_text("# Python 3\n\nUse f-strings.\n")
    cb.ingest(str(docs), repo="docs")
    latest = {
        e.name: e.latest
        for e in cb.store.list_entities(cb.project, type="document", latest_only=False)
    }
    assert latest == {"Guide V1": False, "Guide V2": True, "Python 2": True, "Python 3": True}
    # documents anchored without a path keep their ids: the id rule is not widened
    report = cb.anchor_document("# Guide V1\n\nText.\n", title="Guide V1")
    assert report.source_id == make_entity_id("document", "guide v1#document")
