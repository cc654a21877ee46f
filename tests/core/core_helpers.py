"""Helpers shared by the core tests to inspect the SQLite file directly."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any


def raw(path: Path | str) -> sqlite3.Connection:
    """A plain sqlite3 connection to inspect the file the library wrote."""
    conn = sqlite3.connect(str(path), timeout=30)
    conn.execute("PRAGMA busy_timeout = 30000")
    return conn


def count(path: Path | str, table: str, where: str = "", args: tuple[Any, ...] = ()) -> int:
    conn = raw(path)
    try:
        sql = f"SELECT count(*) FROM {table}" + (f" WHERE {where}" if where else "")
        return int(conn.execute(sql, args).fetchone()[0])
    finally:
        conn.close()


def table_counts(path: Path | str) -> dict[str, int]:
    """Row count of every table in the file (ordinary, virtual and FTS shadow tables)."""
    conn = raw(path)
    try:
        names = [
            r[0]
            for r in conn.execute(
                "SELECT name FROM sqlite_master WHERE type='table' ORDER BY name"
            ).fetchall()
        ]
        return {n: int(conn.execute(f'SELECT count(*) FROM "{n}"').fetchone()[0]) for n in names}
    finally:
        conn.close()


def find_traces(path: Path | str, needles: list[str | bytes]) -> list[tuple[str, str]]:
    """Every (table, needle) where a needle occurs in any cell of any table of the file.

    Text cells are searched as text and as UTF-8 bytes; blob cells as bytes, so the FTS
    index segments (item_fts_data) and vector blobs are covered too.
    """
    conn = raw(path)
    found: list[tuple[str, str]] = []
    try:
        names = [
            r[0]
            for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'").fetchall()
        ]
        for name in names:
            for row in conn.execute(f'SELECT * FROM "{name}"'):
                for cell in row:
                    if isinstance(cell, str):
                        blob = cell.encode("utf-8", "surrogatepass")
                    elif isinstance(cell, bytes):
                        blob = cell
                    else:
                        continue
                    for needle in needles:
                        nb = needle.encode("utf-8") if isinstance(needle, str) else needle
                        if nb in blob:
                            found.append((name, repr(needle)))
    finally:
        conn.close()
    return sorted(set(found))
