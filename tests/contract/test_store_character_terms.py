"""Schema 7 on both backends: a store written before the characters of Chinese words were
terms gets them on opening (terms and context terms rewritten, the keyword index with
them), the same terms a write made now has, found by a character-only query through the
in-memory index and the store's own keyword query alike."""

from __future__ import annotations

import sqlite3
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from ctxbase import ContextBase
from ctxbase.cjk_terms import with_characters_joined
from ctxbase.retrieve import indexing, tokenize
from ctxbase.retrieve.keyword_index import KeywordIndex
from ctxbase.retrieve.tokenize import fts_match_expression, query_terms
from ctxbase.store.base import SCHEMA_VERSION, Store
from ctxbase.store.sqlite import SQLiteStore

BACKENDS = ("sqlite", "postgres")
ASKED = "体检前一天晚上有什么要求？"
SAID = "约了七宝分院，前一晚10点以后禁食禁水。"


def _clear_term_caches() -> None:
    indexing._analysed.cache_clear()
    tokenize._cached_query_terms.cache_clear()


@contextmanager
def _fresh_database(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[
    tuple[Callable[[], Store], Callable[[str], None]]
]:  # fmt: skip
    """(open a store, run a statement) on a database of its own: the schema version is
    the whole database's."""
    if backend == "sqlite":
        path = tmp_path / "old.db"

        def run_sqlite(sql: str) -> None:
            with sqlite3.connect(path) as conn:
                conn.execute(sql)

        yield (lambda: SQLiteStore(str(path))), run_sqlite
        return
    import psycopg
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    from ctxbase.store.postgres import PostgresStore

    pg_url = request.getfixturevalue("pg_url")
    name = f"chars_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(pg_url, autocommit=True) as admin:
        admin.execute(f"CREATE DATABASE {name}")
    url = make_conninfo(**{**conninfo_to_dict(pg_url), "dbname": name})

    def run_pg(sql: str) -> None:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(sql)  # type: ignore[arg-type]  # a test's own literal

    try:
        yield (lambda: PostgresStore(url, max_size=2)), run_pg
    finally:
        with psycopg.connect(pg_url, autocommit=True) as admin:
            admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


def _store_query(store: Store, query: str) -> list[str]:
    match = fts_match_expression(query_terms(query), "or")
    assert match is not None
    return [h.item_id for h in store.keyword_search("p", match, None, 10)]


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_version_6_store_gets_the_characters_of_its_chinese_words(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest, monkeypatch: Any
) -> None:
    with _fresh_database(backend, tmp_path, request) as (open_store, run):
        with monkeypatch.context() as before:  # the tokenizer as version 6 had it
            before.setattr(tokenize, "with_characters", list)
            _clear_term_caches()
            with ContextBase(open_store(), project="p", embedder=None) as cb:
                asked = cb.record("user_message", session_id="s", text=ASKED)
                said = cb.record("assistant_message", session_id="s", text=SAID)
                plain = cb.record("user_message", session_id="t", text="an aardvark, plainly")
                old = {it.item_id: it for it in cb.store.get_items("p", [asked.id, said.id])}
                old_plain = cb.store.get_items("p", [plain.id])[0]
                # the words only: "晚" is in neither as a term of its own
                assert "晚" not in old[said.id].terms.split()
                assert _store_query(cb.store, "晚") == []
            run("UPDATE meta SET value='6' WHERE key='schema_version'")
        _clear_term_caches()
        with ContextBase(open_store(), project="p", embedder=None) as cb:
            assert cb.store.schema_version() == SCHEMA_VERSION == 8
            got = {it.item_id: it for it in cb.store.get_items("p", [asked.id, said.id])}
            for item_id, item in got.items():
                assert item.terms == with_characters_joined(old[item_id].terms)
                assert item.context_terms == with_characters_joined(old[item_id].context_terms)
            assert "晚" in got[said.id].terms.split()
            assert "晚" in got[said.id].context_terms.split()  # the question it answers
            # what is not Chinese is left as it was
            assert cb.store.get_items("p", [plain.id])[0].terms == old_plain.terms
            # the same terms as the same text written now
            again = cb.record("assistant_message", session_id="u", text=SAID)
            assert cb.store.get_items("p", [again.id])[0].terms == got[said.id].terms
            # a character alone finds it, by the store's query and by the in-memory index
            assert set(_store_query(cb.store, "晚")) == {asked.id, said.id, again.id}
            index = KeywordIndex(cb.store)
            found = {i for i, _ in index.search("p", query_terms("晚"), 10)}
            assert found == {asked.id, said.id, again.id}
        # opening again changes nothing (the step ran once, and is idempotent anyway)
        with ContextBase(open_store(), project="p", embedder=None) as cb:
            same = {it.item_id: it.terms for it in cb.store.get_items("p", [asked.id, said.id])}
            assert same == {i: it.terms for i, it in got.items()}
