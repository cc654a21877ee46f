"""Storage: one protocol (`Store`), one module per backend."""

from __future__ import annotations

import os

from ..errors import StorageError
from .base import ForgetReport, ItemFilter, KeywordHit, SearchItem, StateChange, Store, VectorRow

__all__ = [
    "DEFAULT_DB_PATH",
    "ForgetReport",
    "ItemFilter",
    "KeywordHit",
    "SearchItem",
    "StateChange",
    "Store",
    "VectorRow",
    "open_store",
]

DEFAULT_DB_PATH = "ctxbase.db"


def open_store(url: str | None = None) -> Store:
    """Open a store from a path (SQLite) or a postgresql:// URL.

    With no argument: $CTXBASE_DB, else ./ctxbase.db.
    """
    target = url or os.environ.get("CTXBASE_DB") or DEFAULT_DB_PATH
    if target.startswith(("postgresql://", "postgres://")):
        try:
            from .postgres import PostgresStore  # type: ignore[import-not-found,unused-ignore]
        except ImportError as exc:  # the extra is not installed
            raise StorageError(
                "PostgreSQL support needs the postgres extra: pip install 'ctxbase[postgres]'"
                f" ({exc})"
            ) from exc
        store: Store = PostgresStore(target)
        return store
    if target.startswith("sqlite:///"):
        target = target[len("sqlite:///") :]
    elif "://" in target:
        raise StorageError(f"unsupported database URL {target!r}: use a file path or postgresql://")
    from .sqlite import SQLiteStore

    return SQLiteStore(target)
