"""Connections, transactions, schema, the dialect and shared helpers of the SQLite backend
(see sqlite.py)."""

from __future__ import annotations

import json
import logging
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from typing import Any, ClassVar, TypeVar

from ..cjk_terms import with_characters_joined
from ..errors import StorageError
from ..process_owner import OpenedIn
from ..validation import loads_tolerant
from .dialect import Dialect
from .records import ForgetReport, SearchItem
from .rows import EVENT_COLS, ITEM_COLS, tombstone_hash
from .schema import MIGRATIONS, note_upgrade, pending_migrations, render
from .shared import SharedReads
from .sqlite_write_lock import FileWriteLock, file_write_lock, release_file_write_lock

__all__ = [
    "EVENT_COLS",
    "ITEM_COLS",
    "SQLITE",
    "SQLiteBase",
    "SQLiteDialect",
    "chunks",
    "dumps",
    "enable_wal",
    "indexed_terms",
    "item_seq",
    "loads",
    "placeholders",
    "reserve_rowids",
    "tombstone_hash",
]

log = logging.getLogger(__name__)

# meta key of the counter item rowids come from (see reserve_rowids).
ITEM_SEQ = "item_rowid"
# Takes the counter's next number, above every rowid stored (a process of an earlier
# version still writing the file stores rows under SQLite's own rowids, past the counter)
# and the row leaving: a reader whose marker passed them must still hear of the removal.
_ABOVE_ROWS = "max(OLD.rowid, (SELECT coalesce(max(rowid), 0) FROM items))"
_NEXT_SEQ = (
    f"INSERT INTO meta(key, value) VALUES ('{ITEM_SEQ}', {_ABOVE_ROWS} + 1) "
    "ON CONFLICT(key) DO UPDATE SET "
    "value = max(CAST(value AS INTEGER) + 1, CAST(excluded.value AS INTEGER));"
)

_EXTRA_MIGRATIONS: dict[int, list[str]] = {
    1: [
        # Terms are pre-tokenised; tokenchars keep identifiers such as user_id or a.b whole.
        # Two columns: the indexed terms (own plus live context) and the own terms alone, so
        # bm25() can rank a word an item says itself above one it only follows.
        "CREATE VIRTUAL TABLE IF NOT EXISTS item_fts USING fts5("
        "terms, own, tokenize=\"unicode61 remove_diacritics 0 tokenchars '_.-:/@#$+'\")",
    ],
    2: [
        # Readers that keep a project's vectors in memory append what was stored since their
        # last read (vector_changes); these counters tell them when to reload instead.
        "CREATE TABLE IF NOT EXISTS vector_removals ("
        "project_id TEXT PRIMARY KEY, n INTEGER NOT NULL)",
        *(
            f"CREATE TRIGGER IF NOT EXISTS {name} AFTER {event} {when}BEGIN "
            f"INSERT INTO vector_removals(project_id, n) VALUES ({row}.project_id, 1) "
            "ON CONFLICT(project_id) DO UPDATE SET n = n + 1; END"
            for name, event, when, row in (
                ("item_vectors_removed", "DELETE ON item_vectors", "", "OLD"),
                ("items_removed", "DELETE ON items", "", "OLD"),
                (
                    "items_shown_or_hidden",
                    "UPDATE OF active ON items",
                    "WHEN OLD.active <> NEW.active ",
                    "NEW",
                ),
            )
        ),
    ],
    3: [
        "ALTER TABLE items ADD COLUMN repo TEXT",
        # who a context was assembled for: multi_agent_consensus finds an agent's last one
        "ALTER TABLE traces ADD COLUMN agent_role TEXT",
        "ALTER TABLE traces ADD COLUMN session_id TEXT",
        "ALTER TABLE traces ADD COLUMN task_id TEXT",
        "CREATE INDEX IF NOT EXISTS traces_by_role ON traces (project_id, agent_role, created_at)",
    ],
    5: [
        # An item's context words hidden, shown or dropped change its keyword-index row in
        # place: in-memory keyword readers (keyword_changes) must reload, as on a removal.
        "CREATE TRIGGER IF NOT EXISTS items_context_changed "
        "AFTER UPDATE OF context_hidden, context_terms ON items "
        "WHEN OLD.context_hidden <> NEW.context_hidden OR OLD.context_terms <> NEW.context_terms "
        "BEGIN INSERT INTO vector_removals(project_id, n) VALUES (NEW.project_id, 1) "
        "ON CONFLICT(project_id) DO UPDATE SET n = n + 1; END",
    ],
    6: [
        # Item rowids are change numbers (KeywordRow.seq) from a counter that only grows:
        # SQLite would hand a deleted largest rowid out again, and a reader would take the
        # new row for the old one.
        f"INSERT OR IGNORE INTO meta(key, value) SELECT '{ITEM_SEQ}', coalesce(max(rowid), 0) "
        "FROM items",
        # A row leaving the keyword index (deleted, hidden, or renumbered when its context
        # words change) is recorded under the next number, for keyword_changes.
        *(
            f"CREATE TRIGGER IF NOT EXISTS {name} AFTER {event} ON items WHEN {when} BEGIN "
            f"{_NEXT_SEQ} "
            "INSERT INTO keyword_removed(project_id, at, seq) VALUES (OLD.project_id, "
            f"(SELECT CAST(value AS INTEGER) FROM meta WHERE key = '{ITEM_SEQ}'), OLD.rowid); "
            "END"
            for name, event, when in (
                ("items_left_keywords", "DELETE", "OLD.active = 1"),
                (
                    "items_renumbered_or_hidden",
                    "UPDATE",
                    "OLD.active = 1 AND (NEW.active = 0 OR NEW.rowid <> OLD.rowid)",
                ),
            )
        ),
    ],
    9: ["ALTER TABLE tombstones ADD COLUMN forgotten_at REAL"],
    # the aliases of the aggregated events stored before (the rule of rows.merged_ids)
    11: [
        "INSERT OR IGNORE INTO event_aliases(project_id, alias_id, event_id) "
        "SELECT e.project_id, json_extract(p.value, '$.id'), e.event_id "
        "FROM (SELECT * FROM events WHERE data LIKE '%\"aggregated\"%' "
        "AND json_type(data, '$.aggregated') = 'array') e, "
        "json_each(e.data, '$.aggregated') p "
        "WHERE (SELECT count(*) FROM json_each(e.data)) = 1 "
        "AND json_extract(e.metadata, '$.aggregated_count') "
        "= json_array_length(e.data, '$.aggregated') "
        "AND json_array_length(e.data, '$.aggregated') >= 2 "
        "AND json_type(p.value, '$.id') = 'text' AND json_extract(p.value, '$.id') <> '' "
        "AND json_extract(p.value, '$.id') <> e.event_id"
    ],
    12: [
        "ALTER TABLE state ADD COLUMN ttl REAL",
        "ALTER TABLE state_history ADD COLUMN ttl REAL",
    ],
}


def reserve_rowids(conn: sqlite3.Connection, key: str, table: str, n: int) -> int:
    """The first of `n` fresh rowids of `table`, never handed out before.

    SQLite reuses the largest rowid after its row is deleted; readers ask what was stored
    after a rowid (keyword_changes, vector_changes), so rowids come from a counter that only
    grows (meta `key`, kept above any rowid stored without it)."""
    row = conn.execute("SELECT value FROM meta WHERE key=?", (key,)).fetchone()
    top = conn.execute(f"SELECT max(rowid) FROM {table}").fetchone()[0] or 0
    first = max(int(row[0]) if row else 0, int(top)) + 1
    conn.execute("INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)", (key, str(first + n - 1)))
    return first


def item_seq(conn: sqlite3.Connection) -> int:
    """The largest item change number handed out so far (rowids and removals)."""
    row = conn.execute("SELECT value FROM meta WHERE key=?", (ITEM_SEQ,)).fetchone()
    top = conn.execute("SELECT max(rowid) FROM items").fetchone()[0] or 0
    return max(int(row[0]) if row else 0, int(top))


def indexed_terms(terms: str, context_terms: str, context_hidden: int) -> str:
    """What the keyword index holds for an item: its own terms plus its live context's."""
    if context_terms and not context_hidden:
        return f"{terms} {context_terms}"
    return terms


def _add_character_terms(conn: sqlite3.Connection) -> None:
    """Schema 7: each item's own and context terms get the characters of their Chinese
    words (cjk_terms.with_characters), its keyword-index row with them; in rowid order, a
    batch at a time (a large store is not read into memory at once)."""
    after = -(2**63)
    while rows := conn.execute(
        "SELECT rowid, terms, context_terms, context_hidden FROM items WHERE rowid > ? "
        "ORDER BY rowid LIMIT 2000",
        (after,),
    ).fetchall():
        after = rows[-1][0]
        for rowid, terms, context, hidden in rows:
            new_terms, new_context = with_characters_joined(terms), with_characters_joined(context)
            if new_terms == terms and new_context == context:
                continue
            conn.execute(
                "UPDATE items SET terms=?, context_terms=? WHERE rowid=?",
                (new_terms, new_context, rowid),
            )
            if conn.execute("SELECT 1 FROM item_fts WHERE rowid=?", (rowid,)).fetchone():
                conn.execute("DELETE FROM item_fts WHERE rowid=?", (rowid,))
                conn.execute(
                    "INSERT INTO item_fts(rowid, terms, own) VALUES (?, ?, ?)",
                    (rowid, indexed_terms(new_terms, new_context, hidden), new_terms),
                )


# Steps a version needs beyond its SQL, run after it in the same transaction.
_DATA_MIGRATIONS: dict[int, Callable[[sqlite3.Connection], None]] = {7: _add_character_terms}

# json.dumps(value, ensure_ascii=False) builds an encoder per call; this one is reused.
_encode_json = json.JSONEncoder(ensure_ascii=False).encode

# An item's rowid must stay below this (SQLite's largest rowid).
_MAX_ROWID = 2**63 - 1


def _item_values(project_id: str, it: SearchItem) -> tuple[Any, ...]:
    """An item's values in ITEM_COLS order, then its project."""
    return (
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
        it.repo,
        project_id,
    )


def dumps(value: Any) -> str | None:
    if value is None:
        return None
    if type(value) is dict and not value:
        return "{}"  # most metadata and properties
    return _encode_json(value)


def loads(value: str | None) -> Any:
    # Tolerant: JSON nested deeper than the input limit (stored by older versions) reads
    # capped rather than failing every read of its row.
    if value is None:
        return None
    if value == "{}":
        return {}  # most metadata and properties (a graph walk reads ~100 a search)
    return loads_tolerant(value)


_T = TypeVar("_T")


def placeholders(n: int) -> str:
    return ",".join("?" * n)


def chunks(seq: Sequence[_T], size: int = 500) -> Iterator[Sequence[_T]]:
    for i in range(0, len(seq), size):
        yield seq[i : i + size]


class SQLiteDialect(Dialect):
    """sqlite3's `?` placeholders, JSON stored as text, `IN (?, ...)` lists (a long one as
    one JSON argument: SQLite takes at most 32766 arguments a statement)."""

    LONG_LIST = 500

    def load(self, value: Any) -> Any:
        return loads(value)

    def any_of(self, column: str, values: Sequence[Any]) -> tuple[str, list[Any]]:
        if len(values) > self.LONG_LIST:  # (a pinned knowledge-base view's owners)
            return f"{column} IN (SELECT value FROM json_each(?))", [json.dumps(list(values))]
        return f"{column} IN ({placeholders(len(values))})", list(values)

    def starts_with(self, column: str, prefix: str) -> tuple[str, list[Any]]:
        return f"substr({column}, 1, ?) = ?", [len(prefix), prefix]

    def json_text(self, column: str, key: str) -> str:
        return f"json_extract({column}, '$.{key}')"

    def contains(self, column: str) -> str:
        return f"instr({column}, ?) > 0"

    def store_json(self, value: Any) -> Any:
        return dumps(value)


SQLITE = SQLiteDialect()


class SQLiteBase(SharedReads):
    """Per-thread connections, the write and read helpers, the schema, and the index helpers
    shared by writes, set_active and forget."""

    _dialect: ClassVar[Dialect] = SQLITE
    path: str
    url: str

    @property
    def reads_never_wait(self) -> bool:
        # WAL mode: readers never wait for the writer; an in-memory database is not in WAL
        return self.path != ":memory:"

    def __init__(
        self, path: str, *, busy_timeout_s: float = 60.0, copy_of: str | None = None
    ) -> None:
        self.path = path
        self.url = path if path == ":memory:" else os.path.abspath(path)
        # a private copy of that file (read_source): the same database as it, and its
        # upgrade is not the file's
        self.copy_of = os.path.abspath(copy_of) if copy_of is not None else None
        self._busy_timeout_s = busy_timeout_s
        self._local = threading.local()
        # Every connection with the thread that opened it: a finished thread's connection is
        # closed when the next one is opened, so short-lived threads do not pile them up.
        self._all_conns: list[tuple[threading.Thread, sqlite3.Connection]] = []
        self._conns_lock = threading.Lock()
        self._memory_lock = threading.RLock()  # ":memory:" shares one connection
        self._closed = False
        # a forget's WAL truncation retried in the background while readers hold it
        self._retry_lock = threading.Lock()
        self._retrying = False
        self._wal_asked = 0  # truncations forgets asked for
        # Operations in flight: close() waits for them, because closing a connection that
        # another thread is using crashes the process inside sqlite3 (not an exception).
        self._in_flight = 0
        self._in_flight_cond = threading.Condition()
        self._opened_in = OpenedIn()
        self._write_lock: FileWriteLock | None = None
        if path != ":memory:":
            parent = os.path.dirname(self.url)
            if parent and not os.path.isdir(parent):
                raise StorageError(f"directory {parent!r} for the database does not exist")
            if os.path.isdir(self.url):
                raise StorageError(
                    f"{self.url!r} is a directory, not a database file: give a file's path "
                    f"(e.g. {os.path.join(self.url, 'ctxbase.db')!r})"
                )
        self._write_lock = None if path == ":memory:" else file_write_lock(self.url)
        try:
            self._migrate()
        except BaseException:
            self._let_go_of_write_lock()
            raise

    # -- connections ---------------------------------------------------------------------
    def _connect(self) -> sqlite3.Connection:
        try:
            conn = sqlite3.connect(
                self.path,
                timeout=self._busy_timeout_s,
                isolation_level=None,
                check_same_thread=False,
            )
            conn.execute(f"PRAGMA busy_timeout = {int(self._busy_timeout_s * 1000)}")
            if self.path != ":memory:":
                enable_wal(conn, self._busy_timeout_s)  # fails first on a non-database
        except sqlite3.Error as exc:
            raise StorageError(f"cannot open SQLite database {self.path!r}: {exc}") from exc
        # NORMAL in WAL mode survives a process kill (only an OS crash may lose the last
        # commits); FULL makes even that durable at a small cost per commit.
        conn.execute("PRAGMA synchronous = FULL")
        conn.execute("PRAGMA foreign_keys = OFF")
        with self._conns_lock:
            alive = []
            for thread, old in self._all_conns:
                if thread.is_alive():
                    alive.append((thread, old))
                else:
                    with suppress(sqlite3.Error):
                        old.close()
            alive.append((threading.current_thread(), conn))
            self._all_conns = alive
        return conn

    @contextmanager
    def _in_use(self) -> Iterator[None]:
        """Count an operation in flight for close(); refuse new ones once closed, and in
        a forked process (before its lock, which a parent thread may have held)."""
        if self._opened_in.forked():
            raise StorageError(self._opened_in.refusal("SQLite store"))
        with self._in_flight_cond:
            if self._closed:
                raise StorageError("the store is closed")
            self._in_flight += 1
        try:
            yield
        finally:
            with self._in_flight_cond:
                self._in_flight -= 1
                if not self._in_flight:
                    self._in_flight_cond.notify_all()

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
    def _write(self, *, durable: bool = True) -> Iterator[sqlite3.Connection]:
        """A write transaction. `durable=False` commits without waiting for the disk (WAL,
        synchronous=NORMAL): a process crash loses nothing, an OS crash may lose this
        commit until the next durable one or checkpoint syncs the log."""
        # Writers of this process queue on a lock first: SQLite's own busy handler sleeps
        # with growing back-off, so threads contending for the file lose time and order.
        # Other processes still meet at the file lock (busy_timeout).
        joined = getattr(self._local, "tx", None)
        if joined is not None:  # inside transaction(): the outer block commits
            yield joined
            return
        if self._opened_in.forked():  # before the lock, which a parent thread may hold
            raise StorageError(self._opened_in.refusal("SQLite store"))
        release = self._take_write_lock()
        try:
            with self._in_use():
                conn = self._conn()
                if not durable:
                    conn.execute("PRAGMA synchronous = NORMAL")
                try:
                    self._begin_immediate(conn)
                    try:
                        yield conn
                    except BaseException:
                        conn.execute("ROLLBACK")
                        raise
                    else:
                        conn.execute("COMMIT")
                finally:
                    if not durable:
                        conn.execute("PRAGMA synchronous = FULL")
        finally:
            release()

    def _take_write_lock(self) -> Callable[[], None]:
        """Queue for the write lock (sqlite_write_lock): threads of this process and other
        processes in turn, each woken when the one before lets go; its release."""
        if self._write_lock is not None:
            self._write_lock.acquire(self._busy_timeout_s, database=self.path)
            return self._write_lock.release
        if not self._memory_lock.acquire(timeout=self._busy_timeout_s):
            raise StorageError(
                f"database is locked: another writer of {self.path!r} in this process held it "
                f"for over {self._busy_timeout_s:g} s"
            )
        return self._memory_lock.release

    def _begin_immediate(self, conn: sqlite3.Connection) -> None:
        """Take the file's write lock (waiting up to the busy timeout): a lock another
        process holds longer is a StorageError saying so, not a raw OperationalError."""
        try:
            conn.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) and "busy" not in str(exc):
                raise
            raise StorageError(
                f"database is locked: another process held the write lock of {self.path!r}"
                f" for over {self._busy_timeout_s:g} s (a long ingest, forget or migration?);"
                " try again when it is done"
            ) from exc

    @contextmanager
    def transaction(self) -> Iterator[None]:
        if getattr(self._local, "tx", None) is not None:
            yield
            return
        with self._write() as conn:
            self._local.tx = conn
            try:
                yield
            finally:
                self._local.tx = None

    @contextmanager
    def read_snapshot(self) -> Iterator[None]:
        """A deferred transaction on the thread's connection, begun by a first read: in WAL
        mode its reads see the commits made before that read and none after (writers go on
        meanwhile). A write of this thread inside fails (a transaction is already open).
        An in-memory database has one connection for all threads: no snapshot there."""
        if self.path == ":memory:" or getattr(self._local, "tx", None) is not None:
            yield
            return
        with self._in_use():
            conn = self._conn()
            conn.execute("BEGIN")
            try:
                conn.execute("SELECT count(*) FROM sqlite_master").fetchone()  # the snapshot
                yield
            finally:
                conn.execute("COMMIT")  # read only: nothing to write, the snapshot ends

    def hold_project(self, project_id: str) -> None:
        """Nothing to wait for: a transaction holds the database's write lock (BEGIN
        IMMEDIATE) from its start."""

    @contextmanager
    def _read(self) -> Iterator[sqlite3.Connection]:
        with self._memory_lock if self.path == ":memory:" else _nullcontext(), self._in_use():
            yield self._conn()

    def _fetch_all(self, sql: str, args: Sequence[Any] = ()) -> list[Any]:
        with self._read() as conn:
            return conn.execute(sql, args).fetchall()

    def _fetch_one(self, sql: str, args: Sequence[Any] = ()) -> Any:
        with self._read() as conn:
            return conn.execute(sql, args).fetchone()

    def close(self, timeout: float = 30.0) -> None:
        """Close every connection once the operations in flight have finished (new ones
        are refused). A connection still in use after `timeout` is left open, never
        closed under its user. In a forked process it only refuses what follows: the
        connections are the parent's, still in use there."""
        if self._opened_in.forked():
            self._closed = True
            return
        with self._in_flight_cond:
            self._closed = True
            idle = self._in_flight_cond.wait_for(lambda: not self._in_flight, timeout)
        with self._conns_lock:
            if not idle:
                log.warning("closing %s: an operation still running after %gs", self.path, timeout)
                return
            for _thread, conn in self._all_conns:
                with suppress(sqlite3.Error):
                    conn.close()
            self._all_conns.clear()
        self._let_go_of_write_lock()

    def _let_go_of_write_lock(self) -> None:
        """This store no longer writes: the last one of the process on the file closes
        the lock, removing its file when no other process has it open."""
        lock, self._write_lock = self._write_lock, None
        if lock is not None:
            release_file_write_lock(lock)

    # -- schema --------------------------------------------------------------------------
    def _migrate(self) -> None:
        if self._schema_current():  # nothing to upgrade: opening takes no write lock
            return
        with self._write() as conn:
            conn.execute("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT)")
            row = conn.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
            current = int(row[0]) if row else 0
            pending = pending_migrations(current)
            for version in pending:
                for stmt in MIGRATIONS[version]:
                    conn.execute(render(stmt, json="TEXT", blob="BLOB", float_="REAL"))
                for stmt in _EXTRA_MIGRATIONS.get(version, []):
                    try:
                        conn.execute(stmt)
                    except sqlite3.OperationalError as exc:
                        # SQLite has no ADD COLUMN IF NOT EXISTS: an upgrade run again over
                        # a column already there has nothing to do.
                        if "duplicate column name" not in str(exc):
                            raise
                if version in _DATA_MIGRATIONS:
                    _DATA_MIGRATIONS[version](conn)
                conn.execute(
                    "INSERT OR REPLACE INTO meta(key, value) VALUES ('schema_version', ?)",
                    (str(version),),
                )
        if pending and self.copy_of is None:  # committed: say so once
            note_upgrade(self.path, current, pending[-1])

    def _schema_current(self) -> bool:
        """The file is at the current schema (read without the write lock, so a base opens
        while another process writes, e.g. a long ingest or forget)."""
        try:
            with self._read() as conn:
                row = conn.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
        except sqlite3.OperationalError:  # no meta table: a new file
            return False
        return row is not None and not pending_migrations(int(row[0]))

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
        self._insert_project_items(conn, [(project_id, it) for it in items])

    def _insert_project_items(
        self, conn: sqlite3.Connection, rows: Sequence[tuple[str, SearchItem]]
    ) -> None:
        """Store (project_id, item) search units with their keyword-index rows, replacing
        units stored under the same ids; a few statements for the whole list."""
        if not rows:
            return
        keys = {(pid, it.item_id) for pid, it in rows}
        if len(keys) < len(rows):  # a unit twice: each replaces the one before, in order
            for pid, it in rows:
                self._insert_item(conn, pid, it)
            return
        by_project: dict[str, list[str]] = {}
        for pid, it in rows:
            by_project.setdefault(pid, []).append(it.item_id)
        old: list[tuple[int, str, str]] = []  # rowid, project_id, item_id
        for pid, item_ids in by_project.items():
            for part in chunks(item_ids):
                old += [
                    (r[0], pid, r[1])
                    for r in conn.execute(
                        f"SELECT rowid, item_id FROM items WHERE project_id=? "
                        f"AND item_id IN ({placeholders(len(part))})",
                        (pid, *part),
                    ).fetchall()
                ]
        if old:
            conn.executemany("DELETE FROM item_fts WHERE rowid=?", [(r[0],) for r in old])
            conn.executemany("DELETE FROM items WHERE rowid=?", [(r[0],) for r in old])
            conn.executemany(
                "DELETE FROM item_vectors WHERE project_id=? AND item_id=?",
                [(r[1], r[2]) for r in old],
            )
        # Fresh rowids (change numbers), given up front so the keyword-index rows name them.
        top = reserve_rowids(conn, ITEM_SEQ, "items", len(rows)) - 1
        if top > _MAX_ROWID - len(rows):  # SQLite would pick free rowids at random
            for pid, it in rows:
                self._insert_item(conn, pid, it)
            return
        conn.executemany(
            f"INSERT INTO items(rowid, {ITEM_COLS}, project_id) VALUES ({placeholders(20)})",
            [(top + n, *_item_values(pid, it)) for n, (pid, it) in enumerate(rows, 1)],
        )
        conn.executemany(
            "INSERT INTO item_fts(rowid, terms, own) VALUES (?, ?, ?)",
            [
                (top + n, indexed_terms(it.terms, it.context_terms, 0), it.terms)
                for n, (_pid, it) in enumerate(rows, 1)
            ],
        )

    def _insert_item(self, conn: sqlite3.Connection, project_id: str, it: SearchItem) -> None:
        """One search unit with its keyword-index row, replacing a unit of the same id."""
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
        rowid: int | None = reserve_rowids(conn, ITEM_SEQ, "items", 1)
        if rowid is None or rowid > _MAX_ROWID:  # numbers used up: SQLite picks a free one
            rowid = conn.execute(
                f"INSERT INTO items({ITEM_COLS}, project_id) VALUES ({placeholders(19)})",
                _item_values(project_id, it),
            ).lastrowid
        else:
            conn.execute(
                f"INSERT INTO items(rowid, {ITEM_COLS}, project_id) VALUES ({placeholders(20)})",
                (rowid, *_item_values(project_id, it)),
            )
        conn.execute(
            "INSERT INTO item_fts(rowid, terms, own) VALUES (?, ?, ?)",
            (rowid, indexed_terms(it.terms, it.context_terms, 0), it.terms),
        )

    def _set_context_state(
        self, conn: sqlite3.Connection, project_id: str, ids: Sequence[str], hidden: int | None
    ) -> None:
        """Items indexed with the words of `ids`: hide (1) or show (0) those words, or drop
        them for good (None). A changed row takes a new rowid: keyword readers see its old
        number leave (trigger items_renumbered_or_hidden) and the row come back as new."""
        for part in chunks(list(ids)):
            ph = placeholders(len(part))
            same = "" if hidden is None else " AND context_hidden <> ?"
            rows = conn.execute(
                f"SELECT rowid, terms, context_terms FROM items WHERE project_id=? "
                f"AND context_id IN ({ph}){same}",
                (project_id, *part, *(() if hidden is None else (hidden,))),
            ).fetchall()
            first = reserve_rowids(conn, ITEM_SEQ, "items", len(rows)) if rows else 0
            for n, (rowid, terms, context_terms) in enumerate(rows):
                new = first + n
                if hidden is None:
                    conn.execute(
                        "UPDATE items SET context_terms='', context_id=NULL, context_hidden=0, "
                        "rowid=? WHERE rowid=?",
                        (new, rowid),
                    )
                    context_terms, flag = "", 0
                else:
                    conn.execute(
                        "UPDATE items SET context_hidden=?, rowid=? WHERE rowid=?",
                        (hidden, new, rowid),
                    )
                    flag = hidden
                conn.execute("DELETE FROM item_fts WHERE rowid=?", (rowid,))
                conn.execute(
                    "INSERT INTO item_fts(rowid, terms, own) VALUES (?, ?, ?)",
                    (new, indexed_terms(terms, context_terms, flag), terms),
                )

    def _restore_items_of(
        self, conn: sqlite3.Connection, project_id: str, owner_ids: Sequence[str]
    ) -> None:
        """Show the hidden items of `owner_ids` again, each under a new rowid: keyword
        readers append it as a new row (its old number left their index when hidden)."""
        rows = conn.execute(
            f"SELECT rowid FROM items WHERE project_id=? AND owner_id IN "
            f"({placeholders(len(owner_ids))}) AND active=0",
            (project_id, *owner_ids),
        ).fetchall()
        if not rows:
            return
        first = reserve_rowids(conn, ITEM_SEQ, "items", len(rows))
        for n, (rowid,) in enumerate(rows):
            conn.execute("UPDATE items SET active=1, rowid=? WHERE rowid=?", (first + n, rowid))
            fts = conn.execute("SELECT terms, own FROM item_fts WHERE rowid=?", (rowid,)).fetchone()
            if fts is not None:
                conn.execute("DELETE FROM item_fts WHERE rowid=?", (rowid,))
                conn.execute(
                    "INSERT INTO item_fts(rowid, terms, own) VALUES (?, ?, ?)", (first + n, *fts)
                )

    def _cut_keyword_log(self, conn: sqlite3.Connection, project_id: str) -> None:
        """Drop the project's record of keyword removals, leaving a mark under a new number:
        a reader that last read before it is told the store cannot say what it removed."""
        at = reserve_rowids(conn, ITEM_SEQ, "items", 1)
        conn.execute("DELETE FROM keyword_removed WHERE project_id=?", (project_id,))
        conn.execute(
            "INSERT INTO keyword_removed(project_id, at, seq) VALUES (?, ?, 0)", (project_id, at)
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


def enable_wal(conn: sqlite3.Connection, busy_timeout_s: float) -> None:
    """Switch a file to WAL mode, waiting out another connection switching it too.

    Two connections switching a brand-new file at once both hold a shared lock and both
    want the exclusive one; SQLite answers one of them "database is locked" at once,
    without its busy handler (waiting could deadlock). The other finishes the switch in
    milliseconds, so the loser tries again until the busy timeout.
    """
    deadline = time.monotonic() + busy_timeout_s
    pause = 0.005
    while True:
        try:
            conn.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as exc:
            busy = "locked" in str(exc) or "busy" in str(exc)
            if not busy or time.monotonic() + pause > deadline:
                raise
        time.sleep(pause)
        pause = min(pause * 2, 0.25)


class _nullcontext:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None
