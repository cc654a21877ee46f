"""docs/citus.md names the PostgreSQL objects a Citus operator checks for as the schema
creates them: the triggers on `items`, and the function they run."""

from __future__ import annotations

from pathlib import Path

import psycopg

from ctxbase.store.postgres import PostgresStore

DOC = Path(__file__).resolve().parents[2] / "docs" / "citus.md"


def test_the_doc_names_the_triggers_on_items_and_their_function(pg_url: str) -> None:
    PostgresStore(pg_url, max_size=1).close()  # the schema, migrated
    with psycopg.connect(pg_url) as conn:
        rows = conn.execute(
            "SELECT t.tgname, p.proname FROM pg_trigger t JOIN pg_proc p ON p.oid = t.tgfoid "
            "WHERE t.tgrelid = 'items'::regclass AND NOT t.tgisinternal ORDER BY t.tgname"
        ).fetchall()
    triggers = {name for name, _ in rows}
    functions = {fn for _, fn in rows}
    assert triggers == {"items_removed", "items_changed"}, rows
    text = " ".join(DOC.read_text(encoding="utf-8").split())
    for name in triggers:
        assert f"`{name}`" in text, name
    for fn in functions:
        assert f"`{fn}()`" in text, fn
        assert f"trigger `{fn}`" not in text  # a function, not a trigger's name
