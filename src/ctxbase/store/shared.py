"""Store methods whose SQL and logic are the same on every backend (a mixin).

Each is a plain read: one statement, in the backend's placeholder style (see dialect.py),
run by the backend's `_fetch_all` / `_fetch_one` in its own read transaction, and converted
by the shared row converters (rows.py).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any, ClassVar

from ..model import Entity, Event, SessionInfo, StateFact, TaskInfo
from . import rows
from .base import TombstoneKind
from .dialect import Dialect, filter_sql
from .records import ApiKeyRecord, EventCount, ItemFilter, StateChange, TraceSummary
from .schema import COLUMNS, KEYS, UPGRADE_PREFIX

__all__ = ["SharedReads", "key_batches", "table_columns"]

# (scope, scope_id) pairs per get_states statement: two bound parameters each
_STATE_PAIRS = 400


def table_columns(table: str) -> tuple[str, ...]:
    """The columns of one table of schema.TABLES (ValueError for any other name)."""
    try:
        return COLUMNS[table]
    except KeyError:
        raise ValueError(f"unknown table {table!r} (one of {', '.join(COLUMNS)})") from None


def key_batches(
    table: str, rows: Sequence[Mapping[str, Any]], size: int = 150
) -> Iterator[tuple[str, list[Any]]]:
    """The rows' keys (schema.KEYS) as conditions on `table`'s key columns, with `?`
    placeholders, at most `size` keys each (after `project_id=?`, which the caller binds
    first): `(k1, k2) IN (VALUES (?, ?), ...)`, a form SQLite and PostgreSQL both take.
    Nothing for no rows; for the projects table (keyed by project_id alone) one empty
    condition ("1=1")."""
    keys = KEYS[table]
    if not rows:
        return
    if not keys:
        yield "1=1", []
        return
    unique = list(dict.fromkeys(tuple(r[k] for k in keys) for r in rows))
    one = "(" + ", ".join("?" for _ in keys) + ")"
    for start in range(0, len(unique), size):
        part = unique[start : start + size]
        cond = f"({', '.join(keys)}) IN (VALUES {', '.join(one for _ in part)})"
        yield cond, [v for key in part for v in key]


class SharedReads:
    """The reads both backends run alike; a backend supplies its dialect and the two fetch
    helpers."""

    _dialect: ClassVar[Dialect]

    def _fetch_all(self, sql: str, args: Sequence[Any] = ()) -> list[Any]:
        """Every row of one statement (already in the driver's placeholder style)."""
        raise NotImplementedError

    def _fetch_one(self, sql: str, args: Sequence[Any] = ()) -> Any:
        """The first row of one statement, or None."""
        raise NotImplementedError

    def _all(self, sql: str, args: Sequence[Any] = ()) -> list[Any]:
        return self._fetch_all(self._dialect.sql(sql), args)

    def _one(self, sql: str, args: Sequence[Any] = ()) -> Any:
        return self._fetch_one(self._dialect.sql(sql), args)

    def _read_events(self, sql: str, args: Sequence[Any]) -> list[Event]:
        """The events of EVENT_COLS rows of one statement, with their links, in row order."""
        raise NotImplementedError

    # -- projects, sessions, tasks ---------------------------------------------------------
    def list_projects(self) -> list[str]:
        sql = self._dialect.cross_project + "SELECT project_id FROM projects ORDER BY project_id"
        return [r[0] for r in self._all(sql)]

    def has_forgotten(self, project_id: str) -> bool:
        return (
            self._one("SELECT 1 FROM tombstones WHERE project_id=? LIMIT 1", (project_id,))
            is not None
        )

    def forgotten_times(
        self, project_id: str, ids: Sequence[str], kind: TombstoneKind
    ) -> dict[str, float | None]:
        hashes = {rows.tombstone_hash(i, kind): i for i in dict.fromkeys(ids) if i}
        if not hashes:
            return {}
        cond, args = self._dialect.any_of("hashed_id", list(hashes))
        found = self._all(
            f"SELECT hashed_id, forgotten_at FROM tombstones WHERE project_id=? AND {cond}",
            (project_id, *args),
        )
        return {hashes[h]: None if at is None else float(at) for h, at in found}

    def event_aliases(self, project_id: str, ids: Sequence[str]) -> dict[str, str]:
        wanted = list(dict.fromkeys(i for i in ids if i))
        if not wanted:
            return {}
        cond, args = self._dialect.any_of("alias_id", wanted)
        found = self._all(
            f"SELECT alias_id, event_id FROM event_aliases WHERE project_id=? AND {cond}",
            (project_id, *args),
        )
        return {str(alias): str(event_id) for alias, event_id in found}

    def list_repos(self, project_id: str) -> list[str]:
        sql = (
            "SELECT DISTINCT repo FROM items "
            "WHERE project_id=? AND active=1 AND repo IS NOT NULL ORDER BY repo"
        )
        return [r[0] for r in self._all(sql, (project_id,))]

    def repo_entity_ids(self, project_id: str, repos: Sequence[str]) -> dict[str, list[str]]:
        wanted = list(dict.fromkeys(repos))
        if not wanted:
            return {}
        found: dict[str, dict[str, None]] = {}
        repo = self._dialect.json_text("properties", "repo")
        by_property, args = self._dialect.any_of(repo, wanted)
        by_item, item_args = self._dialect.any_of("repo", wanted)
        sql = (
            f"SELECT {repo}, entity_id FROM entities WHERE project_id=? AND {by_property} "
            "UNION SELECT repo, owner_id FROM items WHERE project_id=? "
            f"AND {by_item} ORDER BY 1, 2"
        )
        for name, entity_id in self._all(sql, (project_id, *args, project_id, *item_args)):
            found.setdefault(str(name), {})[str(entity_id)] = None
        return {name: list(found[name]) for name in wanted if name in found}

    _SESSION_SELECT = (
        "SELECT project_id, session_id, status, title, created_at, updated_at, metadata "
        "FROM sessions "
    )

    def get_session(self, project_id: str, session_id: str) -> SessionInfo | None:
        row = self._one(
            self._SESSION_SELECT + "WHERE project_id=? AND session_id=?", (project_id, session_id)
        )
        return rows.session_row(row, self._dialect.load) if row else None

    def has_relation(self, project_id: str, relation_id: str) -> bool:
        found = self._one(
            "SELECT 1 FROM relations WHERE project_id=? AND relation_id=?",
            (project_id, relation_id),
        )
        return found is not None

    def list_sessions(self, project_id: str) -> list[SessionInfo]:
        found = self._all(
            self._SESSION_SELECT + "WHERE project_id=? ORDER BY created_at, session_id",
            (project_id,),
        )
        return [rows.session_row(r, self._dialect.load) for r in found]

    _TASK_SELECT = (
        "SELECT project_id, task_id, session_id, parent_task_id, title, status, created_at, "
        "updated_at, metadata FROM tasks "
    )

    def get_task(self, project_id: str, task_id: str) -> TaskInfo | None:
        row = self._one(
            self._TASK_SELECT + "WHERE project_id=? AND task_id=?", (project_id, task_id)
        )
        return rows.task_row(row, self._dialect.load) if row else None

    def list_tasks(self, project_id: str, session_id: str | None = None) -> list[TaskInfo]:
        sql = self._TASK_SELECT + "WHERE project_id=?"
        args: list[Any] = [project_id]
        if session_id is not None:
            sql += " AND session_id=?"
            args.append(session_id)
        found = self._all(sql + " ORDER BY created_at, task_id", args)
        return [rows.task_row(r, self._dialect.load) for r in found]

    # -- events ------------------------------------------------------------------------
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
        sql = f"SELECT {rows.EVENT_COLS} FROM events WHERE project_id=?"
        args: list[Any] = [project_id]
        if session_id is not None:
            sql += " AND session_id=?"
            args.append(session_id)
        if types:
            cond, cond_args = self._dialect.any_of("type", types)
            sql += f" AND {cond}"
            args += cond_args
        for cond, value in (("task_id=?", task_id), ("ts>=?", since), ("ts<=?", until)):
            if value is not None:
                sql += f" AND {cond}"
                args.append(value)
        if not include_inactive:
            sql += " AND active=1"
        order = "seq" if session_id is not None else "ts, seq"
        if last_n is not None:
            desc = "seq DESC" if session_id is not None else "ts DESC, seq DESC"
            sql = f"SELECT * FROM ({sql} ORDER BY {desc} LIMIT ?) AS last ORDER BY {order}"
            args.append(int(last_n))
        else:
            sql += f" ORDER BY {order}"
        return self._read_events(self._dialect.sql(sql), args)

    def anchor_backlog(self, project_id: str) -> list[str]:
        # Oldest first: by when the events were captured, a session's in its order.
        found = self._all(
            "SELECT b.event_id FROM anchor_backlog b LEFT JOIN events e "
            "ON e.project_id = b.project_id AND e.event_id = b.event_id "
            "WHERE b.project_id=? ORDER BY e.ts, e.seq, b.event_id",
            (project_id,),
        )
        return [r[0] for r in found]

    def pending_upgrades(self) -> frozenset[str]:
        cond, args = self._dialect.starts_with("key", UPGRADE_PREFIX)
        found = self._all(f"SELECT key FROM meta WHERE {cond}", args)
        return frozenset(r[0][len(UPGRADE_PREFIX) :] for r in found)

    def textless_events(self, type_: str, after: tuple[str, str] | None, limit: int) -> list[Event]:
        sql = (
            self._dialect.cross_project + f"SELECT {rows.EVENT_COLS} FROM events WHERE type=? "
            "AND (text IS NULL OR text='') AND data IS NOT NULL AND active=1"
        )
        args: list[Any] = [type_]
        if after is not None:
            sql += " AND (project_id>? OR (project_id=? AND event_id>?))"
            args += [after[0], after[0], after[1]]
        sql += " ORDER BY project_id, event_id LIMIT ?"
        args.append(int(limit))
        return self._read_events(self._dialect.sql(sql), args)

    def event_page(
        self,
        project_id: str,
        session_id: str,
        *,
        after_seq: int | None = None,
        before_seq: int | None = None,
        limit: int = 100,
        agent_ids: Sequence[str] | None = None,
        types: Sequence[str] | None = None,
    ) -> list[Event]:
        # A range of the (project, session, seq) index: a page costs the same at any depth.
        sql = f"SELECT {rows.EVENT_COLS} FROM events WHERE project_id=? AND session_id=?"
        args: list[Any] = [project_id, session_id]
        for column, values in (("agent_id", agent_ids), ("type", types)):
            if values:
                cond, cond_args = self._dialect.any_of(column, values)
                sql += f" AND {cond}"
                args += cond_args
        if after_seq is not None:
            sql += " AND seq>?"
            args.append(int(after_seq))
        if before_seq is not None:
            sql += " AND seq<?"
            args.append(int(before_seq))
        sql += " AND active=1"
        if before_seq is not None and after_seq is None:
            sql = f"SELECT * FROM ({sql} ORDER BY seq DESC LIMIT ?) AS page ORDER BY seq"
        else:
            sql += " ORDER BY seq LIMIT ?"
        args.append(int(limit))
        return self._read_events(self._dialect.sql(sql), args)

    def event_counts(self, project_id: str, session_id: str) -> list[EventCount]:
        found = self._all(
            "SELECT agent_id, type, count(*), min(ts), max(ts) FROM events "
            "WHERE project_id=? AND session_id=? AND active=1 "
            "GROUP BY agent_id, type ORDER BY agent_id, type",
            (project_id, session_id),
        )
        return [EventCount(r[0], r[1], int(r[2]), float(r[3]), float(r[4])) for r in found]

    def hidden_event_counts(
        self, project_id: str, session_ids: Sequence[str] | None = None
    ) -> dict[str, int]:
        sql, args = (
            "SELECT session_id, count(*) FROM events WHERE project_id=? AND active=0",
            [project_id],
        )
        if session_ids is not None:
            if not session_ids:
                return {}
            cond, cond_args = self._dialect.any_of("session_id", list(session_ids))
            sql += f" AND {cond}"
            args += cond_args
        found = self._all(sql + " GROUP BY session_id ORDER BY session_id", args)
        return {str(r[0]): int(r[1]) for r in found}

    def last_events_of_sessions(
        self, project_id: str, session_ids: Sequence[str]
    ) -> dict[str, Event]:
        """Session id -> its last active event (as `list_events(..., last_n=1)` finds it),
        for the sessions that have one."""
        out: dict[str, Event] = {}
        for session_id in dict.fromkeys(session_ids):
            last = self.list_events(project_id, session_id, last_n=1)
            if last:
                out[session_id] = last[0]
        return out

    # -- entities ----------------------------------------------------------------------------
    _ENTITY_SELECT = (
        "SELECT project_id, entity_id, type, name, text, properties, version, latest, active, "
        "created_at, updated_at FROM entities "
    )

    def list_entities(
        self,
        project_id: str,
        *,
        type: str | None = None,
        name: str | None = None,
        latest_only: bool = True,
        limit: int | None = None,
        newest_first: bool = False,
        exclude_types: Sequence[str] = (),
        repos: Sequence[str] = (),
        updated_after: float | None = None,
        session_id: str | None = None,
    ) -> list[Entity]:
        sql = self._ENTITY_SELECT + "WHERE project_id=? AND active=1"
        args: list[Any] = [project_id]
        if session_id is not None:  # read in the query: not every entity's properties
            sql += f" AND {self._dialect.json_text('properties', 'session_id')}=?"
            args.append(session_id)
        if updated_after is not None:
            sql += " AND updated_at > ?"
            args.append(updated_after)
        if repos:
            cond, cond_args = self._dialect.any_of(
                self._dialect.json_text("properties", "repo"), list(dict.fromkeys(repos))
            )
            sql += f" AND {cond}"
            args.extend(cond_args)
        if type is not None:
            sql += " AND type=?"
            args.append(type)
        if exclude_types:
            sql += f" AND type NOT IN ({','.join('?' * len(exclude_types))})"
            args.extend(exclude_types)
        if name is not None:
            sql += " AND name=?"
            args.append(name)
        if latest_only:
            sql += " AND latest=1"
        # newest first: the entities_recent index (project, type, updated_at) walked backwards
        sql += (
            " ORDER BY updated_at DESC, entity_id"
            if newest_first
            else " ORDER BY type, name, version"
        )
        if limit is not None:
            sql += " LIMIT ?"
            args.append(int(limit))
        return [rows.entity_row(r, self._dialect.load) for r in self._all(sql, args)]

    def held_rows(
        self, project_id: str, table: str, rows: Sequence[Mapping[str, Any]]
    ) -> list[dict[str, Any]]:
        cols = table_columns(table)
        out: list[dict[str, Any]] = []
        for cond, args in key_batches(table, rows):
            sql = f"SELECT {', '.join(cols)} FROM {table} WHERE project_id=? AND {cond}"
            out.extend(self._exported_row(cols, r) for r in self._all(sql, (project_id, *args)))
        return out

    def _exported_row(self, cols: Sequence[str], row: Sequence[Any]) -> dict[str, Any]:
        """A row as `export_rows` gives it (JSON decoded, vectors as arrays): the backend's."""
        raise NotImplementedError

    def entities_fingerprint(
        self, project_id: str, exclude_types: Sequence[str] = (), until: float | None = None
    ) -> tuple[float, ...]:
        # A write stamps updated_at and a new version (a rewrite in place keeping both
        # still moves the names' length when it renames); hiding or restoring moves the
        # sums over the visible rows; a forget moves the count.
        sql = (
            "SELECT count(*), max(updated_at), sum(updated_at), sum(version), "
            "sum(length(name)) FROM entities WHERE project_id=? AND active=1 AND latest=1"
        )
        args: list[Any] = [project_id]
        if exclude_types:
            sql += f" AND type NOT IN ({','.join('?' * len(exclude_types))})"
            args.extend(exclude_types)
        if until is not None:
            sql += " AND updated_at <= ?"
            args.append(until)
        row = self._one(sql, args)
        return tuple(float(v or 0) for v in row)

    def entity_type_counts(self, project_id: str) -> dict[str, int]:
        found = self._all(
            "SELECT type, count(*) FROM entities WHERE project_id=? AND active=1 AND latest=1 "
            "GROUP BY type ORDER BY type",
            (project_id,),
        )
        return {str(r[0]): int(r[1]) for r in found}

    # -- search index --------------------------------------------------------------------
    def filter_item_ids(
        self,
        project_id: str,
        flt: ItemFilter,
        *,
        among: Sequence[str] | None = None,
        limit: int | None = None,
    ) -> set[str]:
        where, args = filter_sql(self._dialect, flt)
        sql = self._dialect.sql("SELECT i.item_id FROM items i WHERE i.project_id=? AND i.active=1")
        if among is None:
            tail = self._dialect.sql(" LIMIT ?") if limit is not None else ""
            extra = [int(limit)] if limit is not None else []
            return {r[0] for r in self._fetch_all(sql + where + tail, (project_id, *args, *extra))}
        found: set[str] = set()
        wanted = list(dict.fromkeys(among))
        for start in range(0, len(wanted), 500):
            cond, cond_args = self._dialect.any_of("i.item_id", wanted[start : start + 500])
            query = sql + where + self._dialect.sql(f" AND {cond}")
            found.update(r[0] for r in self._fetch_all(query, (project_id, *args, *cond_args)))
            if limit is not None and len(found) >= limit:
                break
        return found

    def trace_project(self, context_id: str) -> str | None:
        sql = self._dialect.cross_project + "SELECT project_id FROM traces WHERE context_id=?"
        row = self._fetch_one(self._dialect.sql(sql + " LIMIT 1"), (context_id,))
        return str(row[0]) if row else None

    def list_traces(
        self,
        project_id: str,
        *,
        session_id: str | None = None,
        before: float | None = None,
        limit: int = 50,
    ) -> list[TraceSummary]:
        # The page is chosen first, then only its traces are opened for the summary fields
        # (read in SQL: a listing never sends whole traces).
        page = "SELECT context_id FROM traces WHERE project_id=?"
        args: list[Any] = [project_id]
        for cond, value in (("session_id=?", session_id), ("created_at<?", before)):
            if value is not None:
                page += f" AND {cond}"
                args.append(value)
        order = "ORDER BY created_at DESC, context_id DESC"
        page += f" {order} LIMIT ?"
        args += [int(limit), project_id]
        fields = ", ".join(
            self._dialect.json_text("trace", key) for key in ("intent", "policy", "total_tokens")
        )
        sql = (
            f"SELECT context_id, created_at, agent_role, session_id, task_id, {fields} "
            f"FROM traces WHERE context_id IN ({page}) AND project_id=? {order}"
        )
        return [
            TraceSummary(
                context_id=str(r[0]),
                created_at=float(r[1]),
                agent_role=r[2],
                session_id=r[3],
                task_id=r[4],
                intent=None if r[5] is None else str(r[5]),
                policy=None if r[6] is None else str(r[6]),
                total_tokens=None if r[7] is None else int(float(r[7])),
            )
            for r in self._all(sql, args)
        ]

    def latest_context_ids(
        self,
        project_id: str,
        agent_roles: Sequence[str],
        *,
        task_id: str | None = None,
        aliases: Mapping[str, Sequence[str]] | None = None,
    ) -> dict[str, str]:
        out: dict[str, str] = {}
        scope = " AND task_id=?" if task_id is not None else ""
        for role in dict.fromkeys(agent_roles):
            names = list(dict.fromkeys([role, *(aliases or {}).get(role, ())]))
            marks = ",".join("?" * len(names))
            row = self._one(
                f"SELECT context_id FROM traces WHERE project_id=? AND agent_role IN ({marks})"
                f"{scope} ORDER BY created_at DESC LIMIT 1",
                (project_id, *names, *([task_id] if task_id is not None else [])),
            )
            if row:
                out[role] = str(row[0])
        return out

    def count_items(self, project_id: str) -> int:
        row = self._one("SELECT count(*) FROM items WHERE project_id=? AND active=1", (project_id,))
        return int(row[0]) if row else 0

    def _pending_sql(
        self, columns: str, model: str, project_id: str | None, missing_only: bool = False
    ) -> tuple[str, list[Any]]:
        # Three index ranges (no vector yet, another model below or above this one) rather
        # than "<> ?": the worker's poll then reads the pending rows, not every item.
        scope = " AND project_id=?" if project_id is not None else ""
        conds = _pending_conds("", missing_only)
        sql = " UNION ALL ".join(
            f"SELECT {columns} FROM items WHERE active=1{scope} AND {cond}" for cond in conds
        )
        scoped: list[Any] = [project_id] if project_id is not None else []
        if missing_only:
            return sql, scoped
        return sql, [*scoped, *scoped, model, *scoped, model]

    def pending_embeddings(
        self, model: str, limit: int, project_id: str | None = None, *, missing_only: bool = False
    ) -> list[tuple[str, str, str]]:
        sql, args = self._pending_sql("project_id, item_id, text", model, project_id, missing_only)
        if project_id is None:
            sql = self._dialect.cross_project + sql  # the embedding worker serves every project
        found = self._all(sql + " LIMIT ?", (*args, int(limit)))
        return [(r[0], r[1], r[2]) for r in found]

    def pending_projects(self, model: str, *, missing_only: bool = False) -> list[str]:
        # One index probe per project (the three ranges of _pending_sql), not a read of the
        # pending rows: the worker asks before each batch, and a bulk backlog is large.
        conds = _pending_conds("i.", missing_only)
        arms = " OR ".join(
            "EXISTS (SELECT 1 FROM items i WHERE i.project_id = p.project_id AND i.active=1 "
            f"AND {cond})"
            for cond in conds
        )
        sql = (
            self._dialect.cross_project
            + f"SELECT p.project_id FROM projects p WHERE {arms} ORDER BY p.project_id"
        )
        return [r[0] for r in self._all(sql, () if missing_only else (model, model))]

    def count_pending_embeddings(
        self, model: str, limit: int, project_id: str, *, missing_only: bool = False
    ) -> int:
        # Counts ids only: searches report this, and must not read the texts to do it.
        sql, args = self._pending_sql("item_id", model, project_id, missing_only)
        row = self._one(f"SELECT count(*) FROM ({sql} LIMIT ?) pending", (*args, int(limit)))
        return int(row[0]) if row else 0

    def pending_among(self, project_id: str, model: str, ids: Sequence[str]) -> set[str]:
        sql = (
            "SELECT item_id FROM items WHERE project_id=? AND active=1 "
            "AND (embedded_model IS NULL OR embedded_model<>?) AND "
        )
        found: set[str] = set()
        wanted = list(dict.fromkeys(ids))
        for start in range(0, len(wanted), 500):
            cond, args = self._dialect.any_of("item_id", wanted[start : start + 500])
            found.update(r[0] for r in self._all(sql + cond, (project_id, model, *args)))
        return found

    def other_vector_model(self, project_id: str, model: str) -> str | None:
        row = self._one(
            "SELECT embedded_model FROM items WHERE embedded_model IS NOT NULL "
            "AND embedded_model<>? AND project_id=? AND active=1 LIMIT 1",
            (model, project_id),
        )
        return None if row is None else str(row[0])

    def index_generation(self, project_id: str) -> int:
        return rows.generation_key(
            self._one(
                "SELECT generation, created_at FROM projects WHERE project_id=?", (project_id,)
            )
        )

    # -- state ---------------------------------------------------------------------------
    def _scoped(
        self, select: str, key_args: tuple[str, str, str, str | None], order: str
    ) -> list[Any]:
        """Rows of `select` (state or its history) in one scope, of one key or all."""
        sql = select + " WHERE project_id=? AND scope=? AND scope_id=?"
        args: list[Any] = list(key_args[:3])
        if key_args[3] is not None:
            sql += " AND key=?"
            args.append(key_args[3])
        return self._all(sql + order, args)

    def get_state(
        self, project_id: str, scope: str, scope_id: str, key: str | None = None
    ) -> list[StateFact]:
        found = self._scoped(
            "SELECT project_id, scope, scope_id, key, value, version, cause, updated_at, ttl "
            "FROM state",
            (project_id, scope, scope_id, key),
            " ORDER BY key",
        )
        return [rows.state_fact_row(r, self._dialect.load) for r in found]

    def get_states(
        self, project_id: str, scopes: Sequence[tuple[str, str]]
    ) -> dict[tuple[str, str], list[StateFact]]:
        pairs = list(dict.fromkeys(scopes))
        out: dict[tuple[str, str], list[StateFact]] = {pair: [] for pair in pairs}
        # One statement for every scope an assembly shows (it was one per scope); each arm
        # is a prefix of the primary key. Chunked only to stay under bound-parameter limits.
        for i in range(0, len(pairs), _STATE_PAIRS):
            part = pairs[i : i + _STATE_PAIRS]
            arms = " OR ".join(["(scope=? AND scope_id=?)"] * len(part))
            found = self._all(
                "SELECT project_id, scope, scope_id, key, value, version, cause, updated_at, ttl "
                f"FROM state WHERE project_id=? AND ({arms}) ORDER BY scope, scope_id, key",
                [project_id, *(v for pair in part for v in pair)],
            )
            for r in found:
                fact = rows.state_fact_row(r, self._dialect.load)
                out.setdefault((fact.scope, fact.scope_id), []).append(fact)
        return out

    def get_state_keys(
        self, project_id: str, scope: str, scope_id: str, keys: Sequence[str]
    ) -> dict[str, StateFact]:
        out: dict[str, StateFact] = {}
        wanted = list(dict.fromkeys(keys))
        for i in range(0, len(wanted), _STATE_PAIRS):
            cond, cond_args = self._dialect.any_of("key", wanted[i : i + _STATE_PAIRS])
            found = self._all(
                "SELECT project_id, scope, scope_id, key, value, version, cause, updated_at, ttl "
                f"FROM state WHERE project_id=? AND scope=? AND scope_id=? AND {cond}",
                [project_id, scope, scope_id, *cond_args],
            )
            for r in found:
                fact = rows.state_fact_row(r, self._dialect.load)
                out[fact.key] = fact
        return out

    def state_history(
        self, project_id: str, scope: str, scope_id: str, key: str | None = None
    ) -> list[StateChange]:
        found = self._scoped(
            "SELECT key, scope, scope_id, version, old_value, new_value, cause, ts, deleted, "
            "ttl FROM state_history",
            (project_id, scope, scope_id, key),
            " ORDER BY key, version",
        )
        return [rows.state_change_row(r, self._dialect.load) for r in found]

    # -- traces --------------------------------------------------------------------------
    def get_trace(self, project_id: str, context_id: str) -> dict[str, Any] | None:
        row = self._one(
            "SELECT trace FROM traces WHERE project_id=? AND context_id=?", (project_id, context_id)
        )
        return dict(self._dialect.load(row[0])) if row else None

    # -- bulk copy -----------------------------------------------------------------------
    def count_rows(self, project_id: str, table: str) -> int:
        table_columns(table)
        row = self._one(f"SELECT count(*) FROM {table} WHERE project_id=?", (project_id,))
        return int(row[0]) if row else 0

    # -- API keys --------------------------------------------------------------------------
    _KEY_SELECT = (
        "SELECT key_id, key_hash, name, role, projects, created_at, revoked_at FROM api_keys "
    )

    def get_api_key(self, key_id: str) -> ApiKeyRecord | None:
        row = self._one(self._KEY_SELECT + "WHERE key_id=?", (key_id,))
        return None if row is None else rows.api_key_row(row, self._dialect.load)

    def list_api_keys(self) -> list[ApiKeyRecord]:
        found = self._all(self._KEY_SELECT + "ORDER BY created_at, key_id")
        return [rows.api_key_row(r, self._dialect.load) for r in found]


def _pending_conds(alias: str, missing_only: bool) -> tuple[str, ...]:
    """An item waiting for a vector of the model `?`: no vector yet, or (unless
    `missing_only`) one by a model sorting below or above it."""
    column = f"{alias}embedded_model"
    if missing_only:
        return (f"{column} IS NULL",)
    return (f"{column} IS NULL", f"{column} < ?", f"{column} > ?")
