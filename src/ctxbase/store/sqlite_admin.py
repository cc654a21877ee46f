"""State, traces, forget, bulk copy and API keys of the SQLite backend (a mixin)."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from ..background import background_thread
from ..errors import StorageError
from ..model import StateFact
from .base import USES_SCOPE, TombstoneKind
from .forget_steps import ForgetSteps
from .keyword_log import KeywordLog
from .records import ApiKeyRecord, ForgetReport
from .rows import ALIAS_INSERT, import_aliases, next_version, trace_keys
from .schema import FORGET_TABLES, JSON_COLUMNS
from .shared import key_batches, table_columns
from .sqlite_base import (
    ITEM_SEQ,
    SQLiteBase,
    chunks,
    dumps,
    indexed_terms,
    loads,
    placeholders,
    reserve_rowids,
    tombstone_hash,
)
from .sqlite_search import reserve_vector_rowids

__all__ = ["SQLiteAdmin", "secure_delete"]

# Store.add_uses, one row per node: the count adds to the stored one.
_ADD_USES = (
    "INSERT INTO state(project_id, scope, scope_id, key, value, version, cause, updated_at) "
    "VALUES (?,?,'',?,NULL,?,NULL,?) ON CONFLICT (project_id, scope, scope_id, key) DO UPDATE "
    "SET version = state.version + excluded.version, updated_at = excluded.updated_at"
)


class SQLiteAdmin(ForgetSteps, KeywordLog, SQLiteBase):
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
            version = next_version(last)
            stored = fact.model_copy(update={"version": version})
            conn.execute(
                "INSERT OR REPLACE INTO state(project_id, scope, scope_id, key, value, version, "
                "cause, updated_at, ttl) VALUES (?,?,?,?,?,?,?,?,?)",
                (*key, dumps(stored.value), version, stored.cause, stored.updated_at, stored.ttl),
            )
            conn.execute(
                "INSERT INTO state_history(project_id, scope, scope_id, key, version, old_value,"
                " new_value, cause, ts, deleted, ttl) VALUES (?,?,?,?,?,?,?,?,?,0,?)",
                (
                    *key,
                    version,
                    old[0] if old else None,
                    dumps(stored.value),
                    stored.cause,
                    stored.updated_at,
                    stored.ttl,
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

    def touch_index(self, project_id: str) -> None:
        with self._write() as conn:
            self._ensure_project(conn, project_id)
            self._bump(conn, project_id)

    def add_uses(self, project_id: str, counts: Mapping[str, int], at: float) -> None:
        if not counts:
            return
        with self._write(durable=False) as conn:  # a usage signal, not worth a disk flush
            self._ensure_project(conn, project_id)
            conn.executemany(
                _ADD_USES, [(project_id, USES_SCOPE, k, n, at) for k, n in counts.items()]
            )

    # -- traces --------------------------------------------------------------------------
    def put_trace(self, project_id: str, context_id: str, trace: dict[str, Any]) -> None:
        # Every assembly writes one: not worth a disk flush each (see _write)
        with self._write(durable=False) as conn:
            self._ensure_project(conn, project_id)
            conn.execute(
                "INSERT OR REPLACE INTO traces(project_id, context_id, created_at, trace, "
                "agent_role, session_id, task_id) VALUES (?,?,?,?,?,?,?)",
                (project_id, context_id, time.time(), dumps(trace), *trace_keys(trace)),
            )

    def context_entities(self, project_id: str, context_id: str) -> set[str] | None:
        key = "t.project_id=? AND t.context_id=?"
        with self._read() as conn:
            if not conn.execute(
                f"SELECT 1 FROM traces t WHERE {key}", (project_id, context_id)
            ).fetchone():
                return None
            rows = conn.execute(
                "SELECT json_extract(c.value, '$.id') FROM traces t, "
                f"json_each(t.trace, '$.candidates') c WHERE {key} "
                "AND json_extract(c.value, '$.included') = 1 "
                "AND json_extract(c.value, '$.kind') = 'entity' UNION ALL "
                "SELECT o.value FROM traces t, json_each(t.trace, '$.outcome.entities') o "
                f"WHERE {key}",
                (project_id, context_id) * 2,
            ).fetchall()
        return {str(r[0]) for r in rows if r[0] is not None}

    # -- forget --------------------------------------------------------------------------
    def _run(self, conn: sqlite3.Connection, sql: str, args: Sequence[Any] = ()) -> Any:
        return conn.execute(sql, tuple(args))

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
        with self._write() as conn, secure_delete(conn):
            if whole_project:
                self._forget_project(conn, project_id, report)
            else:
                self._forget_nodes(
                    conn,
                    project_id,
                    report,
                    event_ids=event_ids,
                    entity_ids=entity_ids,
                    session_id=session_id,
                    soft_deleted_before=soft_deleted_before,
                    replace_state=replace_state,
                    repos=repos,
                    trace_ids=trace_ids,
                    redact_ids=redact_ids,
                )
        self._truncate_wal()
        return report

    def _forget_nodes(
        self,
        conn: sqlite3.Connection,
        project_id: str,
        report: ForgetReport,
        *,
        event_ids: Sequence[str],
        entity_ids: Sequence[str],
        session_id: str | None,
        soft_deleted_before: float | None,
        replace_state: Mapping[tuple[str, str, str], Any] | None = None,
        repos: Sequence[str] = (),
        trace_ids: Sequence[str] = (),
        redact_ids: Sequence[str] = (),
    ) -> None:
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
        node_ids = scope.node_ids
        self._delete_items_of(conn, project_id, node_ids, report)
        self._set_context_state(conn, project_id, node_ids, None)
        for part in chunks(node_ids):
            ph = placeholders(len(part))
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
            conn.execute(  # bookkeeping: not counted in the report
                f"DELETE FROM anchor_backlog WHERE project_id=? AND event_id IN ({ph})",
                (project_id, *part),
            )
            n = conn.execute(
                f"DELETE FROM entities WHERE project_id=? AND entity_id IN ({ph})",
                (project_id, *part),
            ).rowcount
            report.add("entities", n)
        self._forget_derived_relations(conn, project_id, scope, report)
        self._forget_state(conn, project_id, scope, report)
        self._forget_traces(conn, project_id, scope, report)
        sessions: list[str] = []
        if session_id is not None:
            for table in ("tasks", "sessions"):
                n = conn.execute(
                    f"DELETE FROM {table} WHERE project_id=? AND session_id=?",
                    (project_id, session_id),
                ).rowcount
                report.add(table, n)
            sessions = [session_id] if report.removed.get("sessions") else []
        aliases = self._forget_aliases(conn, project_id, scope.stored_event_ids, report)
        _tombstone(
            conn,
            project_id,
            [*scope.stored_event_ids, *aliases],
            scope.stored_entity_ids,
            sessions,
            repos=repos,
        )
        self._fix_session_tails(conn, project_id)
        self._purge_fts(conn, report)
        self._keep_keyword_log(conn, project_id)
        self._bump(conn, project_id)

    def _truncate_wal(self) -> None:
        """After a forget: copy the zeroed pages into the file and empty the WAL, whose
        older frames still hold the forgotten rows. Never waited for: while another
        connection reads or writes it is tried again in the background, with growing
        pauses, until it succeeds or the store closes (a plain checkpoint would only
        overwrite those frames as later writes reuse them)."""
        if self.path == ":memory:" or self._wal_emptied():
            return
        with self._retry_lock:
            self._wal_asked += 1  # a retry under way must empty it once more after this
            if self._retrying:
                return
            self._retrying = True
        background_thread(self._truncate_later, name="ctxbase-wal-truncate").start()

    def _wal_emptied(self) -> bool:
        """One TRUNCATE checkpoint that waits for no one; whether the WAL is now empty."""
        try:
            with self._read() as conn:
                conn.execute("PRAGMA busy_timeout = 0")
                try:
                    row = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
                except sqlite3.Error:
                    return False  # busy: not an error for the forget itself
                finally:
                    conn.execute(f"PRAGMA busy_timeout = {int(self._busy_timeout_s * 1000)}")
        except StorageError:
            return True  # closed: the last connection's close checkpoints the file
        return bool(row) and row[0] == 0

    def _truncate_later(self) -> None:
        """Try until a truncation succeeds that began after the last forget asked for one
        (a forget committed during a try asks again), or the store closes."""
        pause = 0.05
        try:
            while True:
                with self._retry_lock:
                    asked = self._wal_asked
                if self._closed or self._wal_emptied():
                    with self._retry_lock:  # done, in the lock a forget asks under
                        if self._closed or asked == self._wal_asked:
                            self._retrying = False
                            return
                    continue
                time.sleep(pause)
                pause = min(pause * 2, 2.0)
        except BaseException:
            with self._retry_lock:
                self._retrying = False
            raise

    def _forget_project(
        self, conn: sqlite3.Connection, project_id: str, report: ForgetReport
    ) -> None:
        repos = self._project_repos(conn, project_id)  # before their rows go
        report.repos = list(repos)  # forgotten with it (tombstoned below)
        forgotten = [
            [r[0] for r in conn.execute(sql, (project_id,)).fetchall()]
            for sql in (
                "SELECT event_id FROM events WHERE project_id=?",
                "SELECT entity_id FROM entities WHERE project_id=?",
                "SELECT session_id FROM sessions WHERE project_id=?",
            )
        ]
        # the ids merged into its aggregated events are tombstoned as events too
        forgotten[0] += [
            r[0]
            for r in conn.execute(
                "SELECT alias_id FROM event_aliases WHERE project_id=?", (project_id,)
            ).fetchall()
        ]
        rowids = [
            r[0]
            for r in conn.execute(
                "SELECT rowid FROM items WHERE project_id=?", (project_id,)
            ).fetchall()
        ]
        for rp in chunks(rowids):
            report.add(
                "item_fts",
                conn.execute(
                    f"DELETE FROM item_fts WHERE rowid IN ({placeholders(len(rp))})",
                    tuple(rp),
                ).rowcount,
            )
        for table in FORGET_TABLES:
            n = conn.execute(f"DELETE FROM {table} WHERE project_id=?", (project_id,)).rowcount
            report.add(table, n)
        conn.execute("DELETE FROM anchor_backlog WHERE project_id=?", (project_id,))
        # Tombstones stay (they hold only hashes): a stale retry must not come back. The
        # project's own, when it held the project, tells a copy from a backup
        # (copy_filter) not to bring it back; its repositories', once it is written to
        # again, to leave out their records.
        held = [project_id] if report.removed.get("projects") else []
        events, entities, sessions = forgotten
        _tombstone(conn, project_id, events, entities, sessions, held, repos)
        # every row just left: readers reload rather than apply a removal per row
        self._cut_keyword_log(conn, project_id)
        self._purge_fts(conn, report)

    # -- bulk copy -----------------------------------------------------------------------
    def export_rows(
        self, project_id: str, table: str, batch: int = 1000
    ) -> Iterator[list[dict[str, Any]]]:
        cols = table_columns(table)
        with self._read() as conn:
            cur = conn.execute(
                f"SELECT {', '.join(cols)} FROM {table} WHERE project_id=? ORDER BY rowid",
                (project_id,),
            )
            while rows := cur.fetchmany(batch):
                yield [_export_row(cols, r) for r in rows]

    def import_rows(self, project_id: str, table: str, rows: Sequence[Mapping[str, Any]]) -> int:
        cols = table_columns(table)
        if any(r["project_id"] != project_id for r in rows):
            raise ValueError(f"import_rows({project_id!r}, {table!r}) got another project's row")
        inserted = 0
        with self._write() as conn:
            # item_vectors and items rowids say when a row was stored: fresh ones, one per row
            rowid = 0
            if table == "item_vectors":
                rowid = reserve_vector_rowids(conn, len(rows))
            elif table == "items" and rows:
                rowid = reserve_rowids(conn, ITEM_SEQ, "items", len(rows))
            for n, r in enumerate(rows):
                values = [_import_value(c, r.get(c)) for c in cols]
                names = list(cols)
                if rowid:
                    names, values = ["rowid", *names], [rowid + n, *values]
                cur = conn.execute(
                    f"INSERT OR IGNORE INTO {table}({', '.join(names)}) "
                    f"VALUES ({placeholders(len(names))})",
                    values,
                )
                if cur.rowcount and table == "items":
                    conn.execute(
                        "INSERT INTO item_fts(rowid, terms, own) VALUES (?, ?, ?)",
                        (
                            rowid + n,
                            indexed_terms(
                                r["terms"],
                                r.get("context_terms") or "",
                                int(r.get("context_hidden") or 0),
                            ),
                            r["terms"],
                        ),
                    )
                inserted += max(cur.rowcount, 0)
            if table == "events":  # the aliases are not copied: each event brings its own
                conn.executemany(ALIAS_INSERT, import_aliases(rows))
            if table != "projects":
                self._bump(conn, project_id)
        return inserted

    def _exported_row(self, cols: Sequence[str], row: Sequence[Any]) -> dict[str, Any]:
        return _export_row(cols, row)

    def delete_rows(
        self, project_id: str, table: str, rows: Sequence[Mapping[str, Any]]
    ) -> dict[str, int]:
        table_columns(table)  # a known table
        deleted: dict[str, int] = {}
        with self._write() as conn:
            for cond, args in key_batches(table, rows):
                where, bound = f"project_id=? AND {cond}", (project_id, *args)
                if table == "items":  # their keyword-index rows and vectors go with them
                    found = conn.execute(
                        f"SELECT rowid, item_id FROM items WHERE {where}", bound
                    ).fetchall()
                    conn.executemany("DELETE FROM item_fts WHERE rowid=?", [(r[0],) for r in found])
                    ids = [r[1] for r in found]
                    if ids:
                        n = conn.execute(
                            "DELETE FROM item_vectors WHERE project_id=? AND item_id IN "
                            f"({placeholders(len(ids))})",
                            (project_id, *ids),
                        ).rowcount
                        deleted["item_vectors"] = deleted.get("item_vectors", 0) + n
                n = conn.execute(f"DELETE FROM {table} WHERE {where}", bound).rowcount
                deleted[table] = deleted.get(table, 0) + n
            if deleted and table != "projects":
                self._bump(conn, project_id)
        return deleted

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
                        dumps(list(key.projects)),
                        key.created_at,
                        key.revoked_at,
                    ),
                )
            except sqlite3.IntegrityError as exc:
                raise StorageError(f"API key {key.key_id!r} already exists") from exc

    def revoke_api_key(self, key_id: str, at: float) -> bool:
        with self._write() as conn:
            cur = conn.execute(
                "UPDATE api_keys SET revoked_at=? WHERE key_id=? AND revoked_at IS NULL",
                (at, key_id),
            )
        return cur.rowcount > 0


@contextmanager
def secure_delete(conn: sqlite3.Connection) -> Iterator[None]:
    # Deleted rows are overwritten with zeros instead of lingering in free pages and
    # unused parts of pages until a VACUUM, whatever the build's default (older page images
    # stay in the WAL until a checkpoint copies the zeroed pages over them).
    before = int(conn.execute("PRAGMA secure_delete").fetchone()[0])
    conn.execute("PRAGMA secure_delete = ON")
    try:
        yield
    finally:
        conn.execute(f"PRAGMA secure_delete = {before}")


def _export_row(cols: Sequence[str], row: Sequence[Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for col, value in zip(cols, row, strict=True):
        if col in JSON_COLUMNS:
            value = loads(value)
        elif col == "vec":
            import numpy as np  # only a copied vector needs it: opening a store does not

            value = np.frombuffer(value, dtype=np.float32).copy()
        out[col] = value
    return out


def _import_value(col: str, value: Any) -> Any:
    if col in JSON_COLUMNS:
        return dumps(value)
    if col == "vec":
        import numpy as np

        return np.asarray(value, dtype=np.float32).tobytes()
    if isinstance(value, bool):
        return int(value)
    return value


def _tombstone(
    conn: sqlite3.Connection,
    project_id: str,
    events: Sequence[str],
    entities: Sequence[str] = (),
    sessions: Sequence[str] = (),
    projects: Sequence[str] = (),
    repos: Sequence[str] = (),
) -> None:
    """The tombstones (hashes only) of forgotten events, entities, sessions, projects and
    repositories, with the time of this forget; one already there takes that time."""
    kinds: tuple[tuple[TombstoneKind, Sequence[str]], ...] = (
        ("event", events),
        ("entity", entities),
        ("session", sessions),
        ("project", projects),
        ("repo", repos),
    )
    now = time.time()
    conn.executemany(
        "INSERT INTO tombstones(project_id, hashed_id, forgotten_at) VALUES (?,?,?) "
        "ON CONFLICT(project_id, hashed_id) DO UPDATE SET forgotten_at=excluded.forgotten_at",
        [(project_id, tombstone_hash(i, k), now) for k, ids in kinds for i in dict.fromkeys(ids)],
    )
