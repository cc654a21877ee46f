"""PostgreSQL backend: psycopg 3 with a connection pool, pgvector and full-text search.

Behaviour follows the SQLite backend (the reference); the differences are listed in
docs/citus.md. Design:

* Every write runs in one transaction that first locks the project's row (in sorted order
  when a call spans projects), so writers of one project queue like SQLite writers do, the
  per-session `seq` and NEXT edges stay gap-free, and no two writers can deadlock. Readers
  never wait (MVCC).
* Keywords: items.tsv is a stored generated tsvector of the very terms SQLite's FTS5 indexes
  (verbatim lexemes, see pg_sql.TERMS_TSVECTOR) with a GIN index, and items.tsv_own the
  item's own terms alone; ranking is FTS5's two-column weighted BM25 computed in SQL,
  document statistics taken per project.
* Vectors: item_vectors.vec is an unconstrained `vector` with its dimension in `dim`; each
  dimension gets a partial HNSW expression index (cosine) when first stored, and searches use
  it with pgvector's iterative scans so project, model and id filters still return k rows.
* Every statement on a project table filters by project_id (Citus can distribute all tables
  by project with co-location); the two deliberate cross-project reads carry the comment
  `/* cross-project */`.
"""

from __future__ import annotations

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
    stored_relation_id,
)
from . import pg_sql as q
from .base import Store, TombstoneKind
from .pg_admin import PgAdmin
from .pg_base import Conn, jsonb, text
from .pg_search import PgSearch
from .records import EventRetext, ForgetReport, SearchItem
from .rows import (
    ALIAS_INSERT,
    check_direction,
    check_event_ids,
    check_per_node,
    deliberate_sql,
    entity_row,
    event_edges,
    event_row,
    merged_ids,
    relation_row,
    tombstone_hash,
    types_at_node_sql,
    without_forgotten_links,
)
from .schema import UPGRADE_PREFIX

__all__ = ["PostgresStore"]


class PostgresStore(PgSearch, PgAdmin, Store):
    """Store in a PostgreSQL database with the pgvector extension.

    `PostgresStore(url, min_size=1, max_size=8, on_statement=None)`: pool bounds, and a
    callable that sees every SQL text sent (audits, tests).
    """

    def same_database(self, other: Store) -> bool:
        if other is self:
            return True
        # Not by URL (another host name, user or option may reach the same database): the
        # server's start time, port and the database's name and oid, as the server says.
        return isinstance(other, PostgresStore) and self._identity() == other._identity()

    def _identity(self) -> tuple[Any, ...]:
        with self._read() as conn:
            row = self._x(
                conn,
                f"{q.CROSS_PROJECT}SELECT pg_postmaster_start_time(), inet_server_port(), "
                "current_database(), d.oid FROM pg_database d WHERE d.datname = current_database()",
            ).fetchone()
        return tuple(row) if row else ()

    def ensure_project(self, project_id: str) -> None:
        with self._tx() as conn:
            self._ensure(conn, project_id)

    def upsert_session(self, session: SessionInfo) -> None:
        with self._tx() as conn:
            self._lock(conn, [session.project_id], ensure=True, bump=False)
            self._x(
                conn,
                "INSERT INTO sessions(project_id, session_id, status, title, created_at, "
                "updated_at, metadata) VALUES (%s,%s,%s,%s,%s,%s,%s) "
                "ON CONFLICT (project_id, session_id) DO UPDATE SET status=EXCLUDED.status, "
                "title=EXCLUDED.title, updated_at=EXCLUDED.updated_at, "
                "metadata=EXCLUDED.metadata",
                (
                    session.project_id,
                    session.session_id,
                    session.status,
                    text(session.title),
                    session.created_at,
                    session.updated_at,
                    jsonb(session.metadata),
                ),
            )

    def upsert_task(self, task: TaskInfo) -> None:
        with self._tx() as conn:
            self._lock(conn, [task.project_id], ensure=True, bump=False)
            self._x(
                conn,
                "INSERT INTO tasks(project_id, task_id, session_id, parent_task_id, title,"
                " status, created_at, updated_at, metadata) VALUES (%s,%s,%s,%s,%s,%s,%s,%s,%s)"
                " ON CONFLICT (project_id, task_id) DO UPDATE SET session_id=EXCLUDED.session_id,"
                " parent_task_id=EXCLUDED.parent_task_id, title=EXCLUDED.title,"
                " status=EXCLUDED.status, updated_at=EXCLUDED.updated_at,"
                " metadata=EXCLUDED.metadata",
                (
                    task.project_id,
                    task.task_id,
                    task.session_id,
                    task.parent_task_id,
                    text(task.title),
                    task.status,
                    task.created_at,
                    task.updated_at,
                    jsonb(task.metadata),
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
        by_project: dict[str, list[int]] = {}
        for n, e in enumerate(events):
            by_project.setdefault(e.project_id, []).append(n)
        done: dict[int, Event] = {}
        with self._tx() as conn:
            self._lock(conn, list(by_project), ensure=True, bump=True)
            for pid in sorted(by_project):
                fresh = self._fresh_events(conn, pid, by_project[pid], events)
                pairs = [(events[n], items[n]) for n in fresh]
                tombstoned = partial(self._tombstoned, conn)
                pairs = without_forgotten_links(pairs, tombstoned)
                stored = self._insert_events(conn, pid, pairs)
                done.update(zip(fresh, stored, strict=True))
                if backlog is not None:
                    self._backlog(conn, pid, [e.id for e in stored if backlog(e)])
                self._keep_keyword_log(conn, pid)
            self._unbacklog(conn, anchored)
        return [done[n] for n in sorted(done)]

    def _backlog(self, conn: Conn, project_id: str, ids: Sequence[str]) -> None:
        if ids:  # one statement: a round trip per batch, not per event
            self._x(
                conn,
                "INSERT INTO anchor_backlog(project_id, event_id) "
                "SELECT %s, unnest(%s::text[]) ON CONFLICT DO NOTHING",
                (project_id, list(ids)),
            )

    def add_anchor_backlog(self, project_id: str, event_ids: Sequence[str]) -> None:
        if event_ids:
            with self._tx() as conn:
                self._backlog(conn, project_id, event_ids)

    def _unbacklog(self, conn: Conn, keys: Sequence[tuple[str, str]]) -> None:
        by_project: dict[str, list[str]] = {}
        for pid, event_id in keys:
            by_project.setdefault(pid, []).append(event_id)
        for pid, ids in by_project.items():
            self._x(
                conn,
                "DELETE FROM anchor_backlog WHERE project_id=%s AND event_id = ANY(%s)",
                (pid, ids),
            )

    def drop_anchor_backlog(self, project_id: str, event_ids: Sequence[str]) -> None:
        if event_ids:
            with self._tx() as conn:
                self._unbacklog(conn, [(project_id, i) for i in event_ids])

    def _fresh_events(
        self, conn: Conn, project_id: str, idx: Sequence[int], events: Sequence[Event]
    ) -> list[int]:
        """Positions of the events not yet stored, not forgotten and not repeated."""
        ids = list(dict.fromkeys(events[n].id for n in idx))
        stored = {
            r[0]
            for r in self._x(
                conn,
                "SELECT event_id FROM events WHERE project_id=%s AND event_id = ANY(%s)",
                (project_id, ids),
            ).fetchall()
        }
        seen = stored | self._tombstoned(conn, project_id, ids)
        fresh: list[int] = []
        for n in idx:
            if events[n].id not in seen:
                seen.add(events[n].id)
                fresh.append(n)
        return fresh

    def _insert_events(
        self, conn: Conn, project_id: str, pairs: Sequence[tuple[Event, Sequence[SearchItem]]]
    ) -> list[Event]:
        # Session tails: (last_seq, last_event_id, created now), locked for the transaction.
        tails: dict[str, list[Any]] = {}
        for sid in sorted({e.session_id for e, _ in pairs}):
            row = self._x(
                conn,
                "SELECT last_seq, last_event_id FROM sessions WHERE project_id=%s "
                "AND session_id=%s FOR UPDATE",
                (project_id, sid),
            ).fetchone()
            tails[sid] = [int(row[0]), row[1], False] if row else [0, None, True]
        stored_events: list[Event] = []
        event_rows: list[tuple[Any, ...]] = []
        edges: list[tuple[Any, ...]] = []
        new_sessions: list[tuple[Any, ...]] = []
        all_items: list[SearchItem] = []
        touched: dict[str, float] = {}
        aliases: list[tuple[str, str, str]] = []  # only aggregated events have any
        for event, event_items in pairs:
            tail = tails[event.session_id]
            seq, prev_id = tail[0] + 1, tail[1]
            if tail[2] and seq == 1:
                new_sessions.append((project_id, event.session_id, "active", event.ts, event.ts))
            else:
                touched[event.session_id] = max(event.ts, time.time())
            tail[0], tail[1] = seq, event.id
            stored = event.model_copy(update={"seq": seq})
            stored_events.append(stored)
            event_rows.append(
                (
                    stored.id,
                    stored.session_id,
                    stored.task_id,
                    seq,
                    stored.agent_id,
                    text(stored.agent_role),
                    stored.type,
                    text(stored.text),
                    jsonb(stored.data),
                    stored.ts,
                    stored.importance,
                    jsonb(stored.metadata),
                    1 if stored.active else 0,
                    project_id,
                )
            )
            edges += [self._relation_args(rel) for rel in event_edges(stored, prev_id)]
            merged = merged_ids(stored.id, stored.data, stored.metadata)
            aliases += [(project_id, alias, stored.id) for alias in merged]
            all_items.extend(event_items)
        self._many(
            conn,
            "INSERT INTO sessions(project_id, session_id, status, created_at, updated_at, "
            "metadata) VALUES (%s,%s,%s,%s,%s,'{}'::jsonb) "
            "ON CONFLICT (project_id, session_id) DO NOTHING",
            new_sessions,
        )
        # Like SQLite: a session's updated_at moves with every event after its first.
        self._many(
            conn,
            "UPDATE sessions SET last_seq=%s, last_event_id=%s, "
            "updated_at=coalesce(%s, updated_at) WHERE project_id=%s AND session_id=%s",
            [(t[0], t[1], touched.get(sid), project_id, sid) for sid, t in tails.items()],
        )
        self._many(
            conn,
            f"INSERT INTO events({q.EVENT_COLS}) VALUES ({','.join(['%s'] * 14)})",
            event_rows,
        )
        self._many(conn, self._dialect.sql(ALIAS_INSERT), aliases)  # nothing sent when empty
        self._many(conn, self._RELATION_UPSERT, edges)
        self._insert_items(conn, project_id, all_items)
        return stored_events

    def _insert_items(self, conn: Conn, project_id: str, items: Sequence[SearchItem]) -> None:
        if not items:
            return
        # A re-indexed item loses its old vector (its text may have changed).
        self._x(
            conn,
            "DELETE FROM item_vectors WHERE project_id=%s AND item_id = ANY(%s)",
            (project_id, [it.item_id for it in items]),
        )
        cols = [c.strip() for c in q.ITEM_COLS.split(",")]
        updates = ", ".join(f"{c}=EXCLUDED.{c}" for c in cols[1:])
        self._many(
            conn,
            f"INSERT INTO items({q.ITEM_COLS}, project_id) VALUES ({','.join(['%s'] * 19)}) "
            f"ON CONFLICT (project_id, item_id) DO UPDATE SET {updates}, active=1, "
            f"embedded_model=NULL, change_seq=nextval('{q.ITEM_CHANGE_SEQ}')",
            [
                (
                    it.item_id,
                    it.owner_id,
                    it.kind,
                    it.type,
                    text(it.text),
                    text(it.terms),
                    it.ts,
                    it.session_id,
                    it.agent_id,
                    text(it.agent_role),
                    text(it.path),
                    it.line_start,
                    it.line_end,
                    1 if it.latest else 0,
                    it.importance,
                    text(it.context_terms),
                    it.context_id,
                    text(it.repo),
                    project_id,
                )
                for it in items
            ],
        )

    def existing_ids(self, project_id: str, ids: Sequence[str]) -> set[str]:
        uniq = list(dict.fromkeys(ids))
        if not uniq:
            return set()
        with self._read() as conn:
            rows = self._x(
                conn,
                "SELECT event_id FROM events WHERE project_id=%s AND event_id = ANY(%s) "
                "UNION SELECT entity_id FROM entities WHERE project_id=%s "
                "AND entity_id = ANY(%s)",
                (project_id, uniq, project_id, uniq),
            ).fetchall()
        return {r[0] for r in rows}

    def forgotten_ids(
        self, project_id: str, ids: Sequence[str], kinds: Sequence[TombstoneKind] = ("event",)
    ) -> set[str]:
        if not ids or not kinds:
            return set()
        with self._read() as conn:
            return self._tombstoned(conn, project_id, ids, kinds)

    def _tombstoned(
        self,
        conn: Conn,
        project_id: str,
        ids: Sequence[str],
        kinds: Sequence[TombstoneKind] = ("event",),
    ) -> set[str]:
        """The ids among `ids` the project has forgotten as one of `kinds` (their
        tombstones), in one statement."""
        hashes = {tombstone_hash(i, kind): i for i in dict.fromkeys(ids) for kind in kinds}
        rows = self._x(
            conn,
            "SELECT hashed_id FROM tombstones WHERE project_id=%s AND hashed_id = ANY(%s)",
            (project_id, list(hashes)),
        ).fetchall()
        return {hashes[r[0]] for r in rows}

    def _events(self, conn: Conn, rows: Sequence[Sequence[Any]]) -> list[Event]:
        if not rows:
            return []
        pid = rows[0][13]
        links: dict[str, list[tuple[str, str]]] = {}
        for from_id, rtype, to_id in self._x(
            conn,
            "SELECT from_id, type, to_id FROM relations WHERE project_id=%s "
            "AND from_id = ANY(%s) AND type IN ('CAUSED_BY','REFERS_TO') "
            "ORDER BY created_at, to_id",
            (pid, [r[0] for r in rows]),
        ).fetchall():
            links.setdefault(from_id, []).append((rtype, to_id))
        return [event_row(row, links.get(row[0], [])) for row in rows]

    def get_events(
        self, project_id: str, ids: Sequence[str], include_inactive: bool = False
    ) -> list[Event]:
        uniq = [i for i in dict.fromkeys(ids) if i]  # no event has id ""
        if not uniq:
            return []
        sql = f"SELECT {q.EVENT_COLS} FROM events WHERE project_id=%s AND event_id = ANY(%s)"
        if not include_inactive:
            sql += " AND active=1"
        with self._read() as conn:
            rows = self._x(conn, sql, (project_id, uniq)).fetchall()
            found = {e.id: e for e in self._events(conn, rows)}
        return [found[i] for i in ids if i in found]

    def _read_events(self, sql: str, args: Sequence[Any]) -> list[Event]:
        with self._read() as conn:
            return self._events(conn, self._x(conn, sql, args).fetchall())

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
        named = list(dict.fromkeys(ids))
        changed = 0
        with self._tx() as conn:
            self._lock(conn, [project_id], ensure=False, bump=True)
            # what was anchored from a hidden message is hidden (and restored) with it
            made = [] if compacted else self._made_from(conn, project_id, named, active)
            uniq = named + made
            if not active:
                self._reset_soft_delete(conn, project_id, uniq)
            for table, col in (("events", "event_id"), ("entities", "entity_id")):
                cur = self._x(
                    conn,
                    f"UPDATE {table} SET active=%s WHERE project_id=%s AND {col} = ANY(%s) "
                    "AND active<>%s",
                    (flag, project_id, uniq, flag),
                )
                changed += cur.rowcount
            # A restored item is numbered again: keyword readers append it as a new row (its
            # old number left their index when it was hidden).
            renumber = f", {q.NEXT_CHANGE_SEQ}" if active else ""
            self._x(
                conn,
                f"UPDATE items SET active=%s{renumber} WHERE project_id=%s "
                "AND owner_id = ANY(%s) AND active<>%s",
                (flag, project_id, uniq, flag),
            )
            self._hide_context(conn, project_id, uniq, 1 - flag)
            self._record_soft_delete(
                conn, project_id, uniq, active, named, removed=removed, compacted=compacted
            )
            self._keep_keyword_log(conn, project_id)
        return changed

    def set_context_hidden(self, project_id: str, ids: Sequence[str], hidden: bool) -> None:
        with self._tx() as conn:
            self._lock(conn, [project_id], ensure=False, bump=True)
            self._hide_context(conn, project_id, list(dict.fromkeys(ids)), int(hidden))
            self._keep_keyword_log(conn, project_id)

    def _hide_context(self, conn: Conn, project_id: str, ids: list[str], flag: int) -> None:
        """Items indexed with the words of `ids` stop (1) or start again (0) matching on
        them, numbered again: what they are indexed by changed."""
        self._x(
            conn,
            f"UPDATE items SET context_hidden=%s, {q.NEXT_CHANGE_SEQ} WHERE project_id=%s "
            "AND context_id = ANY(%s) AND context_hidden<>%s",
            (flag, project_id, ids, flag),
        )

    # -- upgrade steps (base.TOOL_CALL_TEXTS) ---------------------------------------------
    def finish_upgrade(self, name: str) -> None:
        with self._tx() as conn:
            self._x(conn, "DELETE FROM meta WHERE key=%s", (UPGRADE_PREFIX + name,))

    def mark_upgrade(self, name: str) -> None:
        with self._tx() as conn:
            self._x(
                conn,
                "INSERT INTO meta(key, value) VALUES (%s, '1') ON CONFLICT (key) DO NOTHING",
                (UPGRADE_PREFIX + name,),
            )

    def retext_events(self, project_id: str, changes: Sequence[EventRetext]) -> int:
        done = 0
        with self._tx() as conn:
            self._lock(conn, [project_id], ensure=False, bump=True)
            for ch in changes:
                held = "(text IS NULL OR text='')" if ch.old_text is None else "text=%s"
                cur = self._x(
                    conn,
                    "UPDATE events SET text=%s, metadata=%s WHERE project_id=%s "
                    f"AND event_id=%s AND active=1 AND {held}",
                    (text(ch.text), jsonb(ch.metadata), project_id, ch.event_id)
                    + (() if ch.old_text is None else (text(ch.old_text),)),
                )
                if cur.rowcount != 1:
                    continue
                done += 1
                self._retext_items(conn, project_id, ch)
            self._keep_keyword_log(conn, project_id)
        return done

    def _retext_items(self, conn: Conn, project_id: str, ch: EventRetext) -> None:
        """An event's units and the context of those that follow it, as `ch` says. A whole
        unit stays in place (its context words and whether they are hidden are its own),
        numbered again so keyword readers see it change; its vector goes."""
        eid, kept = ch.event_id, False
        if len(ch.items) == 1 and ch.items[0].item_id == eid:
            it = ch.items[0]
            kept = (
                self._x(
                    conn,
                    f"UPDATE items SET text=%s, terms=%s, embedded_model=NULL, "
                    f"{q.NEXT_CHANGE_SEQ} WHERE project_id=%s AND item_id=%s AND owner_id=%s",
                    (text(it.text), text(it.terms), project_id, eid, eid),
                ).rowcount
                == 1
            )
            if kept:
                self._x(
                    conn,
                    "DELETE FROM item_vectors WHERE project_id=%s AND item_id=%s",
                    (project_id, eid),
                )
        if not kept:
            self._delete_items_of(conn, project_id, [eid], ForgetReport())
            self._insert_items(conn, project_id, ch.items)
        self._x(
            conn,
            f"UPDATE items SET context_terms=%s, {q.NEXT_CHANGE_SEQ} "
            "WHERE project_id=%s AND context_id=%s",
            (text(ch.context_terms), project_id, eid),
        )

    # -- entities and relations ----------------------------------------------------------
    def upsert_entity(self, entity: Entity, items: Sequence[SearchItem]) -> Entity:
        with self._tx() as conn:
            pid = entity.project_id
            self._lock(conn, [pid], ensure=True, bump=True)
            # Re-creating a forgotten entity is deliberate (unlike a stale event retry).
            self._x(
                conn,
                "DELETE FROM tombstones WHERE project_id=%s AND hashed_id=%s",
                (pid, tombstone_hash(entity.id, "entity")),
            )
            row = self._x(
                conn,
                "INSERT INTO entities(project_id, entity_id, type, name, text, properties, "
                "version, latest, active, created_at, updated_at) "
                "VALUES (%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s) "
                "ON CONFLICT (project_id, entity_id) DO UPDATE SET type=EXCLUDED.type, "
                "name=EXCLUDED.name, text=EXCLUDED.text, properties=EXCLUDED.properties, "
                "version=EXCLUDED.version, latest=EXCLUDED.latest, active=EXCLUDED.active, "
                "updated_at=EXCLUDED.updated_at RETURNING created_at",
                (
                    pid,
                    entity.id,
                    text(entity.type),
                    text(entity.name),
                    text(entity.text),
                    jsonb(entity.properties),
                    entity.version,
                    1 if entity.latest else 0,
                    1 if entity.active else 0,
                    entity.created_at,
                    entity.updated_at,
                ),
            ).fetchone()
            stored = entity.model_copy(update={"created_at": row[0] if row else entity.created_at})
            # Replace the entity's search units wholesale: stale chunks must not linger.
            self._delete_items_of(conn, pid, [entity.id], ForgetReport())
            self._insert_items(conn, pid, items)
            self._keep_keyword_log(conn, pid)
        return stored

    def get_entities(
        self, project_id: str, ids: Sequence[str], include_inactive: bool = False
    ) -> list[Entity]:
        uniq = list(dict.fromkeys(ids))
        if not uniq:
            return []
        sql = self._ENTITY_SELECT + "WHERE project_id=%s AND entity_id = ANY(%s)"
        if not include_inactive:
            sql += " AND active=1"
        with self._read() as conn:
            rows = self._x(conn, sql, (project_id, uniq)).fetchall()
        found = {r[1]: entity_row(r) for r in rows}
        return [found[i] for i in ids if i in found]

    # Re-asserting a closed relation opens a new validity period; an open one keeps its own.
    _RELATION_UPSERT = (
        "INSERT INTO relations(project_id, relation_id, from_id, type, to_id, confidence, "
        "source, created_at, valid_from, valid_to, properties) "
        "VALUES (%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s) "
        "ON CONFLICT (project_id, relation_id) DO UPDATE SET from_id=EXCLUDED.from_id, "
        "type=EXCLUDED.type, to_id=EXCLUDED.to_id, confidence=EXCLUDED.confidence, "
        "source=EXCLUDED.source, valid_from=CASE WHEN relations.valid_to IS NULL "
        "THEN relations.valid_from ELSE EXCLUDED.valid_from END, "
        "valid_to=EXCLUDED.valid_to, properties=EXCLUDED.properties"
    )

    @staticmethod
    def _relation_args(rel: Relation) -> tuple[Any, ...]:
        return (
            rel.project_id,
            stored_relation_id(rel),
            rel.from_id,
            rel.type,
            rel.to_id,
            rel.confidence,
            text(rel.source),
            rel.created_at,
            rel.valid_from,
            rel.valid_to,
            jsonb(rel.properties),
        )

    def upsert_relations(self, relations: Sequence[Relation]) -> list[Relation]:
        out: list[Relation] = []
        if not relations:
            return out
        with self._tx() as conn:
            self._lock(conn, [r.project_id for r in relations], ensure=True, bump=False)
            for rel in relations:
                args = self._relation_args(rel)
                row = self._x(
                    conn, self._RELATION_UPSERT + " RETURNING created_at, valid_from", args
                ).fetchone()
                assert row is not None
                out.append(
                    rel.model_copy(
                        update={"id": args[1], "created_at": row[0], "valid_from": row[1]}
                    )
                )
        return out

    def close_relation(self, project_id: str, relation_id: str, at: float) -> bool:
        with self._tx() as conn:
            self._lock(conn, [project_id], ensure=False, bump=False)
            cur = self._x(
                conn,
                "UPDATE relations SET valid_to=%s WHERE project_id=%s AND relation_id=%s "
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
        cols = (
            "r.project_id, r.relation_id, r.from_id, r.type, r.to_id, r.confidence, "
            "r.source, r.created_at, r.valid_from, r.valid_to, r.properties"
        )
        conds = ""
        cond_args: list[Any] = []
        if not include_closed:
            conds += " AND r.valid_to IS NULL"
        if min_confidence > 0:
            conds += " AND r.confidence>=%s"
            cond_args.append(min_confidence)
        if exclude_types:
            conds += " AND r.type <> ALL(%s)"
            cond_args.append(list(dict.fromkeys(exclude_types)))
        # A soft-deleted event or entity is hidden from every read, so are its edges.
        if not include_hidden:
            conds += (
                " AND NOT EXISTS (SELECT 1 FROM events e WHERE e.project_id = r.project_id"
                " AND e.event_id IN (r.from_id, r.to_id) AND e.active = 0)"
                " AND NOT EXISTS (SELECT 1 FROM entities n WHERE n.project_id = r.project_id"
                " AND n.entity_id IN (r.from_id, r.to_id) AND n.active = 0)"
            )
        if deliberate_only:
            sql_d, args_d = deliberate_sql("%s", "r.")
            conds += sql_d
            cond_args += args_d
        order = " ORDER BY r.created_at, r.relation_id"
        sides = {"out": ["from_id"], "in": ["to_id"], "both": ["from_id", "to_id"]}[direction]
        sql = f"SELECT {cols} FROM relations r WHERE r.project_id=%s"
        args: list[Any] = [project_id]
        if node_ids is not None:
            nodes = list(dict.fromkeys(node_ids))
            if direction == "both":
                sql += " AND (r.from_id = ANY(%s) OR r.to_id = ANY(%s))"
                args += [nodes, nodes]
            else:
                sql += f" AND r.{sides[0]} = ANY(%s)"
                args.append(nodes)
        if types:
            sql += " AND r.type = ANY(%s)"
            args.append(list(types))
        if node_ids is None or limit_per_node is None:
            with self._read() as conn:
                rows = self._x(conn, sql + conds + order, [*args, *cond_args]).fetchall()
            return [relation_row(r, validate=True) for r in rows]
        # With limit_per_node the statement stops past the limit: when it does not reach it,
        # no node does and the rows read are the answer (the usual case).
        with self._read() as conn:
            rows = self._x(
                conn, sql + conds + " LIMIT %s", [*args, *cond_args, limit_per_node + 1]
            ).fetchall()
            if len(rows) > limit_per_node:
                rows = self._first_relations(
                    conn, (cols, conds, cond_args), project_id, node_ids, sides, types,
                    limit_per_node,
                )  # fmt: skip
        found = {r.id: r for r in (relation_row(row, validate=True) for row in rows)}
        return sorted(found.values(), key=lambda r: (r.created_at, r.id))

    def _first_relations(
        self,
        conn: Conn,
        query: tuple[str, str, list[Any]],
        project_id: str,
        node_ids: Sequence[str],
        sides: list[str],
        types: Sequence[str] | None,
        limit: int,
    ) -> list[Any]:
        """Rows of the first `limit` relations of each node, side and type: a lateral join
        over the (node, type) pairs, each one range of relations_*_at; the types a node has
        are found by a loose index scan."""
        cols, conds, cond_args = query
        nodes = list(dict.fromkeys(node_ids))
        rows: list[Any] = []
        for side in sides:
            pairs = [
                (node, rtype)
                for node in nodes
                for rtype in dict.fromkeys(
                    types
                    or [
                        str(r[0])
                        for r in self._x(
                            conn, types_at_node_sql(side, "%s"), [project_id, node] * 2
                        ).fetchall()
                    ]
                )
            ]
            if not pairs:
                continue
            rows += self._x(
                conn,
                f"SELECT x.* FROM unnest(%s::text[], %s::text[]) AS n(id, type) "
                f"CROSS JOIN LATERAL (SELECT {cols} FROM relations r "
                f"WHERE r.project_id=%s AND r.{side} = n.id AND r.type = n.type{conds}"
                " ORDER BY r.created_at, r.relation_id LIMIT %s) x",
                [[p[0] for p in pairs], [p[1] for p in pairs], project_id, *cond_args, limit],
            ).fetchall()
        return rows
