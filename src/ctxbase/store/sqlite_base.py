"""Connections, transactions, schema, shared helpers and row converters of the SQLite backend
(see sqlite.py)."""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from typing import Any

from ..errors import StorageError
from ..model import Entity, Relation, SessionInfo, TaskInfo
from .base import SCHEMA_VERSION, ApiKeyRecord, ForgetReport, SearchItem
from .schema import MIGRATIONS, render

__all__ = [
    "EVENT_COLS",
    "ITEM_COLS",
    "SQLiteBase",
    "api_key_row",
    "chunks",
    "dumps",
    "entity_row",
    "indexed_terms",
    "item_row",
    "loads",
    "placeholders",
    "relation_row",
    "session_row",
    "task_row",
    "tombstone_hash",
]

_EXTRA_MIGRATIONS: dict[int, list[str]] = {
    1: [
        # Terms are pre-tokenised; tokenchars keep identifiers such as user_id or a.b whole.
        # Two columns: the indexed terms (own plus live context) and the own terms alone, so
        # bm25() can rank a word an item says itself above one it only follows.
        "CREATE VIRTUAL TABLE IF NOT EXISTS item_fts USING fts5("
        "terms, own, tokenize=\"unicode61 remove_diacritics 0 tokenchars '_.-:/@#$+'\")",
    ]
}

EVENT_COLS = (
    "event_id, session_id, task_id, seq, agent_id, agent_role, type, text, data, ts, "
    "importance, metadata, active, project_id"
)
ITEM_COLS = (
    "item_id, owner_id, kind, type, text, terms, ts, session_id, agent_id, agent_role, "
    "path, line_start, line_end, latest, importance, context_terms, context_id"
)


def indexed_terms(terms: str, context_terms: str, context_hidden: int) -> str:
    """What the keyword index holds for an item: its own terms plus its live context's."""
    if context_terms and not context_hidden:
        return f"{terms} {context_terms}"
    return terms


def tombstone_hash(item_id: str) -> str:
    """Tombstones keep only a hash, so a forgotten id leaves no readable trace."""
    return hashlib.sha256(item_id.encode("utf-8")).hexdigest()


def dumps(value: Any) -> str | None:
    return None if value is None else json.dumps(value, ensure_ascii=False)


def loads(value: str | None) -> Any:
    return None if value is None else json.loads(value)


def placeholders(n: int) -> str:
    return ",".join("?" * n)


def chunks(seq: Sequence[str], size: int = 500) -> Iterator[Sequence[str]]:
    for i in range(0, len(seq), size):
        yield seq[i : i + size]


class SQLiteBase:
    """Per-thread connections, the write and read helpers, the schema, and the index helpers
    shared by writes, set_active and forget."""

    path: str
    url: str

    def __init__(self, path: str, *, busy_timeout_s: float = 60.0) -> None:
        self.path = path
        self.url = path if path == ":memory:" else os.path.abspath(path)
        self._busy_timeout_s = busy_timeout_s
        self._local = threading.local()
        self._all_conns: list[sqlite3.Connection] = []
        self._conns_lock = threading.Lock()
        self._memory_lock = threading.RLock()  # ":memory:" shares one connection
        self._closed = False
        if path != ":memory:":
            parent = os.path.dirname(self.url)
            if parent and not os.path.isdir(parent):
                raise StorageError(f"directory {parent!r} for the database does not exist")
        self._migrate()

    # -- connections ---------------------------------------------------------------------
    def _connect(self) -> sqlite3.Connection:
        try:
            conn = sqlite3.connect(
                self.path,
                timeout=self._busy_timeout_s,
                isolation_level=None,
                check_same_thread=False,
            )
        except sqlite3.Error as exc:
            raise StorageError(f"cannot open SQLite database {self.path!r}: {exc}") from exc
        conn.execute(f"PRAGMA busy_timeout = {int(self._busy_timeout_s * 1000)}")
        if self.path != ":memory:":
            conn.execute("PRAGMA journal_mode = WAL")
        # NORMAL in WAL mode survives a process kill (only an OS crash may lose the last
        # commits); FULL makes even that durable at a small cost per commit.
        conn.execute("PRAGMA synchronous = FULL")
        conn.execute("PRAGMA foreign_keys = OFF")
        with self._conns_lock:
            self._all_conns.append(conn)
        return conn

    def _conn(self) -> sqlite3.Connection:
        if self._closed:
            raise StorageError("the store is closed")
        if self.path == ":memory:":
            conn = getattr(self, "_shared", None)
            if conn is None:
                conn = self._connect()
                self._shared: sqlite3.Connection = conn
            return conn
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = self._connect()
            self._local.conn = conn
        return conn

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        with self._memory_lock if self.path == ":memory:" else _nullcontext():
            conn = self._conn()
            conn.execute("BEGIN IMMEDIATE")
            try:
                yield conn
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            else:
                conn.execute("COMMIT")

    @contextmanager
    def _read(self) -> Iterator[sqlite3.Connection]:
        with self._memory_lock if self.path == ":memory:" else _nullcontext():
            yield self._conn()

    def close(self) -> None:
        with self._conns_lock:
            for conn in self._all_conns:
                with suppress(sqlite3.Error):
                    conn.close()
            self._all_conns.clear()
        self._closed = True

    # -- schema --------------------------------------------------------------------------
    def _migrate(self) -> None:
        with self._write() as conn:
            conn.execute("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT)")
            row = conn.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
            current = int(row[0]) if row else 0
            if current > SCHEMA_VERSION:
                raise StorageError(
                    f"database schema version {current} is newer than this ctxbase "
                    f"({SCHEMA_VERSION}); upgrade ctxbase"
                )
            for version in sorted(MIGRATIONS):
                if version <= current:
                    continue
                for stmt in MIGRATIONS[version]:
                    conn.execute(render(stmt, json="TEXT", blob="BLOB", float_="REAL"))
                for stmt in _EXTRA_MIGRATIONS.get(version, []):
                    conn.execute(stmt)
                conn.execute(
                    "INSERT OR REPLACE INTO meta(key, value) VALUES ('schema_version', ?)",
                    (str(version),),
                )

    def schema_version(self) -> int:
        with self._read() as conn:
            row = conn.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
        return int(row[0]) if row else 0

    # -- projects, sessions, tasks ---------------------------------------------------------
    def _ensure_project(self, conn: sqlite3.Connection, project_id: str) -> None:
        conn.execute(
            "INSERT OR IGNORE INTO projects(project_id, created_at, settings) VALUES (?,?,?)",
            (project_id, time.time(), "{}"),
        )

    def _bump(self, conn: sqlite3.Connection, project_id: str) -> None:
        conn.execute(
            "UPDATE projects SET generation = generation + 1 WHERE project_id = ?", (project_id,)
        )

    # -- search items: shared by writes, set_active and forget ---------------------------
    def _insert_items(
        self, conn: sqlite3.Connection, project_id: str, items: Sequence[SearchItem]
    ) -> None:
        for it in items:
            old = conn.execute(
                "SELECT rowid FROM items WHERE project_id=? AND item_id=?", (project_id, it.item_id)
            ).fetchone()
            if old:
                conn.execute("DELETE FROM item_fts WHERE rowid=?", (old[0],))
                conn.execute("DELETE FROM items WHERE rowid=?", (old[0],))
                conn.execute(
                    "DELETE FROM item_vectors WHERE project_id=? AND item_id=?",
                    (project_id, it.item_id),
                )
            cur = conn.execute(
                f"INSERT INTO items({ITEM_COLS}, project_id) VALUES ({placeholders(18)})",
                (
                    it.item_id,
                    it.owner_id,
                    it.kind,
                    it.type,
                    it.text,
                    it.terms,
                    it.ts,
                    it.session_id,
                    it.agent_id,
                    it.agent_role,
                    it.path,
                    it.line_start,
                    it.line_end,
                    1 if it.latest else 0,
                    it.importance,
                    it.context_terms,
                    it.context_id,
                    project_id,
                ),
            )
            conn.execute(
                "INSERT INTO item_fts(rowid, terms, own) VALUES (?, ?, ?)",
                (cur.lastrowid, indexed_terms(it.terms, it.context_terms, 0), it.terms),
            )

    def _set_context_state(
        self, conn: sqlite3.Connection, project_id: str, ids: Sequence[str], hidden: int | None
    ) -> None:
        """Items indexed with the words of `ids`: hide (1) or show (0) those words, or drop
        them for good (None)."""
        for part in chunks(list(ids)):
            ph = placeholders(len(part))
            rows = conn.execute(
                f"SELECT rowid, terms, context_terms FROM items WHERE project_id=? "
                f"AND context_id IN ({ph})",
                (project_id, *part),
            ).fetchall()
            for rowid, terms, context_terms in rows:
                if hidden is None:
                    conn.execute(
                        "UPDATE items SET context_terms='', context_id=NULL, context_hidden=0 "
                        "WHERE rowid=?",
                        (rowid,),
                    )
                    context_terms, flag = "", 0
                else:
                    conn.execute("UPDATE items SET context_hidden=? WHERE rowid=?", (hidden, rowid))
                    flag = hidden
                conn.execute("DELETE FROM item_fts WHERE rowid=?", (rowid,))
                conn.execute(
                    "INSERT INTO item_fts(rowid, terms, own) VALUES (?, ?, ?)",
                    (rowid, indexed_terms(terms, context_terms, flag), terms),
                )

    def _delete_items_of(
        self,
        conn: sqlite3.Connection,
        project_id: str,
        owner_ids: Sequence[str],
        report: ForgetReport,
    ) -> None:
        for part in chunks(list(owner_ids)):
            ph = placeholders(len(part))
            rows = conn.execute(
                f"SELECT rowid, item_id FROM items WHERE project_id=? AND owner_id IN ({ph})",
                (project_id, *part),
            ).fetchall()
            if not rows:
                continue
            rowids = [r[0] for r in rows]
            item_ids = [r[1] for r in rows]
            for rp in chunks(rowids):
                n = conn.execute(
                    f"DELETE FROM item_fts WHERE rowid IN ({placeholders(len(rp))})", tuple(rp)
                ).rowcount
                report.add("item_fts", n)
                n = conn.execute(
                    f"DELETE FROM items WHERE rowid IN ({placeholders(len(rp))})", tuple(rp)
                ).rowcount
                report.add("items", n)
            for ip in chunks(item_ids):
                n = conn.execute(
                    f"DELETE FROM item_vectors WHERE project_id=? AND item_id IN "
                    f"({placeholders(len(ip))})",
                    (project_id, *ip),
                ).rowcount
                report.add("item_vectors", n)


class _nullcontext:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


def session_row(row: Sequence[Any]) -> SessionInfo:
    return SessionInfo(
        project_id=row[0],
        session_id=row[1],
        status=row[2],
        title=row[3],
        created_at=row[4],
        updated_at=row[5],
        metadata=loads(row[6]) or {},
    )


def task_row(row: Sequence[Any]) -> TaskInfo:
    return TaskInfo(
        project_id=row[0],
        task_id=row[1],
        session_id=row[2],
        parent_task_id=row[3],
        title=row[4] or "",
        status=row[5],
        created_at=row[6],
        updated_at=row[7],
        metadata=loads(row[8]) or {},
    )


def entity_row(row: Sequence[Any]) -> Entity:
    return Entity(
        project_id=row[0],
        id=row[1],
        type=row[2],
        name=row[3],
        text=row[4] or "",
        properties=loads(row[5]) or {},
        version=row[6],
        latest=bool(row[7]),
        active=bool(row[8]),
        created_at=row[9],
        updated_at=row[10],
    )


def relation_row(row: Sequence[Any]) -> Relation:
    # Rows were validated on the way in; skipping validation on the way out keeps graph
    # walks cheap.
    return Relation.model_construct(
        project_id=row[0],
        id=row[1],
        from_id=row[2],
        type=row[3],
        to_id=row[4],
        confidence=row[5],
        source=row[6],
        created_at=row[7],
        valid_from=row[8],
        valid_to=row[9],
        properties=loads(row[10]) or {},
    )


def item_row(row: Sequence[Any]) -> SearchItem:
    return SearchItem(
        item_id=row[0],
        owner_id=row[1],
        kind=row[2],
        type=row[3],
        text=row[4],
        terms=row[5],
        ts=row[6],
        session_id=row[7],
        agent_id=row[8],
        agent_role=row[9],
        path=row[10],
        line_start=row[11],
        line_end=row[12],
        latest=bool(row[13]),
        importance=row[14],
        context_terms=row[15] or "",
        context_id=row[16],
    )


def api_key_row(row: Sequence[Any]) -> ApiKeyRecord:
    return ApiKeyRecord(
        key_id=row[0],
        key_hash=row[1],
        name=row[2],
        role=row[3],
        projects=tuple(loads(row[4]) or ()),
        created_at=row[5],
        revoked_at=row[6],
    )
