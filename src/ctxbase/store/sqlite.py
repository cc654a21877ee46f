"""SQLite backend: one file, WAL mode, safe for several threads and processes.

Each thread gets its own connection; every write runs in a `BEGIN IMMEDIATE` transaction so
concurrent writers (threads or processes) queue on SQLite's lock instead of failing midway.
Keywords use an FTS5 table fed with pre-segmented terms (Chinese is segmented before it gets
here, because FTS5's tokenizers treat a run of Chinese characters as one token).

Layout: `SQLiteStore` (here: projects, sessions, tasks, events, entities, relations) combines
the mixins of sqlite_search (keyword search, items, vectors) and sqlite_admin (state, traces,
forget, bulk copy, API keys), both built on sqlite_base (connections, transactions, schema,
the dialect, shared helpers). The reads both backends run alike come from shared.py, the row
converters from rows.py.
"""

from __future__ import annotations

import os
import sqlite3
import time
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

from ..model import (
    Entity,
    Event,
    Relation,
    SessionInfo,
    TaskInfo,
    relation_id_for,
    stored_relation_id,
)
from .base import Store, TombstoneKind
from .records import EventRetext, ForgetReport, SearchItem
from .rows import (
    ALIAS_INSERT,
    EVENT_EDGE_SOURCE,
    check_direction,
    check_event_ids,
    check_per_node,
    deliberate_sql,
    entity_row,
    event_links,
    event_row,
    merged_ids,
    relation_row,
    types_at_node_sql,
    without_forgotten_links,
)
from .schema import UPGRADE_PREFIX
from .sqlite_admin import SQLiteAdmin, secure_delete
from .sqlite_base import (
    EVENT_COLS,
    ITEM_SEQ,
    chunks,
    dumps,
    indexed_terms,
    loads,
    placeholders,
    reserve_rowids,
    tombstone_hash,
)
from .sqlite_search import SQLiteSearch

__all__ = ["SQLiteStore", "indexed_terms", "tombstone_hash"]

# A soft-deleted event or entity is hidden from every read, so are the edges touching it.
_NO_SOFT_DELETED_END = (
    " AND NOT EXISTS (SELECT 1 FROM events e WHERE e.project_id = relations.project_id"
    " AND e.event_id IN (relations.from_id, relations.to_id) AND e.active = 0)"
    " AND NOT EXISTS (SELECT 1 FROM entities n WHERE n.project_id = relations.project_id"
    " AND n.entity_id IN (relations.from_id, relations.to_id) AND n.active = 0)"
)


class SQLiteStore(SQLiteSearch, SQLiteAdmin, Store):
    """Store in one SQLite file (or ":memory:" for a private, single-connection store)."""

    def same_database(self, other: Store) -> bool:
        if other is self:
            return True
        if not isinstance(other, SQLiteStore) or ":memory:" in (self.path, other.path):
            return False
        try:  # both files exist once opened; samefile sees through symlinks and hard links
            return os.path.samefile(self.copy_of or self.url, other.copy_of or other.url)
        except OSError:
            return False

    # -- projects, sessions, tasks ---------------------------------------------------------
    def ensure_project(self, project_id: str) -> None:
        with self._write() as conn:
            self._ensure_project(conn, project_id)

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
                    dumps(session.metadata),
                ),
            )

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
                    dumps(task.metadata),
                ),
            )

    # -- events ------------------------------------------------------------------------
    def write_events(
        self,
        events: Sequence[Event],
        items: Sequence[Sequence[SearchItem]],
        *,
        backlog: Callable[[Event], bool] | None = None,
        anchored: Sequence[tuple[str, str]] = (),
    ) -> list[Event]:
        if len(events) != len(items):
            raise ValueError("write_events needs one list of search items per event")
        if not events:
            return []
        check_event_ids(events)
        projects = list(dict.fromkeys(e.project_id for e in events))
        with self._write() as conn:
            for project_id in projects:
                self._ensure_project(conn, project_id)
            fresh = self._fresh_events(conn, events)
            pairs = [(events[n], items[n]) for n in fresh]
            tombstoned = partial(_tombstoned, conn)
            inserted = self._insert_events(conn, without_forgotten_links(pairs, tombstoned))
            if backlog is not None:
                self._backlog(conn, [(e.project_id, e.id) for e in inserted if backlog(e)])
            if anchored:
                self._unbacklog(conn, anchored)
            for project_id in projects:
                self._keep_keyword_log(conn, project_id)
                self._bump(conn, project_id)
        return inserted

    def _fresh_events(self, conn: sqlite3.Connection, events: Sequence[Event]) -> list[int]:
        """Positions of the events not stored yet, not forgotten and not repeated."""
        by_project: dict[str, dict[str, None]] = {}
        for e in events:
            by_project.setdefault(e.project_id, {})[e.id] = None
        seen: set[tuple[str, str]] = set()
        for pid, id_set in by_project.items():
            ids = list(id_set)
            for part in chunks(ids):
                rows = conn.execute(
                    f"SELECT event_id FROM events WHERE project_id=? "
                    f"AND event_id IN ({placeholders(len(part))})",
                    (pid, *part),
                ).fetchall()
                seen.update((pid, r[0]) for r in rows)
            seen.update((pid, i) for i in _tombstoned(conn, pid, ids))
        fresh: list[int] = []
        for n, e in enumerate(events):
            key = (e.project_id, e.id)
            if key not in seen:
                seen.add(key)
                fresh.append(n)
        return fresh

    def _session_tails(
        self, conn: sqlite3.Connection, keys: Sequence[tuple[str, str]]
    ) -> dict[tuple[str, str], list[Any]]:
        """(project, session) -> [last_seq, last_event_id] of the sessions that have a row."""
        by_project: dict[str, list[str]] = {}
        for pid, sid in keys:
            by_project.setdefault(pid, []).append(sid)
        tails: dict[tuple[str, str], list[Any]] = {}
        for pid, sids in by_project.items():
            for part in chunks(sids):
                for sid, last_seq, last_id in conn.execute(
                    f"SELECT session_id, last_seq, last_event_id FROM sessions "
                    f"WHERE project_id=? AND session_id IN ({placeholders(len(part))})",
                    (pid, *part),
                ).fetchall():
                    tails[(pid, sid)] = [int(last_seq), last_id]
        return tails

    def _insert_events(
        self, conn: sqlite3.Connection, pairs: Sequence[tuple[Event, Sequence[SearchItem]]]
    ) -> list[Event]:
        """Insert fresh events in order: seq and NEXT from their session's tail, the session
        rows, the event-graph edges and the search units, each kind in one statement."""
        if not pairs:
            return []
        keys = list(dict.fromkeys((e.project_id, e.session_id) for e, _ in pairs))
        tails = self._session_tails(conn, keys)
        created: dict[tuple[str, str], Event] = {}  # sessions whose first event this is
        touched: dict[tuple[str, str], float] = {}  # updated_at of the other sessions
        stored_events: list[Event] = []
        event_rows: list[tuple[Any, ...]] = []
        edges: list[tuple[str, str, str, str, str, float]] = []
        unit_rows: list[tuple[str, SearchItem]] = []
        aliases: list[tuple[str, str, str]] = []  # only aggregated events have any
        for event, event_items in pairs:
            pid = event.project_id
            key = (pid, event.session_id)
            tail = tails.get(key)
            if tail is None:
                tail = tails[key] = [0, None]
                created[key] = event
            else:
                touched[key] = max(event.ts, time.time())
            seq, prev_id = tail[0] + 1, tail[1]
            tail[0], tail[1] = seq, event.id
            stored_events.append(event.model_copy(update={"seq": seq}))
            event_rows.append(
                (
                    event.id,
                    event.session_id,
                    event.task_id,
                    seq,
                    event.agent_id,
                    event.agent_role,
                    event.type,
                    event.text,
                    dumps(event.data),
                    event.ts,
                    event.importance,
                    dumps(event.metadata),
                    1 if event.active else 0,
                    pid,
                )
            )
            edges += [
                (pid, relation_id_for(pid, f, t, to), f, t, to, event.ts)
                for f, t, to in event_links(event, prev_id)
            ]
            merged = merged_ids(event.id, event.data, event.metadata)
            aliases += [(pid, alias, event.id) for alias in merged]
            unit_rows += [(pid, it) for it in event_items]
        # A session's updated_at moves with every event after its first.
        new_sessions = [
            (
                pid,
                sid,
                "active",
                first.ts,
                touched.get((pid, sid), first.ts),
                "{}",
                *tails[pid, sid],
            )
            for (pid, sid), first in created.items()
        ]
        if new_sessions:
            conn.executemany(
                "INSERT INTO sessions(project_id, session_id, status, created_at, updated_at, "
                "metadata, last_seq, last_event_id) VALUES (?,?,?,?,?,?,?,?)",
                new_sessions,
            )
        moved = [(*tails[key], at, *key) for key, at in touched.items() if key not in created]
        if moved:
            conn.executemany(
                "UPDATE sessions SET last_seq=?, last_event_id=?, updated_at=? "
                "WHERE project_id=? AND session_id=?",
                moved,
            )
        conn.executemany(
            f"INSERT INTO events({EVENT_COLS}) VALUES ({placeholders(14)})", event_rows
        )
        if aliases:
            conn.executemany(ALIAS_INSERT, aliases)
        self._insert_event_edges(conn, edges)
        self._insert_project_items(conn, unit_rows)
        return stored_events

    def _insert_event_edges(
        self, conn: sqlite3.Connection, edges: Sequence[tuple[str, str, str, str, str, float]]
    ) -> None:
        """Upsert event-graph edges (project, relation id, from, type, to, event ts) in order,
        as _upsert_relation would one by one: an edge stored already keeps its created_at,
        and its valid_from unless it was closed."""
        if not edges:
            return
        by_project: dict[str, list[str]] = {}
        for edge in edges:
            by_project.setdefault(edge[0], []).append(edge[1])
        known: dict[tuple[str, str], tuple[float, float, float | None]] = {}
        for pid, rids in by_project.items():
            for part in chunks(list(dict.fromkeys(rids))):
                for rid, created_at, valid_from, valid_to in conn.execute(
                    f"SELECT relation_id, created_at, valid_from, valid_to FROM relations "
                    f"WHERE project_id=? AND relation_id IN ({placeholders(len(part))})",
                    (pid, *part),
                ).fetchall():
                    known[(pid, rid)] = (created_at, valid_from, valid_to)
        rows: list[tuple[Any, ...]] = []
        for pid, rid, from_id, rtype, to_id, ts in edges:
            old = known.get((pid, rid))
            created_at = old[0] if old else ts
            valid_from = old[1] if old and old[2] is None else ts
            known[(pid, rid)] = (created_at, valid_from, None)
            rows.append(
                (
                    pid,
                    rid,
                    from_id,
                    rtype,
                    to_id,
                    1.0,
                    EVENT_EDGE_SOURCE,
                    created_at,
                    valid_from,
                    None,
                    "{}",
                )
            )
        conn.executemany(
            "INSERT OR REPLACE INTO relations(project_id, relation_id, from_id, type, to_id, "
            "confidence, source, created_at, valid_from, valid_to, properties) "
            "VALUES (?,?,?,?,?,?,?,?,?,?,?)",
            rows,
        )

    def existing_ids(self, project_id: str, ids: Sequence[str]) -> set[str]:
        found: set[str] = set()
        uniq = list(dict.fromkeys(ids))
        with self._read() as conn:
            for part in chunks(uniq):
                ph = placeholders(len(part))
                for table, col in (("events", "event_id"), ("entities", "entity_id")):
                    rows = conn.execute(
                        f"SELECT {col} FROM {table} WHERE project_id=? AND {col} IN ({ph})",
                        (project_id, *part),
                    ).fetchall()
                    found.update(r[0] for r in rows)
        return found

    def forgotten_ids(
        self, project_id: str, ids: Sequence[str], kinds: Sequence[TombstoneKind] = ("event",)
    ) -> set[str]:
        with self._read() as conn:
            return _tombstoned(conn, project_id, ids, kinds)

    def get_events(
        self, project_id: str, ids: Sequence[str], include_inactive: bool = False
    ) -> list[Event]:
        out: dict[str, Event] = {}
        with self._read() as conn:
            for part in chunks([i for i in dict.fromkeys(ids) if i]):  # no event has id ""
                sql = (
                    f"SELECT {EVENT_COLS} FROM events WHERE project_id=? "
                    f"AND event_id IN ({placeholders(len(part))})"
                )
                if not include_inactive:
                    sql += " AND active=1"
                for ev in self._events(conn, conn.execute(sql, (project_id, *part)).fetchall()):
                    out[ev.id] = ev
        return [out[i] for i in ids if i in out]

    def last_events_of_sessions(
        self, project_id: str, session_ids: Sequence[str]
    ) -> dict[str, Event]:
        out: dict[str, Event] = {}
        with self._read() as conn:
            for part in chunks(list(dict.fromkeys(session_ids))):
                # per session, the index on (project_id, session_id, seq) walked backwards
                rows = conn.execute(
                    f"WITH wanted(session_id) AS (VALUES {','.join(['(?)'] * len(part))}) "
                    f"SELECT {EVENT_COLS} FROM events WHERE project_id=? AND event_id IN ("
                    "SELECT (SELECT e.event_id FROM events e WHERE e.project_id=? "
                    "AND e.session_id=wanted.session_id AND e.active=1 "
                    "ORDER BY e.seq DESC LIMIT 1) FROM wanted)",
                    (*part, project_id, project_id),
                ).fetchall()
                out.update((ev.session_id, ev) for ev in self._events(conn, rows))
        return out

    def _events(self, conn: sqlite3.Connection, rows: Sequence[Sequence[Any]]) -> list[Event]:
        """EVENT_COLS rows as events, with their CAUSED_BY / REFERS_TO links in order."""
        if len(rows) == 1:
            return [self._event(conn, rows[0])]
        by_project: dict[str, list[str]] = {}
        for row in rows:
            by_project.setdefault(row[13], []).append(row[0])
        links: dict[tuple[str, str], list[tuple[str, str]]] = {}
        for pid, ids in by_project.items():
            for part in chunks(list(dict.fromkeys(ids))):
                for from_id, rtype, to_id in conn.execute(
                    "SELECT from_id, type, to_id FROM relations WHERE project_id=? "
                    f"AND from_id IN ({placeholders(len(part))}) "
                    "AND type IN ('CAUSED_BY','REFERS_TO') ORDER BY created_at, to_id",
                    (pid, *part),
                ).fetchall():
                    links.setdefault((pid, from_id), []).append((rtype, to_id))
        return [event_row(row, links.get((row[13], row[0]), []), loads) for row in rows]

    def _event(self, conn: sqlite3.Connection, row: Sequence[Any]) -> Event:
        rels = conn.execute(
            "SELECT type, to_id FROM relations WHERE project_id=? AND from_id=? "
            "AND type IN ('CAUSED_BY','REFERS_TO') ORDER BY created_at, to_id",
            (row[13], row[0]),
        ).fetchall()
        return event_row(row, rels, loads)

    def _read_events(self, sql: str, args: Sequence[Any]) -> list[Event]:
        with self._read() as conn:
            return self._events(conn, conn.execute(sql, args).fetchall())

    def set_active(
        self,
        project_id: str,
        ids: Sequence[str],
        active: bool,
        *,
        removed: bool = False,
        compacted: bool = False,
    ) -> int:
        flag = 1 if active else 0
        changed = 0
        named = list(dict.fromkeys(ids))
        with self._write() as conn:
            # what was anchored from a hidden message is hidden (and restored) with it
            made = [] if compacted else self._made_from(conn, project_id, named, active)
            ids = [*named, *made]
            if not active:
                self._reset_soft_delete(conn, project_id, ids)
            for part in chunks(list(dict.fromkeys(ids))):
                ph = placeholders(len(part))
                for table, col in (("events", "event_id"), ("entities", "entity_id")):
                    cur = conn.execute(
                        f"UPDATE {table} SET active=? WHERE project_id=? AND {col} IN ({ph}) "
                        "AND active<>?",
                        (flag, project_id, *part, flag),
                    )
                    changed += cur.rowcount
                if active:
                    self._restore_items_of(conn, project_id, part)
                else:
                    conn.execute(
                        f"UPDATE items SET active=0 WHERE project_id=? AND owner_id IN ({ph}) "
                        "AND active=1",
                        (project_id, *part),
                    )
            self._set_context_state(conn, project_id, list(dict.fromkeys(ids)), 1 - flag)
            self._record_soft_delete(
                conn, project_id, ids, active, named, removed=removed, compacted=compacted
            )
            self._keep_keyword_log(conn, project_id)
            self._bump(conn, project_id)
        return changed

    def set_context_hidden(self, project_id: str, ids: Sequence[str], hidden: bool) -> None:
        with self._write() as conn:
            self._set_context_state(conn, project_id, list(dict.fromkeys(ids)), int(hidden))
            self._keep_keyword_log(conn, project_id)
            self._bump(conn, project_id)

    # -- upgrade steps (base.TOOL_CALL_TEXTS) ---------------------------------------------
    def _backlog(self, conn: sqlite3.Connection, keys: Sequence[tuple[str, str]]) -> None:
        conn.executemany(
            "INSERT OR IGNORE INTO anchor_backlog(project_id, event_id) VALUES (?,?)", keys
        )

    def add_anchor_backlog(self, project_id: str, event_ids: Sequence[str]) -> None:
        if event_ids:
            with self._write() as conn:
                self._backlog(conn, [(project_id, i) for i in event_ids])

    def _unbacklog(self, conn: sqlite3.Connection, keys: Sequence[tuple[str, str]]) -> None:
        # zeroed, not left in free space: a forget later must find no copy of an event id
        with secure_delete(conn):
            conn.executemany("DELETE FROM anchor_backlog WHERE project_id=? AND event_id=?", keys)

    def drop_anchor_backlog(self, project_id: str, event_ids: Sequence[str]) -> None:
        if event_ids:
            with self._write() as conn:
                self._unbacklog(conn, [(project_id, i) for i in event_ids])

    def finish_upgrade(self, name: str) -> None:
        with self._write() as conn:
            conn.execute("DELETE FROM meta WHERE key=?", (UPGRADE_PREFIX + name,))

    def mark_upgrade(self, name: str) -> None:
        with self._write() as conn:
            conn.execute(
                "INSERT INTO meta(key, value) VALUES (?, '1') ON CONFLICT(key) DO NOTHING",
                (UPGRADE_PREFIX + name,),
            )

    def retext_events(self, project_id: str, changes: Sequence[EventRetext]) -> int:
        done = 0
        with self._write() as conn:
            for change in changes:
                held = "(text IS NULL OR text='')" if change.old_text is None else "text=?"
                cur = conn.execute(
                    "UPDATE events SET text=?, metadata=? WHERE project_id=? AND event_id=? "
                    f"AND active=1 AND {held}",
                    (change.text, dumps(change.metadata), project_id, change.event_id)
                    + (() if change.old_text is None else (change.old_text,)),
                )
                if cur.rowcount != 1:
                    continue
                done += 1
                self._retext_items(conn, project_id, change)
            if done:
                self._keep_keyword_log(conn, project_id)
                self._bump(conn, project_id)
        return done

    def _retext_items(self, conn: sqlite3.Connection, project_id: str, ch: EventRetext) -> None:
        """An event's units and the context of those that follow it, as `ch` says. A whole
        unit stays in place (its context words and whether they are hidden are its own),
        under a new rowid so keyword readers see it leave and come back; its vector goes."""
        eid = ch.event_id
        whole = conn.execute(
            "SELECT rowid, context_terms, context_hidden FROM items "
            "WHERE project_id=? AND item_id=? AND owner_id=?",
            (project_id, eid, eid),
        ).fetchone()
        if whole and len(ch.items) == 1 and ch.items[0].item_id == eid:
            it, (rowid, context, hidden) = ch.items[0], whole
            new = reserve_rowids(conn, ITEM_SEQ, "items", 1)
            conn.execute(
                "UPDATE items SET text=?, terms=?, embedded_model=NULL, rowid=? WHERE rowid=?",
                (it.text, it.terms, new, rowid),
            )
            conn.execute(
                "DELETE FROM item_vectors WHERE project_id=? AND item_id=?", (project_id, eid)
            )
            conn.execute("DELETE FROM item_fts WHERE rowid=?", (rowid,))
            conn.execute(
                "INSERT INTO item_fts(rowid, terms, own) VALUES (?, ?, ?)",
                (new, indexed_terms(it.terms, context, hidden), it.terms),
            )
        else:
            self._delete_items_of(conn, project_id, [eid], ForgetReport())
            self._insert_items(conn, project_id, ch.items)
        following = conn.execute(
            "SELECT rowid, terms, context_hidden FROM items WHERE project_id=? AND context_id=?",
            (project_id, eid),
        ).fetchall()
        first = reserve_rowids(conn, ITEM_SEQ, "items", len(following)) if following else 0
        for n, (rowid, terms, hidden) in enumerate(following):
            conn.execute(
                "UPDATE items SET context_terms=?, rowid=? WHERE rowid=?",
                (ch.context_terms, first + n, rowid),
            )
            conn.execute("DELETE FROM item_fts WHERE rowid=?", (rowid,))
            conn.execute(
                "INSERT INTO item_fts(rowid, terms, own) VALUES (?, ?, ?)",
                (first + n, indexed_terms(terms, ch.context_terms, hidden), terms),
            )

    # -- entities and relations ----------------------------------------------------------
    def upsert_entity(self, entity: Entity, items: Sequence[SearchItem]) -> Entity:
        with self._write() as conn:
            self._ensure_project(conn, entity.project_id)
            # Re-creating a forgotten entity is deliberate (unlike a stale event retry).
            conn.execute(
                "DELETE FROM tombstones WHERE project_id=? AND hashed_id=?",
                (entity.project_id, tombstone_hash(entity.id, "entity")),
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
                    dumps(stored.properties),
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
            self._keep_keyword_log(conn, stored.project_id)
            self._bump(conn, stored.project_id)
        return stored

    def get_entities(
        self, project_id: str, ids: Sequence[str], include_inactive: bool = False
    ) -> list[Entity]:
        out: dict[str, Entity] = {}
        with self._read() as conn:
            for part in chunks(list(dict.fromkeys(ids))):
                sql = (
                    self._ENTITY_SELECT
                    + f"WHERE project_id=? AND entity_id IN ({placeholders(len(part))})"
                )
                if not include_inactive:
                    sql += " AND active=1"
                for row in conn.execute(sql, (project_id, *part)).fetchall():
                    ent = entity_row(row, loads)
                    out[ent.id] = ent
        return [out[i] for i in ids if i in out]

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
        rid = stored_relation_id(rel)
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
                dumps(stored.properties),
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
        limit_per_node: int | None = None,
        exclude_types: Sequence[str] = (),
        include_hidden: bool = False,
        deliberate_only: bool = False,
    ) -> list[Relation]:
        check_direction(direction)
        check_per_node(limit_per_node, node_ids, types)
        excluded = list(dict.fromkeys(exclude_types))
        base = (
            "SELECT project_id, relation_id, from_id, type, to_id, confidence, source, "
            "created_at, valid_from, valid_to, properties FROM relations WHERE project_id=?"
        )
        extra = ""
        extra_args: list[Any] = []
        if not include_closed:
            extra += " AND valid_to IS NULL"
        if min_confidence > 0:
            extra += " AND confidence>=?"
            extra_args.append(min_confidence)
        if excluded:
            extra += f" AND type NOT IN ({placeholders(len(excluded))})"
            extra_args += excluded
        if not include_hidden:
            extra += _NO_SOFT_DELETED_END
        if deliberate_only:
            sql_d, args_d = deliberate_sql("?")
            extra += sql_d
            extra_args += args_d
        typed = ""
        if types:
            typed = f" AND type IN ({placeholders(len(types))})"
        found: dict[str, Relation] = {}
        with self._read() as conn:
            if node_ids is None:
                rows = conn.execute(
                    base + typed + extra + " ORDER BY created_at, relation_id",
                    (project_id, *(types or ()), *extra_args),
                ).fetchall()
                return [relation_row(r, loads) for r in rows]
            cols = {"out": ["from_id"], "in": ["to_id"], "both": ["from_id", "to_id"]}[direction]
            # With limit_per_node, each statement stops past the limit: when none reaches
            # it, no node does and the rows read are the answer (the usual case).
            cap = f" LIMIT {int(limit_per_node) + 1}" if limit_per_node is not None else ""
            overflow = False
            for part in chunks(list(dict.fromkeys(node_ids))):
                for col in cols:
                    sql = base + f" AND {col} IN ({placeholders(len(part))})" + typed + extra + cap
                    args = (project_id, *part, *(types or ()), *extra_args)
                    rows = conn.execute(sql, args).fetchall()
                    overflow = overflow or bool(cap and len(rows) > int(limit_per_node or 0))
                    for row in rows:
                        rel = relation_row(row, loads)
                        found[rel.id] = rel
            if overflow and limit_per_node is not None:
                found = self._first_relations(
                    conn, (base, extra, extra_args), project_id, node_ids, cols, types,
                    limit_per_node,
                )  # fmt: skip
        return sorted(found.values(), key=lambda r: (r.created_at, r.id))

    @staticmethod
    def _first_relations(
        conn: sqlite3.Connection,
        query: tuple[str, str, list[Any]],
        project_id: str,
        node_ids: Sequence[str],
        cols: list[str],
        types: Sequence[str] | None,
        limit: int,
    ) -> dict[str, Relation]:
        """The first `limit` relations of each node, side and type: one index range each
        (relations_*_at); the types a node has are found by a loose index scan."""
        base, extra, extra_args = query
        found: dict[str, Relation] = {}
        for col in cols:
            sql = base + f" AND {col}=? AND type=?" + extra
            sql += " ORDER BY created_at, relation_id LIMIT ?"
            for node in dict.fromkeys(node_ids):
                here = types or [
                    r[0] for r in conn.execute(types_at_node_sql(col, "?"), (project_id, node) * 2)
                ]
                for rtype in dict.fromkeys(here):
                    args = (project_id, node, rtype, *extra_args, limit)
                    for row in conn.execute(sql, args).fetchall():
                        rel = relation_row(row, loads)
                        found[rel.id] = rel
        return found


def _tombstoned(
    conn: sqlite3.Connection,
    project_id: str,
    ids: Sequence[str],
    kinds: Sequence[TombstoneKind] = ("event",),
) -> set[str]:
    """The ids among `ids` the project has forgotten as one of `kinds` (their tombstones)."""
    hashes = {tombstone_hash(i, kind): i for i in dict.fromkeys(ids) for kind in kinds}
    found: set[str] = set()
    for part in chunks(list(hashes)):
        rows = conn.execute(
            f"SELECT hashed_id FROM tombstones WHERE project_id=? "
            f"AND hashed_id IN ({placeholders(len(part))})",
            (project_id, *part),
        ).fetchall()
        found.update(hashes[r[0]] for r in rows)
    return found
