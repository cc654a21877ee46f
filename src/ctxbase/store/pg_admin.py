"""State, traces, forget, bulk copy and API keys of the PostgreSQL backend (a mixin)."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

import numpy as np
import numpy.typing as npt

from ..errors import StorageError
from ..model import StateFact
from . import pg_sql as q
from .base import USES_SCOPE, TombstoneKind
from .forget_steps import ForgetSteps
from .keyword_log import KeywordLog
from .pg_base import INDEX_LOCK, Conn, InsufficientResources, PgBase, as_array, jsonb, text
from .records import ApiKeyRecord, ForgetReport
from .rows import ALIAS_INSERT, import_aliases, next_version, tombstone_hash, trace_keys
from .schema import FORGET_TABLES, TABLES
from .shared import key_batches, table_columns

__all__ = ["PgAdmin"]

_log = logging.getLogger(__name__)

_TRACE_INSERT = (
    "INSERT INTO traces(project_id, context_id, created_at, trace, agent_role, session_id, task_id)"
)
_TRACE_UPSERT = (
    " ON CONFLICT (project_id, context_id) DO UPDATE SET created_at=EXCLUDED.created_at, "
    "trace=EXCLUDED.trace, agent_role=EXCLUDED.agent_role, session_id=EXCLUDED.session_id, "
    "task_id=EXCLUDED.task_id"
)
# put_trace in one statement: the project created if missing (then this transaction holds
# its new row) or its row locked as _lock does, the commit setting, then the insert; no row
# to lock (see put_trace) inserts nothing.
_TRACE_SQL = (
    "WITH ensured AS (INSERT INTO projects(project_id, created_at, settings) "
    "VALUES (%s, %s, %s) ON CONFLICT (project_id) DO NOTHING RETURNING project_id), "
    "locked AS (SELECT project_id FROM projects WHERE project_id = %s FOR NO KEY UPDATE), "
    "held AS (SELECT project_id FROM ensured UNION ALL SELECT project_id FROM locked LIMIT 1) "
    f"{_TRACE_INSERT} SELECT %s, %s, %s, %s, %s, %s, %s "
    "FROM held, (SELECT set_config('synchronous_commit', 'off', true)) AS setting"
    f"{_TRACE_UPSERT}"
)


class PgAdmin(ForgetSteps, KeywordLog, PgBase):
    # -- state ---------------------------------------------------------------------------
    def set_state(self, fact: StateFact) -> StateFact:
        key = (fact.project_id, fact.scope, fact.scope_id, fact.key)
        where = "WHERE project_id=%s AND scope=%s AND scope_id=%s AND key=%s"
        with self._tx() as conn:
            self._lock(conn, [fact.project_id], ensure=True, bump=False)
            old = self._x(conn, f"SELECT value FROM state {where}", key).fetchone()
            last = self._x(conn, f"SELECT max(version) FROM state_history {where}", key).fetchone()
            version = next_version(last)
            stored = fact.model_copy(update={"version": version})
            self._x(
                conn,
                "INSERT INTO state(project_id, scope, scope_id, key, value, version, cause, "
                "updated_at, ttl) VALUES (%s,%s,%s,%s,%s,%s,%s,%s,%s) "
                "ON CONFLICT (project_id, scope, scope_id, key) DO UPDATE SET "
                "value=EXCLUDED.value, version=EXCLUDED.version, cause=EXCLUDED.cause, "
                "updated_at=EXCLUDED.updated_at, ttl=EXCLUDED.ttl",
                (
                    *key,
                    jsonb(stored.value),
                    version,
                    text(stored.cause),
                    stored.updated_at,
                    stored.ttl,
                ),
            )
            self._x(
                conn,
                "INSERT INTO state_history(project_id, scope, scope_id, key, version, old_value,"
                " new_value, cause, ts, deleted, ttl) VALUES (%s,%s,%s,%s,%s,%s,%s,%s,%s,0,%s)",
                (
                    *key,
                    version,
                    jsonb(old[0]) if old else None,
                    jsonb(stored.value),
                    text(stored.cause),
                    stored.updated_at,
                    stored.ttl,
                ),
            )
        return stored

    def delete_state(
        self, project_id: str, scope: str, scope_id: str, key: str, cause: str | None
    ) -> bool:
        k = (project_id, scope, scope_id, key)
        where = "WHERE project_id=%s AND scope=%s AND scope_id=%s AND key=%s"
        with self._tx() as conn:
            self._lock(conn, [project_id], ensure=False, bump=False)
            old = self._x(conn, f"SELECT value, version FROM state {where}", k).fetchone()
            if not old:
                return False
            self._x(conn, f"DELETE FROM state {where}", k)
            self._x(
                conn,
                "INSERT INTO state_history(project_id, scope, scope_id, key, version, old_value,"
                " new_value, cause, ts, deleted) VALUES (%s,%s,%s,%s,%s,%s,NULL,%s,%s,1)",
                (*k, int(old[1]) + 1, jsonb(old[0]), text(cause), time.time()),
            )
        return True

    def touch_index(self, project_id: str) -> None:
        with self._tx() as conn:
            self._lock(conn, [project_id], ensure=True, bump=True)

    def add_uses(self, project_id: str, counts: Mapping[str, int], at: float) -> None:
        if not counts:
            return
        with self._tx() as conn:
            self._lock(conn, [project_id], ensure=True, bump=False)
            self._x(conn, "SET LOCAL synchronous_commit = off", ())  # a usage signal
            self._x(
                conn,
                "INSERT INTO state(project_id, scope, scope_id, key, value, version, cause, "
                "updated_at) SELECT %s, %s, '', k, NULL, n, NULL, %s "
                "FROM unnest(%s::text[], %s::bigint[]) AS u(k, n) "
                "ON CONFLICT (project_id, scope, scope_id, key) DO UPDATE "
                "SET version = state.version + EXCLUDED.version, updated_at = EXCLUDED.updated_at",
                (project_id, USES_SCOPE, at, list(counts), list(counts.values())),
            )

    # -- traces --------------------------------------------------------------------------
    def put_trace(self, project_id: str, context_id: str, trace: dict[str, Any]) -> None:
        # On every assembly's path: one statement, so one round trip. It creates the
        # project when missing and takes its row lock before the insert (the insert reads
        # the locked row, so the lock comes first); the commit need not wait for the WAL
        # flush (set_config local lasts to the commit: a server crash may lose the last
        # traces, never corrupt anything).
        row = (project_id, context_id, time.time(), jsonb(trace), *trace_keys(trace))
        with self._read() as conn:  # no transaction block: the statement is one
            done = self._x(
                conn, _TRACE_SQL, (project_id, time.time(), jsonb({}), project_id, *row)
            ).rowcount
        if done != 1:
            # The row was not there to lock: created by another writer after this
            # statement's snapshot, or removed by a forget. The statements one by one.
            self._put_trace_stepwise(row)

    def _put_trace_stepwise(self, row: tuple[Any, ...]) -> None:
        with self._tx(pipelined=True) as conn:
            self._x(conn, "SET LOCAL synchronous_commit = off", ())
            self._lock(conn, [row[0]], ensure=True, bump=False)
            self._x(conn, _TRACE_INSERT + " VALUES (%s,%s,%s,%s,%s,%s,%s)" + _TRACE_UPSERT, row)

    def _run(self, conn: Conn, sql: str, args: Sequence[Any] = ()) -> Any:
        return self._x(conn, sql, args)

    def forget(
        self,
        project_id: str,
        *,
        event_ids: Sequence[str] = (),
        entity_ids: Sequence[str] = (),
        session_id: str | None = None,
        whole_project: bool = False,
        soft_deleted_before: float | None = None,
        replace_state: Mapping[tuple[str, str, str], Any] | None = None,
        repos: Sequence[str] = (),
        trace_ids: Sequence[str] = (),
        redact_ids: Sequence[str] = (),
    ) -> ForgetReport:
        report = ForgetReport()
        with self._tx() as conn:
            self._lock(conn, [project_id], ensure=False, bump=True)
            if whole_project:
                self._forget_project(conn, project_id, report)
                return report
            scope = self._forget_scope(
                conn,
                project_id,
                event_ids=event_ids,
                entity_ids=entity_ids,
                session_id=session_id,
                soft_deleted_before=soft_deleted_before,
                replace_state=replace_state,
                repos=repos,
                trace_ids=trace_ids,
                redact_ids=redact_ids,
            )
            nodes = scope.node_ids
            self._delete_items_of(conn, project_id, nodes, report)
            # Their words must not linger in the items that were indexed with them.
            self._x(
                conn,
                "UPDATE items SET context_terms='', context_id=NULL, context_hidden=0, "
                f"{q.NEXT_CHANGE_SEQ} WHERE project_id=%s AND context_id = ANY(%s)",
                (project_id, list(nodes)),
            )
            if nodes:
                for sql in (
                    "DELETE FROM relations WHERE project_id=%s "
                    "AND (from_id = ANY(%s) OR to_id = ANY(%s))",
                    "DELETE FROM events WHERE project_id=%s AND event_id = ANY(%s)",
                    "DELETE FROM entities WHERE project_id=%s AND entity_id = ANY(%s)",
                    "DELETE FROM anchor_backlog WHERE project_id=%s AND event_id = ANY(%s)",
                ):
                    table = sql.split()[2]
                    args = (
                        (project_id, nodes, nodes) if table == "relations" else (project_id, nodes)
                    )
                    n = self._x(conn, sql, args).rowcount
                    if table != "anchor_backlog":  # bookkeeping: not counted in the report
                        report.add(table, n)
            self._forget_derived_relations(conn, project_id, scope, report)
            self._forget_state(conn, project_id, scope, report)
            self._forget_traces(conn, project_id, scope, report)
            sessions: list[str] = []
            if session_id is not None:
                for table in ("tasks", "sessions"):
                    cur = self._x(
                        conn,
                        f"DELETE FROM {table} WHERE project_id=%s AND session_id=%s",
                        (project_id, session_id),
                    )
                    report.add(table, cur.rowcount)
                sessions = [session_id] if report.removed.get("sessions") else []
            aliases = self._forget_aliases(conn, project_id, scope.stored_event_ids, report)
            self._tombstone(
                conn,
                project_id,
                [*scope.stored_event_ids, *aliases],
                scope.stored_entity_ids,
                sessions,
                repos=repos,
            )
            # A forgotten last event must not stay as the NEXT anchor of its session.
            self._x(
                conn,
                "UPDATE sessions SET last_event_id = (SELECT e.event_id FROM events e "
                "WHERE e.project_id = %s AND e.session_id = sessions.session_id "
                "ORDER BY e.seq DESC LIMIT 1) WHERE project_id=%s",
                (project_id, project_id),
            )
            self._keep_keyword_log(conn, project_id)
        return report

    def _forget_project(self, conn: Conn, project_id: str, report: ForgetReport) -> None:
        repos = self._project_repos(conn, project_id)  # before their rows go
        report.repos = list(repos)  # forgotten with it (tombstoned below)
        forgotten = [
            [r[0] for r in self._x(conn, sql, (project_id,)).fetchall()]
            for sql in (
                "SELECT event_id FROM events WHERE project_id=%s",
                "SELECT entity_id FROM entities WHERE project_id=%s",
                "SELECT session_id FROM sessions WHERE project_id=%s",
            )
        ]
        # the ids merged into its aggregated events are tombstoned as events too
        forgotten[0] += [
            r[0]
            for r in self._x(
                conn, "SELECT alias_id FROM event_aliases WHERE project_id=%s", (project_id,)
            ).fetchall()
        ]
        for table in FORGET_TABLES:
            cur = self._x(conn, f"DELETE FROM {table} WHERE project_id=%s", (project_id,))
            report.add(table, cur.rowcount)
        self._x(conn, "DELETE FROM anchor_backlog WHERE project_id=%s", (project_id,))
        # Tombstones stay (they hold only hashes): a stale retry must not come back. The
        # project's own, when it held the project, tells a copy from a backup
        # (copy_filter) not to bring it back; its repositories', once it is written to
        # again, to leave out their records.
        held = [project_id] if report.removed.get("projects") else []
        events, entities, sessions = forgotten
        self._tombstone(conn, project_id, events, entities, sessions, held, repos)
        # Every row just left: readers reload rather than apply a removal per row. The
        # record is cut, leaving a mark (seq 0) under a new number for readers behind it.
        self._x(conn, "DELETE FROM keyword_removed WHERE project_id=%s", (project_id,))
        self._x(
            conn,
            "INSERT INTO keyword_removed(project_id, at, seq) "
            f"VALUES (%s, nextval('{q.ITEM_CHANGE_SEQ}'), 0)",
            (project_id,),
        )
        self._stats.pop(project_id, None)

    def _tombstone(
        self,
        conn: Conn,
        project_id: str,
        events: Sequence[str],
        entities: Sequence[str] = (),
        sessions: Sequence[str] = (),
        projects: Sequence[str] = (),
        repos: Sequence[str] = (),
    ) -> None:
        """The tombstones (hashes only) of forgotten events, entities, sessions, projects and
        repositories, with the time of this forget, in one batch; one already there takes
        that time."""
        kinds: tuple[tuple[TombstoneKind, Sequence[str]], ...] = (
            ("event", events),
            ("entity", entities),
            ("session", sessions),
            ("project", projects),
            ("repo", repos),
        )
        now = time.time()
        self._many(
            conn,
            "INSERT INTO tombstones(project_id, hashed_id, forgotten_at) VALUES (%s,%s,%s) "
            "ON CONFLICT (project_id, hashed_id) DO UPDATE SET forgotten_at=excluded.forgotten_at",
            [
                (project_id, tombstone_hash(i, k), now)
                for k, ids in kinds
                for i in dict.fromkeys(ids)
            ],
        )

    def context_entities(self, project_id: str, context_id: str) -> set[str] | None:
        key = "t.project_id=%s AND t.context_id=%s"

        def array(path: str) -> str:  # the array at `path`, or none
            return (
                f"jsonb_array_elements(CASE jsonb_typeof(t.trace #> '{path}') "
                f"WHEN 'array' THEN t.trace #> '{path}' ELSE '[]'::jsonb END)"
            )

        with self._read() as conn:
            found = self._x(conn, f"SELECT 1 FROM traces t WHERE {key}", (project_id, context_id))
            if found.fetchone() is None:
                return None
            rows = self._x(
                conn,
                f"SELECT c ->> 'id' FROM traces t, {array('{candidates}')} c WHERE {key} "
                "AND c -> 'included' = 'true'::jsonb AND c ->> 'kind' = 'entity' UNION ALL "
                f"SELECT o #>> '{{}}' FROM traces t, {array('{outcome,entities}')} o WHERE {key}",
                (project_id, context_id) * 2,
            ).fetchall()
        return {str(r[0]) for r in rows if r[0] is not None}

    # -- bulk copy -----------------------------------------------------------------------
    def export_rows(
        self, project_id: str, table: str, batch: int = 1000
    ) -> Iterator[list[dict[str, Any]]]:
        cols = table_columns(table)
        sql = f"SELECT {', '.join(cols)} FROM {table} WHERE project_id=%s"
        with self._tx() as conn:
            if self._on_statement is not None:
                self._on_statement(sql)
            with conn.cursor(name=f"ctxbase_export_{table}") as cur:
                cur.execute(sql, (project_id,))
                while rows := cur.fetchmany(batch):
                    yield [_export_row(cols, r) for r in rows]

    def import_rows(self, project_id: str, table: str, rows: Sequence[Mapping[str, Any]]) -> int:
        """Each batch is COPied (binary, so floats and vectors are never formatted as text)
        into a staging table and moved over by one INSERT ... SELECT that skips rows already
        present; its row count is the rows inserted."""
        cols = table_columns(table)
        if any(r["project_id"] != project_id for r in rows):
            raise ValueError(f"import_rows({project_id!r}, {table!r}) got another project's row")
        if not rows:
            return 0
        if table == "item_vectors":
            for dim in sorted({len(r["vec"]) for r in rows}):
                self._ensure_hnsw(int(dim))
        names, stage = ", ".join(cols), f"ctxbase_import_{table}"
        with self._tx() as conn:
            if table != "projects":
                self._lock(conn, [project_id], ensure=False, bump=True)
            types = self._import_types.get(table)
            if types is None:  # the columns' types, read once: the COPY sends them in binary
                cur = self._x(
                    conn, f"SELECT {names} FROM {table} WHERE project_id=%s LIMIT 0", (project_id,)
                )
                types = self._import_types[table] = _column_types(conn, cur.description or [])
            self._x(
                conn,
                f"CREATE TEMP TABLE {stage} ON COMMIT DROP AS "
                f"SELECT {names} FROM {table} WHERE project_id=%s WITH NO DATA",
                (project_id,),
            )
            copy_sql = f"COPY {stage} ({names}) FROM STDIN (FORMAT BINARY)"
            if self._on_statement is not None:
                self._on_statement(copy_sql)
            convert = [_CONVERT.get(name, _same) for _, name in types]
            with conn.cursor() as cur, cur.copy(copy_sql) as copy:
                copy.set_types([oid for oid, _ in types])
                for r in rows:
                    copy.write_row([f(r.get(c)) for f, c in zip(convert, cols, strict=True)])
            inserted = self._x(
                conn,
                f"INSERT INTO {table}({names}) SELECT {names} FROM {stage} ON CONFLICT DO NOTHING",
            ).rowcount
            # dropped now, not at commit: an outer transaction() may import this table again
            self._x(conn, f"DROP TABLE {stage}")
            if table == "events":  # the aliases are not copied: each event brings its own
                self._many(conn, self._dialect.sql(ALIAS_INSERT), import_aliases(rows))
        return max(inserted, 0)

    def _exported_row(self, cols: Sequence[str], row: Sequence[Any]) -> dict[str, Any]:
        return _export_row(cols, row)

    def delete_rows(
        self, project_id: str, table: str, rows: Sequence[Mapping[str, Any]]
    ) -> dict[str, int]:
        table_columns(table)  # a known table
        deleted: dict[str, int] = {}
        with self._tx() as conn:
            if table != "projects":
                self._lock(conn, [project_id], ensure=False, bump=True)
            for cond, args in key_batches(table, rows):
                where, bound = f"project_id=? AND {cond}", (project_id, *args)
                if table == "items":  # their vectors go with them (the index by trigger)
                    n = self._x(
                        conn,
                        self._dialect.sql(
                            "DELETE FROM item_vectors WHERE project_id=? AND item_id IN "
                            f"(SELECT item_id FROM items WHERE {where})"
                        ),
                        (project_id, *bound),
                    ).rowcount
                    deleted["item_vectors"] = deleted.get("item_vectors", 0) + max(n, 0)
                sql = self._dialect.sql(f"DELETE FROM {table} WHERE {where}")
                n = self._x(conn, sql, bound).rowcount
                deleted[table] = deleted.get(table, 0) + max(n, 0)
        return deleted

    @contextmanager
    def bulk_load(self) -> Iterator[None]:
        """HNSW indexes are dropped for the load and each is built once at its end: pgvector
        fills an HNSW index row by row, the slowest part of loading vectors (a built index
        is also better connected). Until then vector searches scan exactly. The indexes
        are rebuilt even when the load fails."""
        with self._dims_lock:
            self._bulk_loads += 1
            if self._bulk_loads == 1:
                with self._tx() as conn:
                    conn.execute("SELECT pg_advisory_xact_lock(%s)", (INDEX_LOCK,))
                    for (name,) in self._x(
                        conn, q.HNSW_INDEXES_SQL, (q.HNSW_INDEX_NAMES,)
                    ).fetchall():
                        conn.execute(f'DROP INDEX IF EXISTS "{name}"')
                self._known_dims.clear()
        try:
            yield
        finally:
            with self._dims_lock:
                self._bulk_loads -= 1
                last = self._bulk_loads == 0
            if last:
                self._build_hnsw_indexes()
                self._analyze()

    def _build_hnsw_indexes(self) -> None:
        with self._tx() as conn:
            counts = self._x(
                conn,
                f"{q.CROSS_PROJECT}SELECT dim, count(*) FROM item_vectors WHERE dim <= %s "
                "GROUP BY dim ORDER BY dim",
                (q.HNSW_MAX_DIM,),
            ).fetchall()
        for dim, vectors in counts:
            memory_kb = q.hnsw_build_memory_kb(int(vectors), int(dim))
            try:
                self._build_hnsw_index(int(dim), memory_kb)
            except InsufficientResources as exc:
                if memory_kb <= q.HNSW_BUILD_MEMORY_MIN_KB:
                    raise
                # a server with less memory than the graph: built in part on disk (slower)
                _log.warning(
                    "HNSW index of %d-dimension vectors: %d MB of maintenance_work_mem "
                    "refused (%s); building with %d MB",
                    dim,
                    memory_kb // 1024,
                    exc,
                    q.HNSW_BUILD_MEMORY_MIN_KB // 1024,
                )
                self._build_hnsw_index(int(dim), q.HNSW_BUILD_MEMORY_MIN_KB)

    def _build_hnsw_index(self, dim: int, memory_kb: int) -> None:
        with self._dims_lock, self._tx() as conn:
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (INDEX_LOCK,))
            # the graph is built in memory while it fits (hnsw_build_memory_kb)
            conn.execute(f"SET LOCAL maintenance_work_mem = '{int(memory_kb)}kB'")
            conn.execute(q.hnsw_index_sql(dim))
            self._known_dims.add(dim)

    def _analyze(self) -> None:
        """Fresh planner statistics for the loaded tables: until autovacuum got to them
        (minutes on a large load) the planner guessed their sizes: at 100k events a vector
        search took seconds instead of tens of milliseconds."""
        with self._tx() as conn:
            for table in TABLES:
                self._x(conn, f"ANALYZE {table}")

    # -- API keys (a global table: a reference table under Citus) ---------------------------
    def create_api_key(self, key: ApiKeyRecord) -> None:
        with self._tx() as conn:
            row = self._x(
                conn,
                "INSERT INTO api_keys(key_id, key_hash, name, role, projects, created_at, "
                "revoked_at) VALUES (%s,%s,%s,%s,%s,%s,%s) ON CONFLICT (key_id) DO NOTHING "
                "RETURNING key_id",
                (
                    key.key_id,
                    key.key_hash,
                    text(key.name),
                    key.role,
                    jsonb(list(key.projects)),
                    key.created_at,
                    key.revoked_at,
                ),
            ).fetchone()
        if row is None:
            raise StorageError(f"API key {key.key_id!r} already exists")

    def revoke_api_key(self, key_id: str, at: float) -> bool:
        with self._tx() as conn:
            cur = self._x(
                conn,
                "UPDATE api_keys SET revoked_at=%s WHERE key_id=%s AND revoked_at IS NULL",
                (at, key_id),
            )
            return cur.rowcount > 0


def _export_row(cols: Sequence[str], row: Sequence[Any]) -> dict[str, Any]:
    out = dict(zip(cols, row, strict=True))
    if "vec" in out:
        out["vec"] = as_array(out["vec"])
    return out


def _column_types(conn: Conn, description: Sequence[Any]) -> tuple[tuple[int, str], ...]:
    """(type oid, type name) of each column of a result description."""
    out = []
    for column in description:
        info = conn.adapters.types.get(column.type_code)
        out.append((int(column.type_code), info.name if info is not None else ""))
    return tuple(out)


# Exported values as the binary COPY of each column type takes them; the same values as the
# former INSERT's assignment casts made of them (a float into an integer column rounds).
def _same(value: Any) -> Any:
    return value


def _integer(value: Any) -> int | None:
    if value is None:
        return None
    return round(value) if isinstance(value, float) else int(value)


def _float(value: Any) -> float | None:
    return None if value is None else float(value)


def _text(value: Any) -> str | None:
    return None if value is None else text(value if isinstance(value, str) else str(value))


def _vector(value: Any) -> npt.NDArray[np.float32] | None:
    return None if value is None else np.asarray(value, dtype=np.float32)


_CONVERT: dict[str, Callable[[Any], Any]] = {
    "int2": _integer,
    "int4": _integer,
    "int8": _integer,
    "float4": _float,
    "float8": _float,
    "text": _text,
    "jsonb": jsonb,
    "vector": _vector,
}
