"""One pattern tells a SQL statement in text (ctxbase.sql_cues): the fenced-code reader's
language guess and the "SQL from last time" re-ordering both take what it takes."""

from __future__ import annotations

import pytest

from ctxbase.anchor.fenced import guess_language
from ctxbase.retrieve.recency import KINDS, of_kinds
from ctxbase.sql_cues import SELECT_SPAN, SQL_STATEMENT
from ctxbase.store.base import SearchItem

COLUMNS = ", ".join(f"sum(amount_{n}) AS total_{n}" for n in range(25))  # ~600 characters

STATEMENTS = [
    "SELECT id FROM orders WHERE paid = 0",
    f"SELECT {COLUMNS}\nFROM ledger GROUP BY day",
    'select * from "dbo"."orders"',
    "INSERT INTO orders (id) VALUES (1)",
    'UPDATE "orders" SET paid = 1 WHERE id = 2',
    "DELETE FROM orders WHERE id = 3",
    "CREATE UNIQUE INDEX orders_id ON orders (id)",
    "CREATE OR REPLACE VIEW unpaid AS SELECT 1",
    "ALTER TABLE orders ADD COLUMN note TEXT",
    "DROP TABLE orders",
    "WITH recent AS (SELECT 1) SELECT 2",
]


@pytest.mark.parametrize("text", STATEMENTS)
def test_each_statement_is_sql_to_both_readers(text: str) -> None:
    assert SQL_STATEMENT.search(text)
    assert guess_language(text) == "sql"
    item = SearchItem("e", "e", "event", "assistant_message", f"here it is:\n{text}", "", 1.0)
    (sql,) = [k for k in KINDS if k.name == "sql"]
    assert of_kinds(item, [sql])


@pytest.mark.parametrize(
    "text",
    [
        "select one; then take the file from disk",  # a ; ends the statement
        "select one " + "x" * (SELECT_SPAN + 10) + " from the list",  # too far apart
        "we will update the docs soon and set a date",
        "with care as always",
        "just a sentence.",
    ],
)
def test_prose_is_not_a_statement(text: str) -> None:
    assert SQL_STATEMENT.search(text) is None


def test_a_sql_fence_and_bracketed_names_are_statements() -> None:
    assert SQL_STATEMENT.search("```sql\nSELECT 1\n```")  # no FROM: the tag says it
    assert SQL_STATEMENT.search("select * from [dbo].[orders]")  # T-SQL names
    assert SQL_STATEMENT.search("UPDATE [orders] SET paid = 1")
