"""Storage: one protocol (`Store`), one module per backend."""

from __future__ import annotations

import os

from ..errors import ValidationError
from .base import KeywordHit, Store, VectorRow
from .records import ForgetReport, ItemFilter, SearchItem, StateChange

__all__ = [
    "DEFAULT_DB_PATH",
    "ForgetReport",
    "ItemFilter",
    "KeywordHit",
    "SearchItem",
    "StateChange",
    "Store",
    "VectorRow",
    "default_db",
    "open_store",
]

DEFAULT_DB_PATH = "ctxbase.db"
DB_ENV = "CTXBASE_DB"


def default_db() -> str:
    """The database to use when none is named: $CTXBASE_DB, else ./ctxbase.db.

    A variable set but empty is bad input (ValidationError naming CTXBASE_DB), as `--db ""`
    is: an empty value is a mistake in a script or a service file, and falling back to
    ./ctxbase.db would write to a database nobody asked for."""
    value = os.environ.get(DB_ENV)
    if value is None:
        return DEFAULT_DB_PATH
    if not value.strip():
        raise ValidationError(
            DB_ENV, "is set but empty: unset it for ./ctxbase.db, or name a database"
        )
    return value


def open_store(url: str | None = None) -> Store:
    """Open a store from a path (SQLite) or a postgresql:// URL.

    With no argument: $CTXBASE_DB, else ./ctxbase.db (`default_db`). A URL this
    installation cannot open (a scheme it does not know, postgresql:// without the postgres
    extra) is bad input (ValidationError, field `db`), as a malformed one is.
    """
    target = url or default_db()
    if target.startswith(("postgresql://", "postgres://")):
        try:
            from .postgres import PostgresStore  # type: ignore[import-not-found,unused-ignore]
        except ImportError as exc:  # the extra is not installed: the message says which
            raise ValidationError(
                "db",
                "a postgresql:// URL needs the postgres extra: pip install 'ctxbase[postgres]'"
                f" ({exc.__cause__ or exc})",
            ) from exc
        store: Store = PostgresStore(target)
        return store
    if target.startswith("sqlite:///"):
        target = target[len("sqlite:///") :]
    elif "://" in target:
        scheme = target.split("://", 1)[0]  # the rest may carry a password
        raise ValidationError(
            "db", f"unsupported database URL scheme {scheme!r}: use a file path or postgresql://"
        )
    from .sqlite import SQLiteStore

    return SQLiteStore(target)
