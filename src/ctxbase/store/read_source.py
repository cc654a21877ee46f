"""Open the source of a copy (migrate-data) without upgrading it: a backup is read, never
written.

Opening a store upgrades an older schema in place, and an upgraded database no longer opens
with the ctxbase that wrote it. So the source's schema version is read first, without
opening it as a store:

- a SQLite file at an older schema is copied (sqlite3's backup API, reading the file
  read-only) to a temporary file, which is upgraded and read; the file itself is left as
  it was, and the temporary copy is removed afterwards;
- a PostgreSQL database at an older schema is refused (StorageError saying to upgrade it
  first by opening it once with this ctxbase): there is no private copy to upgrade;
- anything else (the current schema, a newer one, not a ctxbase database) is opened as
  usual, which reports what is wrong with it.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sqlite3
import tempfile
from collections.abc import Callable, Iterator

from ..errors import StorageError
from .base import SCHEMA_VERSION, Store

__all__ = ["open_for_reading", "sqlite_schema_version"]

log = logging.getLogger("ctxbase.store")


def _is_postgres(url: str) -> bool:
    return url.startswith(("postgresql://", "postgres://"))


def _sqlite_path(url: str) -> str:
    return url[len("sqlite:///") :] if url.startswith("sqlite:///") else url


def _read_only(path: str) -> sqlite3.Connection:
    """A connection that reads `path` and writes nothing, not even a WAL or shared-memory
    file beside it when none is there (immutable: there is no log to read); a file with a
    log beside it is read through that log."""
    full = os.path.abspath(path)
    wal = f"{full}-wal"
    idle = not os.path.exists(wal) or os.path.getsize(wal) == 0
    mode = "immutable=1" if idle and not os.path.exists(f"{full}-shm") else "mode=ro"
    return sqlite3.connect(f"file:{full}?{mode}", uri=True)


def sqlite_schema_version(path: str) -> int | None:
    """The schema version of a SQLite file, read without writing to it (None: not a
    ctxbase database, or it cannot be read so)."""
    try:
        conn = _read_only(path)
    except sqlite3.Error:
        return None
    try:
        row = conn.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
        return int(row[0]) if row else None
    except (sqlite3.Error, ValueError):
        return None
    finally:
        conn.close()


def _postgres_schema_version(url: str) -> int | None:
    from .pg_base import peek_schema_version  # the postgres extra: only for a URL

    return peek_schema_version(url)


def _remove(path: str) -> None:
    for name in (path, f"{path}-wal", f"{path}-shm"):
        with contextlib.suppress(FileNotFoundError):
            os.remove(name)


@contextlib.contextmanager
def open_for_reading(url: str, open_store: Callable[[str], Store]) -> Iterator[Store]:
    """The store at `url` to copy from, its schema left as it is (see the module);
    `open_store` (store.open_store) opens one that needs no upgrade."""
    copy: str | None = None
    if _is_postgres(url):
        version = _postgres_schema_version(url)
        if version is not None and 0 < version < SCHEMA_VERSION:
            raise StorageError(
                f"the source database is at schema {version} and this ctxbase reads "
                f"{SCHEMA_VERSION}: a copy does not upgrade its source. Upgrade it first "
                "(open it once with this ctxbase, e.g. `ctxbase --db URL status`; older "
                "versions of ctxbase cannot open it then), or copy it with the version "
                "that wrote it"
            )
        store = open_store(url)
    else:
        path = _sqlite_path(url)
        version = sqlite_schema_version(path)
        if version is None or not 0 < version < SCHEMA_VERSION:
            store = open_store(url)
        else:
            copy = _temporary_copy(path)
            try:
                store = _open_copy(path, copy, version)
            except BaseException:
                _remove(copy)
                raise
    try:
        yield store
    finally:
        store.close()
        if copy is not None:
            _remove(copy)


def _temporary_copy(path: str) -> str:
    """A temporary file holding what the SQLite file `path` holds (its WAL included),
    copied by sqlite3's backup API from a read-only connection."""
    fd, copy = tempfile.mkstemp(prefix="ctxbase-source-", suffix=".db")
    os.close(fd)
    try:
        source = _read_only(path)
        try:
            target = sqlite3.connect(copy)
            try:
                source.backup(target)
            finally:
                target.close()
        finally:
            source.close()
    except BaseException:
        _remove(copy)
        raise
    return copy


def _open_copy(path: str, copy: str, version: int) -> Store:
    from .sqlite import SQLiteStore

    log.warning(
        "%s is at schema %d: reading an upgraded temporary copy of it (schema %d); the "
        "file itself is left as it is",
        path,
        version,
        SCHEMA_VERSION,
    )
    return SQLiteStore(copy, copy_of=path)
