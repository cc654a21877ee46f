"""parse_sql across dialects: statements, tables, columns, predicates, CTEs, DDL."""

from __future__ import annotations

from ctxbase.anchor.sql import normalize_dialect, parse_sql

POSTGRES = """-- recent paid orders per active user
WITH recent AS (
    SELECT o.id, o.user_id, o.total FROM orders o
    WHERE o.created_at > now() - interval '7 days' AND o.status = 'paid'
)
SELECT u.name, r.id::text AS order_ref
FROM users u JOIN recent r ON r.user_id = u.id
WHERE u.active;

UPDATE orders SET total = total::numeric * 1.1 WHERE id = 42 RETURNING id, total;
"""


def test_postgres_cte_casts_and_returning() -> None:
    result = parse_sql(POSTGRES)
    assert not result.fallback and result.parser == "sqlglot"
    assert result.properties["dialect"] == "postgres"
    assert result.properties["dialect_source"] == "cues"
    select, update = result.units
    assert (select.kind, select.qualname) == ("sql_statement", "statement_1")
    assert select.start_line == 1 and select.end_line == 8
    assert select.text.startswith("-- recent paid orders")
    props = select.properties
    assert props["statement_kind"] == "select"
    assert props["ctes"] == ("recent",)
    assert set(props["tables_read"]) == {"orders", "users"}  # the CTE is not a table
    assert props["tables_written"] == ()
    assert {"orders.created_at", "orders.status", "users.active", "users.name"} <= set(
        props["columns"]
    )
    assert "recent.user_id" in props["columns"]
    assert "o.status = 'paid'" in props["where"]
    assert "u.active" in props["where"]
    assert {"orders.created_at", "orders.status", "users.active"} <= set(props["filter_columns"])
    assert props["join_conditions"] == ("r.user_id = u.id",)

    assert update.start_line == 10
    assert update.properties["statement_kind"] == "update"
    assert update.properties["tables_written"] == ("orders",)
    assert update.properties["where"] == ("id = 42",)
    assert update.properties["filter_columns"] == ("orders.id",)
    refs = {(ref.from_qualname, ref.kind, ref.target) for ref in result.references}
    assert refs == {
        ("statement_1", "reads_table", "orders"),
        ("statement_1", "reads_table", "users"),
        ("statement_2", "writes_table", "orders"),
    }


def test_mysql_backticks_are_detected_and_unquoted() -> None:
    result = parse_sql("SELECT `id`, `name` FROM `shop`.`users` WHERE `age` > 30 LIMIT 5")
    assert result.properties["dialect"] == "mysql"
    (unit,) = result.units
    assert unit.properties["tables_read"] == ("shop.users",)
    assert unit.properties["columns"] == ("shop.users.id", "shop.users.name", "shop.users.age")
    assert unit.properties["filter_columns"] == ("shop.users.age",)


def test_tsql_top_and_brackets() -> None:
    sql = "SELECT TOP 10 [Name], o.[Total] FROM [dbo].[Orders] o WHERE o.[Total] > 100"
    result = parse_sql(sql)
    assert result.properties["dialect"] == "tsql"
    (unit,) = result.units
    assert unit.properties["tables_read"] == ("dbo.Orders",)
    assert set(unit.properties["columns"]) == {"dbo.Orders.Name", "dbo.Orders.Total"}


def test_given_dialect_is_used_and_aliases_are_understood() -> None:
    result = parse_sql("SELECT 1 AS one", dialect="PostgreSQL")
    assert result.properties == {"dialect": "postgres", "dialect_source": "given"}
    assert normalize_dialect("mssql") == "tsql"
    assert normalize_dialect(None) is None


def test_create_table_yields_a_table_unit_with_columns_and_foreign_keys() -> None:
    sql = """CREATE TABLE shop.orders (
        id BIGSERIAL PRIMARY KEY,
        user_id INT NOT NULL REFERENCES users(id),
        total NUMERIC(10, 2) DEFAULT 0,
        note TEXT,
        CONSTRAINT fk_coupon FOREIGN KEY (coupon_id) REFERENCES coupons (id)
    );"""
    result = parse_sql(sql, dialect="postgres")
    statement, table = result.units
    assert statement.properties["statement_kind"] == "create_table"
    assert statement.properties["tables_read"] == ()  # referenced tables are not read
    assert (table.kind, table.name, table.parent) == ("table", "shop.orders", "statement_1")
    columns = {column["name"]: column for column in table.properties["columns"]}
    assert list(columns) == ["id", "user_id", "total", "note"]
    assert columns["id"]["primary_key"] is True and columns["id"]["nullable"] is False
    assert columns["user_id"]["nullable"] is False
    assert columns["total"]["type"] == "DECIMAL(10, 2)"
    assert columns["note"]["nullable"] is True
    assert table.properties["primary_key"] == ("id",)
    assert table.properties["foreign_tables"] == ("users", "coupons")
    fk_refs = result.references_of("references_table")
    assert [(ref.from_qualname, ref.target) for ref in fk_refs] == [
        ("shop.orders", "users"),
        ("shop.orders", "coupons"),
    ]


def test_insert_select_reads_sources_and_writes_target_columns() -> None:
    sql = "INSERT INTO audit (order_id, amount) SELECT id, total FROM orders WHERE total > 0"
    (unit,) = parse_sql(sql).units
    assert unit.properties["tables_written"] == ("audit",)
    assert unit.properties["tables_read"] == ("orders",)
    assert {"audit.order_id", "audit.amount", "orders.id", "orders.total"} <= set(
        unit.properties["columns"]
    )


def test_one_bad_statement_does_not_sink_the_script() -> None:
    sql = "DELETE FROM sessions WHERE expires_at < now();\nSELEC broken FRM;\nSELECT 1;"
    result = parse_sql(sql)
    assert not result.fallback
    kinds = [unit.properties["statement_kind"] for unit in result.units]
    assert kinds == ["delete", "unparsed", "select"]
    assert result.units[1].start_line == 2
    assert any("statement 2" in warning for warning in result.warnings)


def test_semicolons_inside_strings_do_not_split() -> None:
    result = parse_sql("INSERT INTO notes (body) VALUES ('a; b');\nSELECT body FROM notes;")
    assert len(result.units) == 2
    assert "'a; b'" in result.units[0].text


def test_unparseable_sql_falls_back_with_a_warning() -> None:
    result = parse_sql("SELEC foo FRM bar WHERE")
    assert result.fallback is True and result.parser == "plain_text"
    assert result.warnings and "did not parse" in result.warnings[0]
    assert result.units[0].text == "SELEC foo FRM bar WHERE"


def test_empty_input_is_a_fallback_not_an_error() -> None:
    result = parse_sql("  -- only a comment\n")
    assert result.fallback is True
