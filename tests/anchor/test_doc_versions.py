"""Versions of one document in separate files (seed 000: an outdated API document V2.1
served as the current V3.2): after an ingest only the newest version is the latest."""

from __future__ import annotations

from pathlib import Path

from ctxbase import ContextBase
from ctxbase.anchor.doc_versions import document_title_key, version_order

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
    assert version_order("3.2") > version_order("2.10") > version_order("2.9")
