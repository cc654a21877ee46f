"""Rule-based extraction from message text: statements, spec references, mentions."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as hst

from ctxbase.anchor import extract
from ctxbase.anchor.extract import (
    code_asked_for,
    match_document,
    mentions,
    spec_references,
    statements,
)


def test_a_chinese_requirement_and_its_spec() -> None:
    text = "我们需要订单查询接口支持按用户 ID 分页，缓存 5 分钟，符合公司 Redis 规范。"
    (st,) = statements(text)
    assert (st.kind, st.rule) == ("requirement", "requirement") and st.text == text
    (ref,) = spec_references(text)
    assert ref.phrase == "公司 Redis 规范"
    titles = {"d1": "Redis 缓存规范 V3.2", "d2": "MySQL 索引规范"}
    assert match_document(ref.phrase, titles) == ("d1", 0.9)


def test_generic_words_alone_match_no_document() -> None:
    assert match_document("公司规范", {"d1": "Redis 缓存规范"}) is None
    # two documents equally named by the phrase: ambiguous, no match
    assert match_document("Redis 规范", {"a": "Redis 规范 V1", "b": "Redis 规范 V2"}) is None


def test_english_statements_and_questions() -> None:
    text = (
        "We decided to use Postgres for the ledger. The API must return 404 for unknown ids. "
        "I need to buy milk. Should we cache it?"
    )
    found = [(s.kind, s.text) for s in statements(text)]
    assert found == [
        ("decision", "We decided to use Postgres for the ledger."),
        ("requirement", "The API must return 404 for unknown ids."),
    ]
    assert [s.kind for s in statements("我们决定选用 Kafka 做消息队列。")] == ["decision"]
    assert statements("今天天气不错。") == []


def test_english_spec_references() -> None:
    refs = spec_references("Paging works per the API style guide. Follow the company Redis spec.")
    assert [r.phrase for r in refs] == ["API style guide", "company Redis spec"]
    assert match_document("company Redis spec", {"d": "Redis caching spec v3"}) == ("d", 0.9)


def test_mentions_of_files_tables_routes_and_people() -> None:
    text = (
        "See src/app/orders.py and config.yaml; the orders_v2 表 is slow, "
        "SELECT * FROM order_refunds; GET /api/orders/{id} breaks, cc @alice.w. "
        "It took 3.5 hours."
    )
    got = {(m.kind, m.value, m.rule) for m in mentions(text)}
    assert got == {
        ("file", "src/app/orders.py", "file_path"),
        ("file", "config.yaml", "file_path"),
        ("table", "orders_v2", "table_name"),
        ("table", "order_refunds", "table_name"),
        ("api", "GET /api/orders/{id}", "api_route"),
        ("person", "alice.w", "person_handle"),
    }


def _tables(text: str) -> list[str]:
    return [m.value for m in mentions(text) if m.kind == "table"]


def test_a_conjunction_or_stop_word_next_to_table_is_no_table() -> None:
    # "X table" took the word before "table" whatever it was: "and" became a table
    assert _tables("see app/cache.py and table orders") == []
    assert _tables("read from table orders, then the orders table") == ["orders"]
    assert _tables("join orders_v2 and table orders") == ["orders_v2"]
    assert _tables("run create table orders_v2; drop table if exists tmp_orders") == [
        "orders_v2",
        "tmp_orders",
    ]
    # Chinese: 和 / 以及 / 与 between the names, never one of them
    assert _tables("看 app/cache.py 和表 orders") == ["orders"]
    assert _tables("检查 app/cache.py 以及 表 orders。") == ["orders"]
    assert _tables("orders表和users表") == ["orders", "users"]
    assert _tables("表orders以及表users") == ["orders", "users"]
    assert _tables("查 orders 与 user_roles 表") == ["user_roles"]
    assert _tables("用户表 and 订单表 都要加索引") == []


def test_plain_prose_mentions_nothing() -> None:
    assert mentions("We went to the lake on Sunday and had a great time.") == []
    assert mentions("我们周末去爬山，天气很好。") == []


def test_code_asked_for_names_existing_code_only() -> None:
    assert code_asked_for("参考刚才的合规指南修改 SQL") == "sql"
    assert code_asked_for("按照 Redis 规范改一下刚才的函数") == "code"
    assert code_asked_for("per the API spec, fix that query") == "sql"
    assert code_asked_for("按照规范写一个订单查询接口") is None  # new code, nothing to point at
    assert code_asked_for("参考合规指南回答这个问题") is None


# The table-after pattern as it was before it could only start at the start of a run of
# identifier characters: what it finds must not change.
_IDENT = r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)?"
_TABLE_AFTER_BEFORE = re.compile(
    rf"[`\"]?({_IDENT})[`\"]?\s*(?:表|数据表|\btable\b)", re.IGNORECASE
)
_PIECES = [*'aZ_19."` 表数据xſK中é\n', "table", " table", "TABLE", "数据表", "users"]


@settings(max_examples=3000, deadline=None)
@given(hst.lists(hst.sampled_from(_PIECES), max_size=16))
def test_table_names_are_found_as_before(pieces: list[str]) -> None:
    text = "".join(pieces)
    found = [(m.group(1), m.end()) for m in extract._TABLE_AFTER.finditer(text)]
    assert found == [(m.group(1), m.end()) for m in _TABLE_AFTER_BEFORE.finditer(text)]


def test_a_long_identifier_run_is_read_in_linear_time() -> None:
    # "a" * 20_000 took 13 s (every start in the run scanned to its end, then backtracked);
    # 1M characters would have taken hours. Now the run is read once.
    for run in ("a" * 1_000_000, "3f9a2b" * 150_000):
        found = [m.value for m in mentions(f"{run}表 and orders_v2 table") if m.kind == "table"]
        assert found == sorted({run.lstrip("0123456789").lower(), "orders_v2"})
