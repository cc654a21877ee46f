"""Relation weaving rules on real snippets: mentions, SQL tables, tests, requirements."""

from __future__ import annotations

from pathlib import Path

import pytest

import ctxbase
from ctxbase import ContextBase, Entity
from ctxbase.anchor.anchoring import anchor_message, upsert_requirement
from ctxbase.anchor.entities import register_relation_type, relation_types
from ctxbase.anchor.ingest import ingest_path
from ctxbase.anchor.weave import (
    SymbolIndex,
    find_mentions,
    is_distinctive,
    title_named,
    weave_event,
)

ORDERS_PY = '''"""Order queries."""


def get_user_orders(user_id, page=1):
    """Orders of one user, newest first."""
    return run_query("SELECT * FROM orders WHERE user_id = ?", user_id)


def run_query(sql, *args):
    return []


class OrderCache:
    def refresh(self):
        return get_user_orders(1)
'''
SCHEMA_SQL = """CREATE TABLE users (id INT PRIMARY KEY, name TEXT);
CREATE TABLE orders (
    id INT PRIMARY KEY,
    user_id INT REFERENCES users(id),
    total DECIMAL(10, 2)
);
"""
QUERIES_SQL = "SELECT o.id, o.total FROM orders o JOIN users u ON u.id = o.user_id;\n"
TEST_PY = """from app.orders import get_user_orders


def test_get_user_orders_pages():
    assert get_user_orders(1, page=2) == []
"""
DESIGN_MD = """# Order service design v1.2

The `get_user_orders` function pages through the orders table.
It is cached by app.orders.OrderCache.
"""


def _entity(eid: str, etype: str, name: str, **props: object) -> Entity:
    return Entity(id=eid, project_id="p", type=etype, name=name, properties=dict(props))


@pytest.fixture
def index() -> SymbolIndex:
    return SymbolIndex.from_entities(
        [
            _entity("f1", "code", "app.orders.get_user_orders", kind="function"),
            _entity("c1", "code", "app.orders.OrderCache", kind="class"),
            _entity("m1", "code", "app.orders.OrderCache.refresh", kind="method"),
            _entity("r1", "code", "app.users.run", kind="function"),
            _entity("t1", "table", "orders"),
            _entity("t2", "table", "user_events"),
            _entity("d1", "document", "Redis 规范 V3.2", title="Redis 规范 V3.2"),
        ]
    )


def _conf(mentions: list, eid: str) -> float | None:
    return next((m.confidence for m in mentions if m.entity_id == eid), None)


def test_mentions_score_by_match_quality(index: SymbolIndex) -> None:
    text = (
        "Call app.orders.get_user_orders, then OrderCache.refresh. "
        "Rows come from the orders table and user_events."
    )
    found = find_mentions(text, index)
    assert _conf(found, "f1") == 0.95  # exact qualified name
    assert _conf(found, "m1") == 0.9  # dotted suffix
    assert _conf(found, "t1") == 0.8  # plain-word table next to "table"
    assert _conf(found, "t2") == 0.8  # distinctive table name
    assert _conf(found, "c1") is None  # only OrderCache.refresh was named


def test_mentions_ignore_common_words(index: SymbolIndex) -> None:
    text = "We run the orders through a refresh; please run it again and order more."
    assert find_mentions(text, index) == []


def test_mentions_in_chinese_text(index: SymbolIndex) -> None:
    text = "请参考Redis 规范 V3.2，修改get_user_orders函数，并查询orders表。"
    found = find_mentions(text, index)
    assert _conf(found, "f1") == 0.85  # bare distinctive identifier inside Chinese
    assert _conf(found, "t1") == 0.8
    assert _conf(found, "d1") == 0.9  # document title


def test_backticks_make_a_plain_word_a_name(index: SymbolIndex) -> None:
    assert _conf(find_mentions("see `refresh` for details", index), "m1") == 0.75
    assert _conf(find_mentions("see refresh for details", index), "m1") is None


def test_distinctive_identifiers() -> None:
    assert is_distinctive("get_user_orders")
    assert is_distinctive("OrderCache")
    assert is_distinctive("utf8Decode")
    assert not is_distinctive("orders")
    assert not is_distinctive("Order")
    assert not is_distinctive("__init__")
    assert not is_distinctive("to_dict")


def _repo(root: Path) -> Path:
    (root / "app").mkdir(parents=True)
    (root / "app" / "__init__.py").write_text("")
    (root / "app" / "orders.py").write_text(ORDERS_PY)
    (root / "db").mkdir()
    (root / "db" / "schema.sql").write_text(SCHEMA_SQL)
    (root / "db" / "queries.sql").write_text(QUERIES_SQL)
    (root / "tests").mkdir()
    (root / "tests" / "test_orders.py").write_text(TEST_PY)
    (root / "docs").mkdir()
    (root / "docs" / "design.md").write_text(DESIGN_MD + "\nSchema: [schema](../db/schema.sql)\n")
    return root


@pytest.fixture
def woven(tmp_path: Path) -> ContextBase:
    cb = ctxbase.open(str(tmp_path / "x.db"), project="p", embedder="hash")
    report = ingest_path(cb, _repo(tmp_path / "repo"))
    assert report.errors == []
    return cb


def _one(cb: ContextBase, **where: str) -> Entity:
    found = [
        e
        for e in cb.list_entities()
        if all(str(e.properties.get(k, getattr(e, k, None))) == v for k, v in where.items())
    ]
    assert len(found) == 1, (where, [e.name for e in found])
    return found[0]


def _edges(cb: ContextBase, from_id: str, rel_type: str) -> dict[str, tuple[float, str]]:
    return {
        r.to_id: (r.confidence, r.source)
        for r in cb.relationships(from_id, direction="out", types=[rel_type])
    }


def test_repository_weaving(woven: ContextBase) -> None:
    cb = woven
    func = _one(cb, symbol="app.orders.get_user_orders")
    refresh = _one(cb, symbol="app.orders.OrderCache.refresh")
    orders = _one(cb, type="table", name="orders")
    users = _one(cb, type="table", name="users")
    test = _one(cb, type="test_case")
    query = _one(cb, type="sql", path="db/queries.sql")

    assert _edges(cb, refresh.id, "CALLS")[func.id] == (0.95, "auto:calls")
    assert _edges(cb, test.id, "VALIDATES")[func.id][1] == "auto:test_calls"
    sql_refs = _edges(cb, query.id, "REFERENCES")
    assert sql_refs[orders.id] == (0.8, "auto:sql_table")
    assert users.id in sql_refs
    assert _edges(cb, orders.id, "REFERENCES")[users.id] == (0.9, "auto:foreign_key")

    section = _one(cb, type="section", heading="Order service design v1.2")
    mentions = _edges(cb, section.id, "REFERENCES")
    assert mentions[func.id][1] == "auto:mentions"
    assert mentions[orders.id][0] == 0.8
    cls = _one(cb, symbol="app.orders.OrderCache")
    assert mentions[cls.id][0] == 0.95
    doc = _one(cb, type="document")
    assert doc.properties["version"] == "1.2"
    assert "get_user_orders" in doc.properties["key_terms"]
    schema_file = _one(cb, type="file", path="db/schema.sql")
    assert _edges(cb, section.id, "REFERENCES")[schema_file.id][1] == "auto:cites"


def test_event_mentions_and_requirements(woven: ContextBase) -> None:
    cb = woven
    func = _one(cb, symbol="app.orders.get_user_orders")
    doc = _one(cb, type="document")
    ev = cb.record(
        "user_message", session_id="s1", text="get_user_orders 太慢了，给它加上 Redis 缓存"
    )
    rels = weave_event(cb, ev.id)
    assert [(r.to_id, r.type, r.source) for r in rels] == [(func.id, "REFERENCES", "auto:mentions")]
    req, req_rels = upsert_requirement(
        cb,
        "分页缓存",
        "按照 Order service design v1.2 给订单查询加缓存",
        session_id="s1",
    )
    assert [(r.type, r.to_id, r.source) for r in req_rels] == [
        ("FOLLOWS", doc.id, "auto:cites_document")
    ]
    reply = cb.record(
        "assistant_message",
        session_id="s1",
        text=(
            "```python\ndef cached_user_orders(user_id):\n    return get_user_orders(user_id)\n```"
        ),
    )
    cb.flush()  # capture anchoring (ctxbase:<rule>) done: this call's auto:<rule> edges last
    report = anchor_message(cb, reply)
    assert len(report.entity_ids) == 2  # the snippet module and its function
    generated = _edges(cb, req.id, "GENERATES")
    assert set(generated) == set(report.entity_ids)
    assert all(src == "auto:session_code" and conf == 0.7 for conf, src in generated.values())


def test_relation_types_are_extensible(woven: ContextBase) -> None:
    cb = woven
    register_relation_type("MUST_CACHE", "a document requiring a cache")
    assert "MUST_CACHE" in relation_types()
    doc = _one(cb, type="document")
    func = _one(cb, symbol="app.orders.get_user_orders")
    rel = cb.upsert_relationship(doc.id, "MUST_CACHE", func.id, source="human", confidence=0.95)
    assert _edges(cb, doc.id, "MUST_CACHE") == {func.id: (0.95, "human")}
    assert rel.source == "human"


@pytest.mark.parametrize(
    ("text", "title", "named"),
    [
        ("see doc 100 for the limits", "doc 1", False),
        ("see doc 1 for the limits", "doc 1", True),
        ("see doc 1.5 for the limits", "doc 1", False),
        ("see doc 1. then the rest", "doc 1", True),
        ("doc 1, doc 10 and doc 100", "doc 10", True),
        ("retrying payments", "retry", False),
        ("the payment retry guide says", "payment retry guide", True),
        ("(payment retry guide)", "payment retry guide", True),
        ("按照redis缓存规范v3来做", "redis缓存规范", True),
        ("按照 Redis缓存规范V32", "redis缓存规范v3", False),
        ("按照 Redis缓存规范V3.2", "redis缓存规范v3", False),
        ("按照 Redis缓存规范V3。", "redis缓存规范v3", True),
        ("参考支付重试指南处理失败", "支付重试指南", True),
    ],
)
def test_a_title_is_named_only_as_a_whole(text: str, title: str, named: bool) -> None:
    assert title_named(text.lower(), title) is named
