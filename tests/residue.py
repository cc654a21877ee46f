"""Find copies of forgotten content in a database, the hard way (no pytest needed here, so
benchmarks can use it too).

SQLite: checkpoint the WAL into the file (TRUNCATE), VACUUM (freed pages are dropped), then
count the needles' UTF-8 bytes in the raw .db file and its -wal / -shm if present: FTS
shadow tables, free pages and old row versions are all bytes in those files.
PostgreSQL: every column of every ctxbase table (from information_schema), cast to text (or
searched as bytes for bytea), optionally only the rows of one project.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from pathlib import Path
from typing import Any

__all__ = ["postgres_copies", "sqlite_file_copies", "sqlite_file_copies_where"]

Needle = str | bytes


def _bytes(needle: Needle) -> bytes:
    return needle.encode("utf-8") if isinstance(needle, str) else needle


def sqlite_file_copies(path: str | Path, needles: Sequence[Needle]) -> dict[Needle, int]:
    """How many times each needle occurs in the bytes of the database file (and its -wal and
    -shm), after a TRUNCATE checkpoint and a VACUUM."""
    conn = sqlite3.connect(str(path), timeout=30, isolation_level=None)
    try:
        conn.execute("PRAGMA busy_timeout = 30000")
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        conn.execute("VACUUM")
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        conn.close()
    data = b""
    for suffix in ("", "-wal", "-shm"):
        file = Path(f"{path}{suffix}")
        if file.exists():
            data += file.read_bytes()
    return {needle: data.count(_bytes(needle)) for needle in needles}


def sqlite_file_copies_where(path: str | Path, needles: Sequence[Needle]) -> list[str]:
    """The tables (FTS shadow tables included) whose cells hold a needle: where the copies
    that `sqlite_file_copies` counts live, for a readable failure."""
    conn = sqlite3.connect(str(path), timeout=30)
    found: set[str] = set()
    try:
        names = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        for name in names:
            for row in conn.execute(f'SELECT * FROM "{name}"'):
                for cell in row:
                    blob = _cell_bytes(cell)
                    if blob is not None and any(_bytes(n) in blob for n in needles):
                        found.add(name)
    finally:
        conn.close()
    return sorted(found)


def _cell_bytes(cell: Any) -> bytes | None:
    if isinstance(cell, str):
        return cell.encode("utf-8", "surrogatepass")
    if isinstance(cell, bytes):
        return cell
    return None


def postgres_copies(
    url: str, needles: Sequence[Needle], *, project_id: str | None = None
) -> list[tuple[str, str, str]]:
    """(table, column, needle) for every column of every table of the current schema holding
    a needle; with `project_id`, tables keyed by project are searched in that project only
    (the test database is shared)."""
    import psycopg

    found: list[tuple[str, str, str]] = []
    with psycopg.connect(url, autocommit=True) as conn:
        columns = conn.execute(
            "SELECT c.table_name, c.column_name, c.data_type FROM information_schema.columns c "
            "JOIN information_schema.tables t ON t.table_schema = c.table_schema "
            "AND t.table_name = c.table_name "
            "WHERE c.table_schema = current_schema() AND t.table_type = 'BASE TABLE'"
        ).fetchall()
        keyed = {t for t, c, _ in columns if c == "project_id"}
        for table, column, data_type in columns:
            where = ""
            args: list[Any] = []
            if project_id is not None and table in keyed:
                where, args = " AND project_id = %s", [project_id]
            for needle in needles:
                if data_type == "bytea":
                    cond = f'position(%s::bytea in "{column}") > 0'
                    value: Any = _bytes(needle)
                else:
                    cond = f'strpos("{column}"::text, %s) > 0'
                    value = needle if isinstance(needle, str) else needle.decode("utf-8")
                row = conn.execute(
                    f'SELECT count(*) FROM "{table}" WHERE {cond}{where}', [value, *args]
                ).fetchone()
                if row and row[0]:
                    found.append(
                        (table, column, needle if isinstance(needle, str) else repr(needle))
                    )
    return found
