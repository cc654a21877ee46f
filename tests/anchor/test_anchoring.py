"""Anchoring messages and documents: code blocks, who wrote them, document versions."""

from __future__ import annotations

from pathlib import Path

import pytest

import ctxbase
from ctxbase import ContextBase
from ctxbase.anchor.anchoring import anchor_document, anchor_message
from ctxbase.anchor.entities import (
    entity_types,
    is_entity_type,
    register_entity_type,
)
from ctxbase.anchor.ingest import ingest_path
from ctxbase.store.base import ItemFilter

SPEC_V1 = """# Redis 缓存规范 v3.1

## 缓存时长

订单查询接口必须缓存 5 分钟，键名使用 order:{user_id}。

## 失效

写入订单后删除缓存。
"""
SPEC_V2 = (
    SPEC_V1.replace("v3.1", "v3.2")
    .replace("5 分钟", "10 分钟")
    .replace("## 失效\n\n写入订单后删除缓存。\n", "## 监控\n\n缓存命中率低于 80% 时告警。\n")
)


@pytest.fixture
def cb(tmp_path: Path) -> ContextBase:
    root = tmp_path / "repo"
    root.mkdir()
    (root / "orders.py").write_text("def get_user_orders(user_id):\n    return []\n")
    (root / "schema.sql").write_text("CREATE TABLE orders (id INT, user_id INT);\n")
    base = ctxbase.open(str(tmp_path / "x.db"), project="p", embedder="hash")
    ingest_path(base, root)
    return base


def test_assistant_code_is_generated_and_user_code_referenced(cb: ContextBase) -> None:
    reply = cb.record(
        "assistant_message",
        session_id="s1",
        agent_role="code_gen",
        text=(
            "改好了：\n\n```python\ndef get_user_orders(user_id, page=1):\n"
            "    return query(user_id, page)\n```\n\n"
            "```sql\nSELECT id FROM orders WHERE user_id = 1 LIMIT 20;\n```\n"
        ),
    )
    cb.flush()  # capture anchoring (ctxbase:<rule>) done: this call's auto:<rule> edges last
    report = anchor_message(cb, reply)
    assert report.blocks == 2 and report.languages == ["python", "sql"]
    snippets = cb.store.get_entities("p", report.entity_ids)
    func = next(e for e in snippets if e.properties.get("kind") == "function")
    stmt = next(e for e in snippets if e.type == "sql")
    assert func.properties["session_id"] == "s1" and func.properties["origin"] == "generated"
    assert func.properties["line_start"] == 4  # the def line inside the message
    gen = {r.to_id for r in cb.relationships(reply.id, direction="out", types=["GENERATES"])}
    assert gen == set(report.entity_ids)
    repo_func = next(e for e in cb.list_entities(type="code") if e.name == "orders.get_user_orders")
    modifies = cb.relationships(func.id, direction="out", types=["MODIFIES"])
    assert [(r.to_id, r.confidence, r.source) for r in modifies] == [
        (repo_func.id, 0.75, "auto:symbol_redefined")
    ]
    table = cb.list_entities(type="table")[0]
    refs = cb.relationships(stmt.id, direction="out", types=["REFERENCES"])
    assert [(r.to_id, r.source) for r in refs] == [(table.id, "auto:sql_table")]
    # Anchoring the same message again writes nothing new.
    assert anchor_message(cb, reply.id).written == 0

    pasted = cb.record(
        "user_message", session_id="s1", text="这段报错了：\n```\nSELECT * FROM orders;\n```"
    )
    report2 = anchor_message(cb, pasted)
    assert report2.languages == ["sql"]
    assert {r.type for r in report2.relations if r.from_id == pasted.id} == {"REFERENCES"}


def test_message_without_code_only_weaves_mentions(cb: ContextBase) -> None:
    ev = cb.record("user_message", session_id="s2", text="get_user_orders 的 orders 表要加索引")
    report = anchor_message(cb, ev)
    assert report.blocks == 0 and report.entity_ids == []
    assert {r.source for r in report.relations} == {"auto:mentions"}
    assert len(report.relations) == 2


def test_new_document_version_supersedes_the_old(cb: ContextBase) -> None:
    first = anchor_document(cb, SPEC_V1, title="Redis 缓存规范 v3.1")
    doc = cb.get_entity(first.source_id)
    assert doc.properties["version"] == "3.1"
    assert doc.properties["key_terms"]
    second = anchor_document(cb, SPEC_V2, title="Redis 缓存规范 v3.2")
    assert second.source_id == first.source_id  # same document, new version
    doc2 = cb.get_entity(first.source_id)
    assert doc2.version == 2 and doc2.properties["version"] == "3.2"
    chain = cb.relationships(doc2.id, direction="out", types=["MODIFIES"])
    assert [r.to_id for r in chain] == [f"{doc2.id}@v1"]
    hits = cb.search("缓存 分钟", preset="keyword").results
    texts = " ".join(h.item.text for h in hits)
    assert "10 分钟" in texts and "5 分钟" not in texts
    old = cb.search("缓存 分钟", preset="keyword", latest_only=False, dedupe_threshold=None).results
    assert "5 分钟" in " ".join(h.item.text for h in old)
    sections = [e.name for e in cb.list_entities(type="section")]
    assert "失效" not in sections and "监控" in sections
    dropped = cb.list_entities(type="section", name="失效", latest_only=False)
    assert [e.latest for e in dropped] == [False]


def test_entity_type_registry() -> None:
    assert {"document", "code", "sql", "requirement", "test_case"} <= set(entity_types())
    register_entity_type("api_endpoint", "an HTTP endpoint")
    assert is_entity_type("api_endpoint")
    with pytest.raises(ctxbase.ValidationError):
        register_entity_type("Bad Name")


@pytest.mark.slow
def test_real_embedder_finds_ingested_code(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    root.mkdir()
    (root / "cache.py").write_text(
        "def cache_order_query(user_id):\n"
        '    """Keep a user\'s order list in Redis for five minutes."""\n'
        "    return redis.setex(f'order:{user_id}', 300, load(user_id))\n\n\n"
        "def parse_invoice_pdf(path):\n"
        '    """Extract line items from a supplier invoice."""\n'
        "    return []\n"
    )
    cb = ctxbase.open(str(tmp_path / "x.db"), project="p", background_embedding=False)
    ingest_path(cb, root)
    cb.wait_for_embeddings()
    code_only = ItemFilter(types=("code",))
    hits = cb.search("缓存用户订单", preset="semantic", top_k=1, filters=code_only).results
    assert "cache_order_query" in hits[0].item.text
    top = cb.search("which file parses supplier invoices", preset="semantic", top_k=3).results
    assert any("parse_invoice_pdf" in h.item.text for h in top)
