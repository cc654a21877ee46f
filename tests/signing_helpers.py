"""Edits made straight in the database, behind ctxbase's back, on either backend."""

from __future__ import annotations

import sqlite3

from ctxbase.retrieve.tokenize import index_terms
from ctxbase.store.base import Store
from ctxbase.store.sqlite import SQLiteStore

__all__ = ["tamper_relation_confidence", "tamper_unit"]


def tamper_unit(store: Store, project_id: str, item_id: str, text: str) -> None:
    """Rewrite a search unit's text and its keyword-index row; the entity stays as it is."""
    terms = " ".join(index_terms(text))
    if isinstance(store, SQLiteStore):
        with sqlite3.connect(store.url) as conn:
            (rowid,) = conn.execute(
                "SELECT rowid FROM items WHERE project_id=? AND item_id=?", (project_id, item_id)
            ).fetchone()
            conn.execute("UPDATE items SET text=?, terms=? WHERE rowid=?", (text, terms, rowid))
            conn.execute("DELETE FROM item_fts WHERE rowid=?", (rowid,))
            conn.execute(
                "INSERT INTO item_fts(rowid, terms, own) VALUES (?, ?, ?)", (rowid, terms, terms)
            )
        return
    import psycopg

    with psycopg.connect(store.url, autocommit=True) as conn:  # tsv columns are generated
        cur = conn.execute(
            "UPDATE items SET text=%s, terms=%s WHERE project_id=%s AND item_id=%s",
            (text, terms, project_id, item_id),
        )
        assert cur.rowcount == 1


def tamper_relation_confidence(
    store: Store, project_id: str, relation_id: str, confidence: float
) -> None:
    """Raise (or lower) a stored relation's confidence; its signature stays as it was."""
    if isinstance(store, SQLiteStore):
        with sqlite3.connect(store.url) as conn:
            n = conn.execute(
                "UPDATE relations SET confidence=? WHERE project_id=? AND relation_id=?",
                (confidence, project_id, relation_id),
            ).rowcount
        assert n == 1
        return
    import psycopg

    with psycopg.connect(store.url, autocommit=True) as conn:
        cur = conn.execute(
            "UPDATE relations SET confidence=%s WHERE project_id=%s AND relation_id=%s",
            (confidence, project_id, relation_id),
        )
        assert cur.rowcount == 1
