"""Connections, transactions and schema of the PostgreSQL backend (see postgres.py).

psycopg, psycopg_pool and pgvector are optional dependencies, imported here only.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, nullcontext
from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt

from ..cjk_terms import CJK_CHARS, with_characters_joined
from ..errors import StorageError, ValidationError
from ..process_owner import OpenedIn
from ..validation import loads_tolerant
from . import pg_sql as q
from .dialect import Dialect
from .pg_sql import CROSS_PROJECT
from .records import ForgetReport
from .schema import MIGRATIONS, VERSION_TABLE, note_upgrade, pending_migrations, render
from .shared import SharedReads

try:
    import psycopg
    from pgvector.psycopg import register_vector
    from psycopg.conninfo import conninfo_to_dict
    from psycopg.errors import InsufficientResources
    from psycopg.rows import TupleRow
    from psycopg.types.json import Jsonb, set_json_loads
    from psycopg_pool import ConnectionPool
except ImportError as exc:  # the optional extra is missing (open_store: bad input, `db`)
    raise ImportError(
        f"PostgreSQL support needs the postgres extra: pip install 'ctxbase[postgres]' ({exc})"
    ) from exc

__all__ = [
    "CROSS_PROJECT",
    "INDEX_LOCK",
    "Conn",
    "InsufficientResources",
    "PgBase",
    "as_array",
    "jsonb",
    "peek_schema_version",
    "text",
]

Conn = psycopg.Connection[TupleRow]

# pg_advisory_xact_lock keys: schema changes and index creation are serialised across
# processes (concurrent CREATE ... IF NOT EXISTS of one name can collide).
_MIGRATE_LOCK = 0x637478_6D6967
INDEX_LOCK = 0x637478_696478


def jsonb(value: Any) -> Jsonb | None:
    return None if value is None else Jsonb(value, dumps=q.clean_json)


def as_array(value: Any) -> npt.NDArray[np.float32]:
    """A loaded `vector` value (pgvector's Vector or an array) as float32."""
    if hasattr(value, "to_numpy"):
        value = value.to_numpy()
    return np.asarray(value, dtype=np.float32)


def text(value: str | None) -> str | None:
    return q.clean_text(value)


def _check_url(url: str) -> None:
    """A URL that does not parse is bad input (exit 2, 422), not an unreachable server."""
    try:
        conninfo_to_dict(url)
    except psycopg.ProgrammingError as exc:
        # psycopg quotes the whole URL, password included: keep only the reason
        reason = re.sub(r'\s+in URI: ".*"\s*$', "", " ".join(str(exc).split()), flags=re.S)
        raise ValidationError("db", f"malformed PostgreSQL URL: {reason}") from exc


def peek_schema_version(url: str) -> int | None:
    """The schema version of the database at `url`, read without upgrading or creating
    anything (None: it holds no ctxbase schema). StorageError when it cannot be reached."""
    _check_url(url)
    try:
        with psycopg.connect(url, autocommit=True) as conn:
            found = conn.execute("SELECT to_regclass('meta')").fetchone()
            if found is None or found[0] is None:
                return None
            row = conn.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
    except psycopg.Error as exc:
        raise StorageError(f"cannot open PostgreSQL database: {exc}") from exc
    try:
        return int(row[0]) if row else None
    except ValueError:
        return None


def _named(conn: Conn) -> str:
    """How a message names the database a connection is to: its name, host and port, never
    the URL (it may carry a password)."""
    info = conn.info
    return f"PostgreSQL database {info.dbname!r} on {info.host}:{info.port}"


class PgBase(SharedReads):
    """The pool, the transaction helper, statement observation and the project locks."""

    _dialect: ClassVar[Dialect] = q.PG
    url: str

    def __init__(
        self,
        url: str,
        *,
        min_size: int = 1,
        max_size: int = 8,
        on_statement: Callable[[str], None] | None = None,
    ) -> None:
        self.url = url
        self._on_statement = on_statement  # sees every SQL text sent (for audits and tests)
        self._known_dims: set[int] = set()
        self._dims_lock = threading.Lock()
        self._bulk_loads = 0  # while above 0, HNSW indexes are built at the end (bulk_load)
        self._import_types: dict[str, tuple[tuple[int, str], ...]] = {}  # table -> (oid, name)
        # project -> (gen, n, mean indexed terms, mean own terms)
        self._stats: dict[str, tuple[int, int, float, float]] = {}
        self._closed = False
        self._opened_in = OpenedIn()
        self._local = threading.local()  # the thread's open transaction() connection
        _check_url(url)
        try:
            with psycopg.connect(url, autocommit=False) as conn:
                self._migrate(conn)
        except psycopg.Error as exc:
            raise StorageError(f"cannot open PostgreSQL database: {exc}") from exc
        # autocommit: a lone read is one round trip; _tx() still opens BEGIN ... COMMIT
        self._pool: ConnectionPool[Conn] = ConnectionPool(
            url,
            kwargs={"autocommit": True},
            min_size=min_size,
            max_size=max_size,
            configure=self._configure,
            open=True,
            name="ctxbase",
        )

    # -- connections ---------------------------------------------------------------------
    @staticmethod
    def _configure(conn: Conn) -> None:
        register_vector(conn)
        # JSON nested deeper than the input limit (stored by older versions) reads capped
        # rather than failing every read of its row.
        set_json_loads(loads_tolerant, conn)
        # Filtered HNSW searches keep scanning until they have enough rows, best first.
        conn.execute("SET hnsw.iterative_scan = strict_order")
        conn.execute("SET hnsw.ef_search = 100")
        # psycopg prepares repeated statements; a generic plan ignores the project's size
        # and the vector filters, and may skip the HNSW index. Plan every execution.
        conn.execute("SET plan_cache_mode = force_custom_plan")
        conn.commit()

    @contextmanager
    def _tx(self, *, pipelined: bool = False) -> Iterator[Conn]:
        """One transaction on a pooled connection (committed on success). `pipelined`: its
        statements are sent without waiting for each result (BEGIN to COMMIT in about one
        round trip), for writes that read nothing back."""
        self._check_open()
        joined: Conn | None = getattr(self._local, "tx", None)
        try:
            if joined is not None:  # inside transaction(): the outer block commits
                yield joined
                return
            with (
                self._pool.connection() as conn,
                conn.pipeline() if pipelined else nullcontext(),
                conn.transaction(),
            ):
                yield conn
        except psycopg.Error as exc:
            raise StorageError(f"PostgreSQL error: {exc}") from exc

    @contextmanager
    def _read(self) -> Iterator[Conn]:
        """A pooled connection for one statement, outside a transaction block (its own
        snapshot and transaction): no BEGIN and COMMIT round trips, which under load cost as
        much as the statement. Reads of several statements that must agree use _tx()."""
        self._check_open()
        joined: Conn | None = getattr(self._local, "tx", None)
        try:
            if joined is not None:
                yield joined
                return
            with self._pool.connection() as conn:
                yield conn
        except psycopg.Error as exc:
            raise StorageError(f"PostgreSQL error: {exc}") from exc

    @contextmanager
    def transaction(self) -> Iterator[None]:
        if getattr(self._local, "tx", None) is not None:
            yield
            return
        with self._tx() as conn:
            self._local.tx = conn
            try:
                yield
            finally:
                self._local.tx = None

    @contextmanager
    def read_snapshot(self) -> Iterator[None]:
        """A REPEATABLE READ, READ ONLY transaction the thread's reads join: they all see
        the snapshot its first statement takes; a write inside fails (read-only)."""
        if getattr(self._local, "tx", None) is not None:
            yield
            return
        with self._tx() as conn:
            conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            self._local.tx = conn
            try:
                yield
            finally:
                self._local.tx = None

    def hold_project(self, project_id: str) -> None:
        # the projects row lock every write of the project takes (a forget's included)
        with self._tx() as conn:
            self._lock(conn, [project_id], ensure=True, bump=False)

    def hold_key(self, project_id: str, key: str) -> None:
        # A transaction-scoped advisory lock, released by the COMMIT or ROLLBACK ending it.
        with self._tx() as conn:
            self._x(
                conn,
                "SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))",
                (f"{project_id}/{key}",),  # two keys that meet only wait in turn
            )

    def _in_transaction(self) -> bool:
        return getattr(self._local, "tx", None) is not None

    def _x(self, conn: Conn, sql: str, args: Sequence[Any] = ()) -> psycopg.Cursor[TupleRow]:
        if self._on_statement is not None:
            self._on_statement(sql)
        return conn.execute(sql, args)

    def _many(self, conn: Conn, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        if not rows:
            return
        if self._on_statement is not None:
            self._on_statement(sql)
        with conn.cursor() as cur:
            cur.executemany(sql, rows)

    def _fetch_all(self, sql: str, args: Sequence[Any] = ()) -> list[Any]:
        with self._read() as conn:
            return self._x(conn, sql, args).fetchall()

    def _fetch_one(self, sql: str, args: Sequence[Any] = ()) -> Any:
        with self._read() as conn:
            return self._x(conn, sql, args).fetchone()

    def _check_open(self) -> None:
        if self._opened_in.forked():  # the pool's connections and threads are the parent's
            raise StorageError(self._opened_in.refusal("PostgreSQL store"))
        if self._closed:
            raise StorageError("the store is closed")

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            if not self._opened_in.forked():  # in a fork: the parent's pool, left alone
                self._pool.close()

    # -- schema --------------------------------------------------------------------------
    def _migrate(self, conn: Conn) -> None:
        with conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (_MIGRATE_LOCK,))
            conn.execute(VERSION_TABLE)
            row = conn.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
            current = int(row[0]) if row else 0
            pending = pending_migrations(current)
            for version in pending:
                for stmt in q.PRE_MIGRATIONS.get(version, []):
                    conn.execute(stmt)
                for stmt in MIGRATIONS[version]:
                    sql = render(
                        stmt, json="JSONB", blob="BYTEA", float_="DOUBLE PRECISION", vector="vector"
                    )
                    conn.execute(sql)
                for stmt in q.POST_MIGRATIONS.get(version, []):
                    conn.execute(stmt)
                if version == 7:
                    _add_character_terms(conn)
                conn.execute(
                    "INSERT INTO meta(key, value) VALUES ('schema_version', %s) "
                    "ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value",
                    (str(version),),
                )
        if pending:  # committed: say so once (the URL may carry a password: not quoted)
            note_upgrade(_named(conn), current, pending[-1])

    def schema_version(self) -> int:
        with self._tx() as conn:
            row = conn.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
        return int(row[0]) if row else 0

    # -- projects, sessions, tasks ---------------------------------------------------------
    def _ensure(self, conn: Conn, project_id: str) -> None:
        self._x(
            conn,
            "INSERT INTO projects(project_id, created_at, settings) VALUES (%s, %s, %s) "
            "ON CONFLICT (project_id) DO NOTHING",
            (project_id, time.time(), jsonb({})),
        )

    def _lock(self, conn: Conn, project_ids: Sequence[str], *, ensure: bool, bump: bool) -> None:
        """Take the projects' row locks in a fixed order (see the module docs)."""
        for pid in sorted(set(project_ids)):
            if ensure:
                self._ensure(conn, pid)
            if bump:
                self._x(
                    conn,
                    "UPDATE projects SET generation = generation + 1 WHERE project_id = %s",
                    (pid,),
                )
            else:
                self._x(
                    conn,
                    "SELECT 1 FROM projects WHERE project_id = %s FOR NO KEY UPDATE",
                    (pid,),
                )

    # -- shared by writes and forget ------------------------------------------------------
    def _delete_items_of(
        self, conn: Conn, project_id: str, owner_ids: Sequence[str], report: ForgetReport
    ) -> None:
        if not owner_ids:
            return
        item_ids = [
            r[0]
            for r in self._x(
                conn,
                "DELETE FROM items WHERE project_id=%s AND owner_id = ANY(%s) RETURNING item_id",
                (project_id, list(owner_ids)),
            ).fetchall()
        ]
        report.add("items", len(item_ids))
        if item_ids:
            cur = self._x(
                conn,
                "DELETE FROM item_vectors WHERE project_id=%s AND item_id = ANY(%s)",
                (project_id, item_ids),
            )
            report.add("item_vectors", cur.rowcount)

    def _ensure_hnsw(self, dim: int) -> None:
        """Create the dimension's HNSW index once (serialised: concurrent CREATE INDEX IF NOT
        EXISTS of one name can collide)."""
        if dim in self._known_dims or dim > q.HNSW_MAX_DIM or self._bulk_loads:
            return
        with self._dims_lock, self._tx() as conn:
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (INDEX_LOCK,))
            conn.execute(q.hnsw_index_sql(dim))
            if not self._in_transaction():  # an outer block may still roll the index back
                self._known_dims.add(dim)


def _add_character_terms(conn: Conn) -> None:
    """Schema 7: each item's own and context terms get the characters of their Chinese
    words (cjk_terms.with_characters); the keyword columns are generated from them. Only
    the items with Chinese in their terms are read, through a server-side cursor (a large
    store is not read into memory at once); the cursor's snapshot does not see the updates."""
    pattern = f"[{CJK_CHARS}]"
    with conn.cursor(name="ctxbase_character_terms") as rows:
        rows.execute(
            "SELECT project_id, item_id, terms, context_terms FROM items "
            "WHERE terms ~ %s OR context_terms ~ %s",
            (pattern, pattern),
        )
        while batch := rows.fetchmany(2000):
            rewritten = [
                (with_characters_joined(terms), with_characters_joined(context), pid, item_id)
                for pid, item_id, terms, context in batch
            ]
            changed = [r for r, old in zip(rewritten, batch, strict=True) if r[:2] != old[2:]]
            if changed:
                with conn.cursor() as write:
                    write.executemany(
                        "UPDATE items SET terms = %s, context_terms = %s "
                        "WHERE project_id = %s AND item_id = %s",
                        changed,
                    )
