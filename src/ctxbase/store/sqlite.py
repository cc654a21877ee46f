"""SQLite backend: one file, WAL mode, safe for several threads and processes.

Each thread gets its own connection; every write runs in a `BEGIN IMMEDIATE` transaction so
concurrent writers (threads or processes) queue on SQLite's lock instead of failing midway.
Keywords use an FTS5 table fed with pre-segmented terms (Chinese is segmented before it gets
here, because FTS5's tokenizers treat a run of Chinese characters as one token).
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from typing import Any

import numpy as np
import numpy.typing as npt

from ..errors import StorageError
from ..model import Entity, Event, Relation, SessionInfo, StateFact, TaskInfo, relation_id_for
from .base import (
    SCHEMA_VERSION,
    ApiKeyRecord,
    ForgetReport,
    ItemFilter,
    KeywordHit,
    SearchItem,
    StateChange,
    Store,
    VectorRow,
)
from .schema import COLUMNS, JSON_COLUMNS, MIGRATIONS, render

__all__ = ["SQLiteStore", "tombstone_hash"]

_EXTRA_MIGRATIONS: dict[int, list[str]] = {
    1: [
        # Terms are pre-tokenised; tokenchars keep identifiers such as user_id or a.b whole.
        "CREATE VIRTUAL TABLE IF NOT EXISTS item_fts USING fts5("
        "terms, tokenize=\"unicode61 remove_diacritics 0 tokenchars '_.-:/@#$+'\")",
    ]
}

_EVENT_COLS = (
    "event_id, session_id, task_id, seq, agent_id, agent_role, type, text, data, ts, "
    "importance, metadata, active, project_id"
)
_ITEM_COLS = (
    "item_id, owner_id, kind, type, text, terms, ts, session_id, agent_id, agent_role, "
    "path, line_start, line_end, latest, importance, context_terms, context_id"
)


def indexed_terms(terms: str, context_terms: str, context_hidden: int) -> str:
    """What the keyword index holds for an item: its own terms plus its live context's."""
    if context_terms and not context_hidden:
        return f"{terms} {context_terms}"
    return terms


# A soft-deleted event or entity is hidden from every read, so are the edges touching it.
_NO_SOFT_DELETED_END = (
    " AND NOT EXISTS (SELECT 1 FROM events e WHERE e.project_id = relations.project_id"
    " AND e.event_id IN (relations.from_id, relations.to_id) AND e.active = 0)"
    " AND NOT EXISTS (SELECT 1 FROM entities n WHERE n.project_id = relations.project_id"
    " AND n.entity_id IN (relations.from_id, relations.to_id) AND n.active = 0)"
)


def tombstone_hash(item_id: str) -> str:
    """Tombstones keep only a hash, so a forgotten id leaves no readable trace."""
    return hashlib.sha256(item_id.encode("utf-8")).hexdigest()


def _dumps(value: Any) -> str | None:
    return None if value is None else json.dumps(value, ensure_ascii=False)


def _loads(value: str | None) -> Any:
    return None if value is None else json.loads(value)


def _placeholders(n: int) -> str:
    return ",".join("?" * n)


def _chunks(seq: Sequence[str], size: int = 500) -> Iterator[Sequence[str]]:
    for i in range(0, len(seq), size):
        yield seq[i : i + size]


class SQLiteStore(Store):
    """Store in one SQLite file (or ":memory:" for a private, single-connection store)."""

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
    def ensure_project(self, project_id: str) -> None:
        with self._write() as conn:
            self._ensure_project(conn, project_id)

    def _ensure_project(self, conn: sqlite3.Connection, project_id: str) -> None:
        conn.execute(
            "INSERT OR IGNORE INTO projects(project_id, created_at, settings) VALUES (?,?,?)",
            (project_id, time.time(), "{}"),
        )

    def _bump(self, conn: sqlite3.Connection, project_id: str) -> None:
        conn.execute(
            "UPDATE projects SET generation = generation + 1 WHERE project_id = ?", (project_id,)
        )

    def list_projects(self) -> list[str]:
        with self._read() as conn:
            rows = conn.execute("SELECT project_id FROM projects ORDER BY project_id").fetchall()
        return [r[0] for r in rows]

    def upsert_session(self, session: SessionInfo) -> None:
        with self._write() as conn:
            self._ensure_project(conn, session.project_id)
            conn.execute(
                "INSERT INTO sessions(project_id, session_id, status, title, created_at, "
                "updated_at, metadata) VALUES (?,?,?,?,?,?,?) "
                "ON CONFLICT(project_id, session_id) DO UPDATE SET status=excluded.status, "
                "title=excluded.title, updated_at=excluded.updated_at, "
                "metadata=excluded.metadata",
                (
                    session.project_id,
                    session.session_id,
                    session.status,
                    session.title,
                    session.created_at,
                    session.updated_at,
                    _dumps(session.metadata),
                ),
            )

    def get_session(self, project_id: str, session_id: str) -> SessionInfo | None:
        with self._read() as conn:
            row = conn.execute(
                "SELECT project_id, session_id, status, title, created_at, updated_at, metadata "
                "FROM sessions WHERE project_id=? AND session_id=?",
                (project_id, session_id),
            ).fetchone()
        return _session(row) if row else None

    def list_sessions(self, project_id: str) -> list[SessionInfo]:
        with self._read() as conn:
            rows = conn.execute(
                "SELECT project_id, session_id, status, title, created_at, updated_at, metadata "
                "FROM sessions WHERE project_id=? ORDER BY created_at, session_id",
                (project_id,),
            ).fetchall()
        return [_session(r) for r in rows]

    def upsert_task(self, task: TaskInfo) -> None:
        with self._write() as conn:
            self._ensure_project(conn, task.project_id)
            conn.execute(
                "INSERT INTO tasks(project_id, task_id, session_id, parent_task_id, title, status,"
                " created_at, updated_at, metadata) VALUES (?,?,?,?,?,?,?,?,?) "
                "ON CONFLICT(project_id, task_id) DO UPDATE SET session_id=excluded.session_id,"
                " parent_task_id=excluded.parent_task_id, title=excluded.title,"
                " status=excluded.status, updated_at=excluded.updated_at,"
                " metadata=excluded.metadata",
                (
                    task.project_id,
                    task.task_id,
                    task.session_id,
                    task.parent_task_id,
                    task.title,
                    task.status,
                    task.created_at,
                    task.updated_at,
                    _dumps(task.metadata),
                ),
            )

    _TASK_SELECT = (
        "SELECT project_id, task_id, session_id, parent_task_id, title, status, created_at, "
        "updated_at, metadata FROM tasks "
    )

    def get_task(self, project_id: str, task_id: str) -> TaskInfo | None:
        with self._read() as conn:
            row = conn.execute(
                self._TASK_SELECT + "WHERE project_id=? AND task_id=?", (project_id, task_id)
            ).fetchone()
        return _task(row) if row else None

    def list_tasks(self, project_id: str, session_id: str | None = None) -> list[TaskInfo]:
        sql = self._TASK_SELECT + "WHERE project_id=?"
        args: list[Any] = [project_id]
        if session_id is not None:
            sql += " AND session_id=?"
            args.append(session_id)
        with self._read() as conn:
            rows = conn.execute(sql + " ORDER BY created_at, task_id", args).fetchall()
        return [_task(r) for r in rows]

    # -- events ------------------------------------------------------------------------
    def write_events(
        self, events: Sequence[Event], items: Sequence[Sequence[SearchItem]]
    ) -> list[Event]:
        if len(events) != len(items):
            raise ValueError("write_events needs one list of search items per event")
        inserted: list[Event] = []
        if not events:
            return inserted
        with self._write() as conn:
            projects = {e.project_id for e in events}
            for project_id in projects:
                self._ensure_project(conn, project_id)
            for event, event_items in zip(events, items, strict=True):
                if self._is_tombstoned(conn, event.project_id, event.id):
                    continue
                exists = conn.execute(
                    "SELECT 1 FROM events WHERE project_id=? AND event_id=?",
                    (event.project_id, event.id),
                ).fetchone()
                if exists:
                    continue
                seq, prev_id = self._next_seq(conn, event)
                stored = event.model_copy(update={"seq": seq})
                conn.execute(
                    f"INSERT INTO events({_EVENT_COLS}) VALUES ({_placeholders(14)})",
                    (
                        stored.id,
                        stored.session_id,
                        stored.task_id,
                        seq,
                        stored.agent_id,
                        stored.agent_role,
                        stored.type,
                        stored.text,
                        _dumps(stored.data),
                        stored.ts,
                        stored.importance,
                        _dumps(stored.metadata),
                        1 if stored.active else 0,
                        stored.project_id,
                    ),
                )
                edges: list[tuple[str, str, str]] = []
                if prev_id:
                    edges.append((prev_id, "NEXT", stored.id))
                edges += [(stored.id, "CAUSED_BY", p) for p in stored.parent_event_ids]
                edges += [(stored.id, "REFERS_TO", r) for r in stored.refers_to]
                for from_id, rtype, to_id in edges:
                    self._upsert_relation(
                        conn,
                        Relation(
                            project_id=stored.project_id,
                            from_id=from_id,
                            type=rtype,
                            to_id=to_id,
                            source="auto:capture",
                            created_at=stored.ts,
                            valid_from=stored.ts,
                        ),
                    )
                self._insert_items(conn, stored.project_id, event_items)
                inserted.append(stored)
            for project_id in projects:
                self._bump(conn, project_id)
        return inserted

    def _next_seq(self, conn: sqlite3.Connection, event: Event) -> tuple[int, str | None]:
        row = conn.execute(
            "SELECT last_seq, last_event_id FROM sessions WHERE project_id=? AND session_id=?",
            (event.project_id, event.session_id),
        ).fetchone()
        if row is None:
            conn.execute(
                "INSERT INTO sessions(project_id, session_id, status, created_at, updated_at, "
                "metadata, last_seq, last_event_id) VALUES (?,?,?,?,?,?,?,?)",
                (
                    event.project_id,
                    event.session_id,
                    "active",
                    event.ts,
                    event.ts,
                    "{}",
                    1,
                    event.id,
                ),
            )
            return 1, None
        seq = int(row[0]) + 1
        conn.execute(
            "UPDATE sessions SET last_seq=?, last_event_id=?, updated_at=? "
            "WHERE project_id=? AND session_id=?",
            (seq, event.id, max(event.ts, time.time()), event.project_id, event.session_id),
        )
        return seq, row[1]

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
                f"INSERT INTO items({_ITEM_COLS}, project_id) VALUES ({_placeholders(18)})",
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
                "INSERT INTO item_fts(rowid, terms) VALUES (?, ?)",
                (cur.lastrowid, indexed_terms(it.terms, it.context_terms, 0)),
            )

    def _set_context_state(
        self, conn: sqlite3.Connection, project_id: str, ids: Sequence[str], hidden: int | None
    ) -> None:
        """Items indexed with the words of `ids`: hide (1) or show (0) those words, or drop
        them for good (None)."""
        for part in _chunks(list(ids)):
            ph = _placeholders(len(part))
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
                    "INSERT INTO item_fts(rowid, terms) VALUES (?, ?)",
                    (rowid, indexed_terms(terms, context_terms, flag)),
                )

    def _is_tombstoned(self, conn: sqlite3.Connection, project_id: str, item_id: str) -> bool:
        row = conn.execute(
            "SELECT 1 FROM tombstones WHERE project_id=? AND hashed_id=?",
            (project_id, tombstone_hash(item_id)),
        ).fetchone()
        return row is not None

    def existing_ids(self, project_id: str, ids: Sequence[str]) -> set[str]:
        found: set[str] = set()
        uniq = list(dict.fromkeys(ids))
        with self._read() as conn:
            for part in _chunks(uniq):
                ph = _placeholders(len(part))
                for table, col in (("events", "event_id"), ("entities", "entity_id")):
                    rows = conn.execute(
                        f"SELECT {col} FROM {table} WHERE project_id=? AND {col} IN ({ph})",
                        (project_id, *part),
                    ).fetchall()
                    found.update(r[0] for r in rows)
        return found

    def get_events(
        self, project_id: str, ids: Sequence[str], include_inactive: bool = False
    ) -> list[Event]:
        out: dict[str, Event] = {}
        with self._read() as conn:
            for part in _chunks(list(dict.fromkeys(ids))):
                sql = (
                    f"SELECT {_EVENT_COLS} FROM events WHERE project_id=? "
                    f"AND event_id IN ({_placeholders(len(part))})"
                )
                if not include_inactive:
                    sql += " AND active=1"
                for row in conn.execute(sql, (project_id, *part)).fetchall():
                    ev = self._event(conn, row)
                    out[ev.id] = ev
        return [out[i] for i in ids if i in out]

    def _event(self, conn: sqlite3.Connection, row: Sequence[Any]) -> Event:
        rels = conn.execute(
            "SELECT type, to_id FROM relations WHERE project_id=? AND from_id=? "
            "AND type IN ('CAUSED_BY','REFERS_TO') ORDER BY created_at, to_id",
            (row[13], row[0]),
        ).fetchall()
        return Event(
            id=row[0],
            session_id=row[1],
            task_id=row[2],
            seq=row[3],
            agent_id=row[4],
            agent_role=row[5],
            type=row[6],
            text=row[7],
            data=_loads(row[8]),
            ts=row[9],
            importance=row[10],
            metadata=_loads(row[11]) or {},
            active=bool(row[12]),
            project_id=row[13],
            parent_event_ids=[r[1] for r in rels if r[0] == "CAUSED_BY"],
            refers_to=[r[1] for r in rels if r[0] == "REFERS_TO"],
        )

    def list_events(
        self,
        project_id: str,
        session_id: str | None = None,
        *,
        last_n: int | None = None,
        types: Sequence[str] | None = None,
        task_id: str | None = None,
        since: float | None = None,
        until: float | None = None,
        include_inactive: bool = False,
    ) -> list[Event]:
        sql = f"SELECT {_EVENT_COLS} FROM events WHERE project_id=?"
        args: list[Any] = [project_id]
        if session_id is not None:
            sql += " AND session_id=?"
            args.append(session_id)
        if types:
            sql += f" AND type IN ({_placeholders(len(types))})"
            args.extend(types)
        if task_id is not None:
            sql += " AND task_id=?"
            args.append(task_id)
        if since is not None:
            sql += " AND ts>=?"
            args.append(since)
        if until is not None:
            sql += " AND ts<=?"
            args.append(until)
        if not include_inactive:
            sql += " AND active=1"
        order = "seq" if session_id is not None else "ts, seq"
        if last_n is not None:
            desc = "seq DESC" if session_id is not None else "ts DESC, seq DESC"
            sql = f"SELECT * FROM ({sql} ORDER BY {desc} LIMIT ?) ORDER BY {order}"
            args.append(int(last_n))
        else:
            sql += f" ORDER BY {order}"
        with self._read() as conn:
            rows = conn.execute(sql, args).fetchall()
            return [self._event(conn, r) for r in rows]

    def set_active(self, project_id: str, ids: Sequence[str], active: bool) -> int:
        flag = 1 if active else 0
        changed = 0
        with self._write() as conn:
            for part in _chunks(list(dict.fromkeys(ids))):
                ph = _placeholders(len(part))
                for table, col in (("events", "event_id"), ("entities", "entity_id")):
                    cur = conn.execute(
                        f"UPDATE {table} SET active=? WHERE project_id=? AND {col} IN ({ph}) "
                        "AND active<>?",
                        (flag, project_id, *part, flag),
                    )
                    changed += cur.rowcount
                conn.execute(
                    f"UPDATE items SET active=? WHERE project_id=? AND owner_id IN ({ph})",
                    (flag, project_id, *part),
                )
            self._set_context_state(conn, project_id, list(dict.fromkeys(ids)), 1 - flag)
            self._bump(conn, project_id)
        return changed

    # -- entities and relations ----------------------------------------------------------
    _ENTITY_SELECT = (
        "SELECT project_id, entity_id, type, name, text, properties, version, latest, active, "
        "created_at, updated_at FROM entities "
    )

    def upsert_entity(self, entity: Entity, items: Sequence[SearchItem]) -> Entity:
        with self._write() as conn:
            self._ensure_project(conn, entity.project_id)
            if self._is_tombstoned(conn, entity.project_id, entity.id):
                conn.execute(
                    "DELETE FROM tombstones WHERE project_id=? AND hashed_id=?",
                    (entity.project_id, tombstone_hash(entity.id)),
                )
            old = conn.execute(
                "SELECT created_at FROM entities WHERE project_id=? AND entity_id=?",
                (entity.project_id, entity.id),
            ).fetchone()
            stored = entity.model_copy(update={"created_at": old[0] if old else entity.created_at})
            conn.execute(
                "INSERT OR REPLACE INTO entities(project_id, entity_id, type, name, text, "
                "properties, version, latest, active, created_at, updated_at) "
                "VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                (
                    stored.project_id,
                    stored.id,
                    stored.type,
                    stored.name,
                    stored.text,
                    _dumps(stored.properties),
                    stored.version,
                    1 if stored.latest else 0,
                    1 if stored.active else 0,
                    stored.created_at,
                    stored.updated_at,
                ),
            )
            # Replace the entity's search units wholesale: stale chunks must not linger.
            self._delete_items_of(conn, stored.project_id, [stored.id], ForgetReport())
            self._insert_items(conn, stored.project_id, items)
            self._bump(conn, stored.project_id)
        return stored

    def get_entities(
        self, project_id: str, ids: Sequence[str], include_inactive: bool = False
    ) -> list[Entity]:
        out: dict[str, Entity] = {}
        with self._read() as conn:
            for part in _chunks(list(dict.fromkeys(ids))):
                sql = (
                    self._ENTITY_SELECT
                    + f"WHERE project_id=? AND entity_id IN ({_placeholders(len(part))})"
                )
                if not include_inactive:
                    sql += " AND active=1"
                for row in conn.execute(sql, (project_id, *part)).fetchall():
                    ent = _entity(row)
                    out[ent.id] = ent
        return [out[i] for i in ids if i in out]

    def list_entities(
        self,
        project_id: str,
        *,
        type: str | None = None,
        name: str | None = None,
        latest_only: bool = True,
        limit: int | None = None,
    ) -> list[Entity]:
        sql = self._ENTITY_SELECT + "WHERE project_id=? AND active=1"
        args: list[Any] = [project_id]
        if type is not None:
            sql += " AND type=?"
            args.append(type)
        if name is not None:
            sql += " AND name=?"
            args.append(name)
        if latest_only:
            sql += " AND latest=1"
        sql += " ORDER BY type, name, version"
        if limit is not None:
            sql += " LIMIT ?"
            args.append(int(limit))
        with self._read() as conn:
            return [_entity(r) for r in conn.execute(sql, args).fetchall()]

    def upsert_relations(self, relations: Sequence[Relation]) -> list[Relation]:
        out: list[Relation] = []
        if not relations:
            return out
        with self._write() as conn:
            for project_id in {r.project_id for r in relations}:
                self._ensure_project(conn, project_id)
            for rel in relations:
                out.append(self._upsert_relation(conn, rel))
        return out

    def _upsert_relation(self, conn: sqlite3.Connection, rel: Relation) -> Relation:
        rid = relation_id_for(rel.project_id, rel.from_id, rel.type, rel.to_id)
        old = conn.execute(
            "SELECT created_at, valid_from, valid_to FROM relations "
            "WHERE project_id=? AND relation_id=?",
            (rel.project_id, rid),
        ).fetchone()
        created_at = old[0] if old else rel.created_at
        # Re-asserting a closed relation opens a new validity period; an open one keeps its own.
        valid_from = old[1] if old and old[2] is None else rel.valid_from
        stored = rel.model_copy(
            update={"id": rid, "created_at": created_at, "valid_from": valid_from}
        )
        conn.execute(
            "INSERT OR REPLACE INTO relations(project_id, relation_id, from_id, type, to_id, "
            "confidence, source, created_at, valid_from, valid_to, properties) "
            "VALUES (?,?,?,?,?,?,?,?,?,?,?)",
            (
                stored.project_id,
                rid,
                stored.from_id,
                stored.type,
                stored.to_id,
                stored.confidence,
                stored.source,
                stored.created_at,
                stored.valid_from,
                stored.valid_to,
                _dumps(stored.properties),
            ),
        )
        return stored

    def close_relation(self, project_id: str, relation_id: str, at: float) -> bool:
        with self._write() as conn:
            cur = conn.execute(
                "UPDATE relations SET valid_to=? WHERE project_id=? AND relation_id=? "
                "AND valid_to IS NULL",
                (at, project_id, relation_id),
            )
        return cur.rowcount > 0

    def list_relations(
        self,
        project_id: str,
        node_ids: Sequence[str] | None = None,
        *,
        direction: str = "both",
        types: Sequence[str] | None = None,
        include_closed: bool = False,
        min_confidence: float = 0.0,
    ) -> list[Relation]:
        if direction not in ("out", "in", "both"):
            raise ValueError(f"direction must be 'out', 'in' or 'both' (got {direction!r})")
        base = (
            "SELECT project_id, relation_id, from_id, type, to_id, confidence, source, "
            "created_at, valid_from, valid_to, properties FROM relations WHERE project_id=?"
        )
        extra = ""
        extra_args: list[Any] = []
        if types:
            extra += f" AND type IN ({_placeholders(len(types))})"
            extra_args.extend(types)
        if not include_closed:
            extra += " AND valid_to IS NULL"
        if min_confidence > 0:
            extra += " AND confidence>=?"
            extra_args.append(min_confidence)
        extra += _NO_SOFT_DELETED_END
        found: dict[str, Relation] = {}
        with self._read() as conn:
            if node_ids is None:
                rows = conn.execute(
                    base + extra + " ORDER BY created_at, relation_id", (project_id, *extra_args)
                ).fetchall()
                return [_relation(r) for r in rows]
            cols = {"out": ["from_id"], "in": ["to_id"], "both": ["from_id", "to_id"]}[direction]
            for part in _chunks(list(dict.fromkeys(node_ids))):
                for col in cols:
                    sql = base + f" AND {col} IN ({_placeholders(len(part))})" + extra
                    for row in conn.execute(sql, (project_id, *part, *extra_args)).fetchall():
                        rel = _relation(row)
                        found[rel.id] = rel
        return sorted(found.values(), key=lambda r: (r.created_at, r.id))

    # -- search index --------------------------------------------------------------------
    def _filter_sql(self, flt: ItemFilter | None, alias: str = "i") -> tuple[str, list[Any]]:
        if flt is None:
            return "", []
        sql = ""
        args: list[Any] = []
        for col, values in (
            ("session_id", flt.session_ids),
            ("agent_id", flt.agent_ids),
            ("agent_role", flt.agent_roles),
            ("type", flt.types),
            ("kind", flt.kinds),
            ("owner_id", flt.owner_ids),
        ):
            if values is not None:
                sql += f" AND {alias}.{col} IN ({_placeholders(len(values))})"
                args.extend(values)
        if flt.path_prefix is not None:
            sql += f" AND substr({alias}.path, 1, ?) = ?"
            args += [len(flt.path_prefix), flt.path_prefix]
        if flt.line_from is not None:
            sql += f" AND {alias}.line_end >= ?"
            args.append(flt.line_from)
        if flt.line_to is not None:
            sql += f" AND {alias}.line_start <= ?"
            args.append(flt.line_to)
        if flt.since is not None:
            sql += f" AND {alias}.ts >= ?"
            args.append(flt.since)
        if flt.until is not None:
            sql += f" AND {alias}.ts <= ?"
            args.append(flt.until)
        if flt.latest_only:
            sql += f" AND {alias}.latest = 1"
        return sql, args

    def keyword_search(
        self, project_id: str, match: str, flt: ItemFilter | None, limit: int
    ) -> list[KeywordHit]:
        where, args = self._filter_sql(flt)
        sql = (
            "SELECT i.item_id, bm25(item_fts) AS rank FROM item_fts "
            "JOIN items i ON i.rowid = item_fts.rowid "
            f"WHERE item_fts MATCH ? AND i.project_id = ? AND i.active = 1{where} "
            "ORDER BY rank LIMIT ?"
        )
        with self._read() as conn:
            try:
                rows = conn.execute(sql, (match, project_id, *args, int(limit))).fetchall()
            except sqlite3.OperationalError as exc:
                raise StorageError(f"keyword query {match!r} failed: {exc}") from exc
        return [KeywordHit(r[0], -float(r[1])) for r in rows]

    def get_items(self, project_id: str, ids: Sequence[str]) -> list[SearchItem]:
        out: dict[str, SearchItem] = {}
        with self._read() as conn:
            for part in _chunks(list(dict.fromkeys(ids))):
                rows = conn.execute(
                    f"SELECT {_ITEM_COLS} FROM items WHERE project_id=? AND active=1 "
                    f"AND item_id IN ({_placeholders(len(part))})",
                    (project_id, *part),
                ).fetchall()
                for r in rows:
                    out[r[0]] = _item(r)
        return [out[i] for i in ids if i in out]

    def filter_item_ids(self, project_id: str, flt: ItemFilter) -> set[str]:
        where, args = self._filter_sql(flt)
        with self._read() as conn:
            rows = conn.execute(
                f"SELECT i.item_id FROM items i WHERE i.project_id=? AND i.active=1{where}",
                (project_id, *args),
            ).fetchall()
        return {r[0] for r in rows}

    def count_items(self, project_id: str) -> int:
        with self._read() as conn:
            row = conn.execute(
                "SELECT count(*) FROM items WHERE project_id=? AND active=1", (project_id,)
            ).fetchone()
        return int(row[0])

    # -- vectors -------------------------------------------------------------------------
    def pending_embeddings(
        self, model: str, limit: int, project_id: str | None = None
    ) -> list[tuple[str, str, str]]:
        sql = (
            "SELECT project_id, item_id, text FROM items WHERE active=1 "
            "AND (embedded_model IS NULL OR embedded_model <> ?)"
        )
        args: list[Any] = [model]
        if project_id is not None:
            sql += " AND project_id=?"
            args.append(project_id)
        with self._read() as conn:
            rows = conn.execute(sql + " LIMIT ?", (*args, int(limit))).fetchall()
        return [(r[0], r[1], r[2]) for r in rows]

    def put_vectors(
        self, model: str, rows: Sequence[tuple[str, str, npt.NDArray[np.float32]]]
    ) -> int:
        written = 0
        with self._write() as conn:
            for project_id, item_id, vec in rows:
                present = conn.execute(
                    "SELECT 1 FROM items WHERE project_id=? AND item_id=?", (project_id, item_id)
                ).fetchone()
                if not present:  # forgotten while it was being embedded
                    continue
                arr = np.asarray(vec, dtype=np.float32)
                conn.execute(
                    "DELETE FROM item_vectors WHERE project_id=? AND item_id=? AND model<>?",
                    (project_id, item_id, model),
                )
                conn.execute(
                    "INSERT OR REPLACE INTO item_vectors(project_id, item_id, model, dim, vec) "
                    "VALUES (?,?,?,?,?)",
                    (project_id, item_id, model, int(arr.shape[0]), arr.tobytes()),
                )
                conn.execute(
                    "UPDATE items SET embedded_model=? WHERE project_id=? AND item_id=?",
                    (model, project_id, item_id),
                )
                written += 1
            for project_id in {r[0] for r in rows}:
                self._bump(conn, project_id)
        return written

    def iter_vectors(
        self, project_id: str, model: str, batch: int = 4096
    ) -> Iterator[list[VectorRow]]:
        with self._read() as conn:
            rows = conn.execute(
                "SELECT v.item_id, v.vec FROM item_vectors v JOIN items i "
                "ON i.project_id = v.project_id AND i.item_id = v.item_id "
                "WHERE v.project_id=? AND v.model=? AND i.active=1",
                (project_id, model),
            ).fetchall()
        for i in range(0, len(rows), batch):
            yield [
                VectorRow(r[0], np.frombuffer(r[1], dtype=np.float32)) for r in rows[i : i + batch]
            ]

    def vector_search(
        self,
        project_id: str,
        model: str,
        query: npt.NDArray[np.float32],
        limit: int,
        allowed_ids: set[str] | None = None,
    ) -> list[tuple[str, float]] | None:
        return None  # no native vector index: the retriever searches in memory

    def index_generation(self, project_id: str) -> int:
        with self._read() as conn:
            row = conn.execute(
                "SELECT generation FROM projects WHERE project_id=?", (project_id,)
            ).fetchone()
        return int(row[0]) if row else 0

    # -- state ---------------------------------------------------------------------------
    def set_state(self, fact: StateFact) -> StateFact:
        with self._write() as conn:
            self._ensure_project(conn, fact.project_id)
            key = (fact.project_id, fact.scope, fact.scope_id, fact.key)
            old = conn.execute(
                "SELECT value FROM state WHERE project_id=? AND scope=? AND scope_id=? AND key=?",
                key,
            ).fetchone()
            last = conn.execute(
                "SELECT max(version) FROM state_history WHERE project_id=? AND scope=? "
                "AND scope_id=? AND key=?",
                key,
            ).fetchone()
            version = int(last[0] or 0) + 1
            stored = fact.model_copy(update={"version": version})
            conn.execute(
                "INSERT OR REPLACE INTO state(project_id, scope, scope_id, key, value, version, "
                "cause, updated_at) VALUES (?,?,?,?,?,?,?,?)",
                (*key, _dumps(stored.value), version, stored.cause, stored.updated_at),
            )
            conn.execute(
                "INSERT INTO state_history(project_id, scope, scope_id, key, version, old_value,"
                " new_value, cause, ts, deleted) VALUES (?,?,?,?,?,?,?,?,?,0)",
                (
                    *key,
                    version,
                    old[0] if old else None,
                    _dumps(stored.value),
                    stored.cause,
                    stored.updated_at,
                ),
            )
        return stored

    def delete_state(
        self, project_id: str, scope: str, scope_id: str, key: str, cause: str | None
    ) -> bool:
        with self._write() as conn:
            k = (project_id, scope, scope_id, key)
            old = conn.execute(
                "SELECT value, version FROM state WHERE project_id=? AND scope=? AND scope_id=? "
                "AND key=?",
                k,
            ).fetchone()
            if not old:
                return False
            conn.execute(
                "DELETE FROM state WHERE project_id=? AND scope=? AND scope_id=? AND key=?", k
            )
            conn.execute(
                "INSERT INTO state_history(project_id, scope, scope_id, key, version, old_value,"
                " new_value, cause, ts, deleted) VALUES (?,?,?,?,?,?,NULL,?,?,1)",
                (*k, int(old[1]) + 1, old[0], cause, time.time()),
            )
        return True

    def get_state(
        self, project_id: str, scope: str, scope_id: str, key: str | None = None
    ) -> list[StateFact]:
        sql = (
            "SELECT project_id, scope, scope_id, key, value, version, cause, updated_at "
            "FROM state WHERE project_id=? AND scope=? AND scope_id=?"
        )
        args: list[Any] = [project_id, scope, scope_id]
        if key is not None:
            sql += " AND key=?"
            args.append(key)
        with self._read() as conn:
            rows = conn.execute(sql + " ORDER BY key", args).fetchall()
        return [
            StateFact(
                project_id=r[0],
                scope=r[1],
                scope_id=r[2],
                key=r[3],
                value=_loads(r[4]),
                version=r[5],
                cause=r[6],
                updated_at=r[7],
            )
            for r in rows
        ]

    def state_history(
        self, project_id: str, scope: str, scope_id: str, key: str | None = None
    ) -> list[StateChange]:
        sql = (
            "SELECT key, scope, scope_id, version, old_value, new_value, cause, ts, deleted "
            "FROM state_history WHERE project_id=? AND scope=? AND scope_id=?"
        )
        args: list[Any] = [project_id, scope, scope_id]
        if key is not None:
            sql += " AND key=?"
            args.append(key)
        with self._read() as conn:
            rows = conn.execute(sql + " ORDER BY key, version", args).fetchall()
        return [
            StateChange(r[0], r[1], r[2], r[3], _loads(r[4]), _loads(r[5]), r[6], r[7], bool(r[8]))
            for r in rows
        ]

    # -- traces --------------------------------------------------------------------------
    def put_trace(self, project_id: str, context_id: str, trace: dict[str, Any]) -> None:
        with self._write() as conn:
            self._ensure_project(conn, project_id)
            conn.execute(
                "INSERT OR REPLACE INTO traces(project_id, context_id, created_at, trace) "
                "VALUES (?,?,?,?)",
                (project_id, context_id, time.time(), _dumps(trace)),
            )

    def get_trace(self, project_id: str, context_id: str) -> dict[str, Any] | None:
        with self._read() as conn:
            row = conn.execute(
                "SELECT trace FROM traces WHERE project_id=? AND context_id=?",
                (project_id, context_id),
            ).fetchone()
        return dict(_loads(row[0])) if row else None

    # -- forget --------------------------------------------------------------------------
    def _delete_items_of(
        self,
        conn: sqlite3.Connection,
        project_id: str,
        owner_ids: Sequence[str],
        report: ForgetReport,
    ) -> None:
        for part in _chunks(list(owner_ids)):
            ph = _placeholders(len(part))
            rows = conn.execute(
                f"SELECT rowid, item_id FROM items WHERE project_id=? AND owner_id IN ({ph})",
                (project_id, *part),
            ).fetchall()
            if not rows:
                continue
            rowids = [r[0] for r in rows]
            item_ids = [r[1] for r in rows]
            for rp in _chunks(rowids):
                n = conn.execute(
                    f"DELETE FROM item_fts WHERE rowid IN ({_placeholders(len(rp))})", tuple(rp)
                ).rowcount
                report.add("item_fts", n)
                n = conn.execute(
                    f"DELETE FROM items WHERE rowid IN ({_placeholders(len(rp))})", tuple(rp)
                ).rowcount
                report.add("items", n)
            for ip in _chunks(item_ids):
                n = conn.execute(
                    f"DELETE FROM item_vectors WHERE project_id=? AND item_id IN "
                    f"({_placeholders(len(ip))})",
                    (project_id, *ip),
                ).rowcount
                report.add("item_vectors", n)

    def forget(
        self,
        project_id: str,
        *,
        event_ids: Sequence[str] = (),
        entity_ids: Sequence[str] = (),
        session_id: str | None = None,
        whole_project: bool = False,
    ) -> ForgetReport:
        report = ForgetReport()
        with self._write() as conn:
            if whole_project:
                forgotten_events = [
                    r[0]
                    for r in conn.execute(
                        "SELECT event_id FROM events WHERE project_id=?", (project_id,)
                    ).fetchall()
                ]
                rowids = [
                    r[0]
                    for r in conn.execute(
                        "SELECT rowid FROM items WHERE project_id=?", (project_id,)
                    ).fetchall()
                ]
                for rp in _chunks(rowids):
                    report.add(
                        "item_fts",
                        conn.execute(
                            f"DELETE FROM item_fts WHERE rowid IN ({_placeholders(len(rp))})",
                            tuple(rp),
                        ).rowcount,
                    )
                for table in (
                    "items",
                    "item_vectors",
                    "relations",
                    "events",
                    "entities",
                    "state",
                    "state_history",
                    "traces",
                    "tasks",
                    "sessions",
                    "projects",
                ):
                    n = conn.execute(
                        f"DELETE FROM {table} WHERE project_id=?", (project_id,)
                    ).rowcount
                    report.add(table, n)
                # Tombstones stay (they hold only hashes): a stale retry must not come back.
                conn.executemany(
                    "INSERT OR IGNORE INTO tombstones(project_id, hashed_id) VALUES (?,?)",
                    [(project_id, tombstone_hash(eid)) for eid in forgotten_events],
                )
                self._purge_fts(conn, report)
                return report
            ev_ids = list(dict.fromkeys(event_ids))
            if session_id is not None:
                ev_ids += [
                    r[0]
                    for r in conn.execute(
                        "SELECT event_id FROM events WHERE project_id=? AND session_id=?",
                        (project_id, session_id),
                    ).fetchall()
                ]
            node_ids = list(dict.fromkeys(ev_ids + list(entity_ids)))
            self._delete_items_of(conn, project_id, node_ids, report)
            self._set_context_state(conn, project_id, node_ids, None)
            for part in _chunks(node_ids):
                ph = _placeholders(len(part))
                for col in ("from_id", "to_id"):
                    n = conn.execute(
                        f"DELETE FROM relations WHERE project_id=? AND {col} IN ({ph})",
                        (project_id, *part),
                    ).rowcount
                    report.add("relations", n)
                n = conn.execute(
                    f"DELETE FROM events WHERE project_id=? AND event_id IN ({ph})",
                    (project_id, *part),
                ).rowcount
                report.add("events", n)
                n = conn.execute(
                    f"DELETE FROM entities WHERE project_id=? AND entity_id IN ({ph})",
                    (project_id, *part),
                ).rowcount
                report.add("entities", n)
            for eid in ev_ids:
                conn.execute(
                    "INSERT OR IGNORE INTO tombstones(project_id, hashed_id) VALUES (?,?)",
                    (project_id, tombstone_hash(eid)),
                )
            if session_id is not None:
                for table in ("tasks", "sessions"):
                    n = conn.execute(
                        f"DELETE FROM {table} WHERE project_id=? AND session_id=?",
                        (project_id, session_id),
                    ).rowcount
                    report.add(table, n)
                for table in ("state", "state_history"):
                    n = conn.execute(
                        f"DELETE FROM {table} WHERE project_id=? AND scope='session' "
                        "AND scope_id=?",
                        (project_id, session_id),
                    ).rowcount
                    report.add(table, n)
            self._fix_session_tails(conn, project_id)
            self._purge_fts(conn, report)
            self._bump(conn, project_id)
        return report

    # -- bulk copy -----------------------------------------------------------------------
    def export_rows(
        self, project_id: str, table: str, batch: int = 1000
    ) -> Iterator[list[dict[str, Any]]]:
        cols = _columns(table)
        with self._read() as conn:
            cur = conn.execute(
                f"SELECT {', '.join(cols)} FROM {table} WHERE project_id=? ORDER BY rowid",
                (project_id,),
            )
            while rows := cur.fetchmany(batch):
                yield [_export_row(cols, r) for r in rows]

    def import_rows(self, project_id: str, table: str, rows: Sequence[Mapping[str, Any]]) -> int:
        cols = _columns(table)
        if any(r["project_id"] != project_id for r in rows):
            raise ValueError(f"import_rows({project_id!r}, {table!r}) got another project's row")
        inserted = 0
        with self._write() as conn:
            for r in rows:
                values = [_import_value(c, r.get(c)) for c in cols]
                cur = conn.execute(
                    f"INSERT OR IGNORE INTO {table}({', '.join(cols)}) "
                    f"VALUES ({_placeholders(len(cols))})",
                    values,
                )
                if cur.rowcount and table == "items":
                    conn.execute(
                        "INSERT INTO item_fts(rowid, terms) VALUES (?, ?)",
                        (
                            cur.lastrowid,
                            indexed_terms(
                                r["terms"],
                                r.get("context_terms") or "",
                                int(r.get("context_hidden") or 0),
                            ),
                        ),
                    )
                inserted += max(cur.rowcount, 0)
            if table != "projects":
                self._bump(conn, project_id)
        return inserted

    def count_rows(self, project_id: str, table: str) -> int:
        _columns(table)
        with self._read() as conn:
            row = conn.execute(
                f"SELECT count(*) FROM {table} WHERE project_id=?", (project_id,)
            ).fetchone()
        return int(row[0])

    def _purge_fts(self, conn: sqlite3.Connection, report: ForgetReport) -> None:
        # FTS5 only marks deleted rows in its index; their terms stay in the index segments
        # until a merge. Forgetting must not leave them there: rebuild the segments now.
        if report.removed.get("item_fts"):
            conn.execute("INSERT INTO item_fts(item_fts) VALUES ('optimize')")

    def _fix_session_tails(self, conn: sqlite3.Connection, project_id: str) -> None:
        # A forgotten last event must not stay as the NEXT anchor of its session.
        conn.execute(
            "UPDATE sessions SET last_event_id = (SELECT e.event_id FROM events e "
            "WHERE e.project_id = sessions.project_id AND e.session_id = sessions.session_id "
            "ORDER BY e.seq DESC LIMIT 1) WHERE project_id=?",
            (project_id,),
        )

    # -- API keys --------------------------------------------------------------------------
    def create_api_key(self, key: ApiKeyRecord) -> None:
        with self._write() as conn:
            try:
                conn.execute(
                    "INSERT INTO api_keys(key_id, key_hash, name, role, projects, created_at, "
                    "revoked_at) VALUES (?,?,?,?,?,?,?)",
                    (
                        key.key_id,
                        key.key_hash,
                        key.name,
                        key.role,
                        _dumps(list(key.projects)),
                        key.created_at,
                        key.revoked_at,
                    ),
                )
            except sqlite3.IntegrityError as exc:
                raise StorageError(f"API key {key.key_id!r} already exists") from exc

    def get_api_key(self, key_id: str) -> ApiKeyRecord | None:
        with self._read() as conn:
            row = conn.execute(
                "SELECT key_id, key_hash, name, role, projects, created_at, revoked_at "
                "FROM api_keys WHERE key_id=?",
                (key_id,),
            ).fetchone()
        return None if row is None else _api_key(row)

    def list_api_keys(self) -> list[ApiKeyRecord]:
        with self._read() as conn:
            rows = conn.execute(
                "SELECT key_id, key_hash, name, role, projects, created_at, revoked_at "
                "FROM api_keys ORDER BY created_at, key_id"
            ).fetchall()
        return [_api_key(r) for r in rows]

    def revoke_api_key(self, key_id: str, at: float) -> bool:
        with self._write() as conn:
            cur = conn.execute(
                "UPDATE api_keys SET revoked_at=? WHERE key_id=? AND revoked_at IS NULL",
                (at, key_id),
            )
        return cur.rowcount > 0


class _nullcontext:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


def _columns(table: str) -> tuple[str, ...]:
    try:
        return COLUMNS[table]
    except KeyError:
        raise ValueError(f"unknown table {table!r} (one of {', '.join(COLUMNS)})") from None


def _export_row(cols: Sequence[str], row: Sequence[Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for col, value in zip(cols, row, strict=True):
        if col in JSON_COLUMNS:
            value = _loads(value)
        elif col == "vec":
            value = np.frombuffer(value, dtype=np.float32).copy()
        out[col] = value
    return out


def _import_value(col: str, value: Any) -> Any:
    if col in JSON_COLUMNS:
        return _dumps(value)
    if col == "vec":
        return np.asarray(value, dtype=np.float32).tobytes()
    if isinstance(value, bool):
        return int(value)
    return value


def _session(row: Sequence[Any]) -> SessionInfo:
    return SessionInfo(
        project_id=row[0],
        session_id=row[1],
        status=row[2],
        title=row[3],
        created_at=row[4],
        updated_at=row[5],
        metadata=_loads(row[6]) or {},
    )


def _task(row: Sequence[Any]) -> TaskInfo:
    return TaskInfo(
        project_id=row[0],
        task_id=row[1],
        session_id=row[2],
        parent_task_id=row[3],
        title=row[4] or "",
        status=row[5],
        created_at=row[6],
        updated_at=row[7],
        metadata=_loads(row[8]) or {},
    )


def _entity(row: Sequence[Any]) -> Entity:
    return Entity(
        project_id=row[0],
        id=row[1],
        type=row[2],
        name=row[3],
        text=row[4] or "",
        properties=_loads(row[5]) or {},
        version=row[6],
        latest=bool(row[7]),
        active=bool(row[8]),
        created_at=row[9],
        updated_at=row[10],
    )


def _relation(row: Sequence[Any]) -> Relation:
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
        properties=_loads(row[10]) or {},
    )


def _item(row: Sequence[Any]) -> SearchItem:
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


def _api_key(row: Sequence[Any]) -> ApiKeyRecord:
    return ApiKeyRecord(
        key_id=row[0],
        key_hash=row[1],
        name=row[2],
        role=row[3],
        projects=tuple(_loads(row[4]) or ()),
        created_at=row[5],
        revoked_at=row[6],
    )
