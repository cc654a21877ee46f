"""The parts of a hard forget whose SQL and logic are the same on every backend (a mixin).

A backend's `forget` runs them inside its own write transaction: `_forget_scope` works out
everything the forget covers (named events and entities, a session's events and tasks,
soft-deleted rows past their retention, entities anchored from forgotten events and the
mentions only they named) and what they said; the backend removes rows, index entries,
vectors and edges; then `_forget_state` and `_forget_traces` remove or redact what else
held that content. A soft delete (`set_active`) hides and restores with an event what
`_made_from` finds was anchored from it, except, on restore, what was hidden by its own id.
Statements are written with `?` placeholders
and run through the backend's `_run`.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from .base import FEEDBACK_SCOPE, USES_SCOPE
from .dialect import Dialect
from .records import ForgetReport, KeptFact
from .repo_records import INGEST_WEAVE_SCOPE, KB_TAG_SCOPE, REPOSITORY_SCOPE
from .trace_redaction import Forgotten

__all__ = [
    "COMPACTED",
    "FACT_SCOPES",
    "HIDDEN_ON_ITS_OWN",
    "KEYED_BY_ID_SCOPES",
    "REMOVED_BY_INGEST",
    "SOFT_DELETED_SCOPE",
    "ForgetScope",
    "ForgetSteps",
]

# State records of when an event or entity was soft-deleted (key: its id; updated_at: when):
# what a retention purge reads. Not a fact scope (facts are task, session or project).
SOFT_DELETED_SCOPE = "soft_deleted"
# The `cause` of such a record when the row was hidden by its own id (NULL: hidden with an
# event it was anchored from): restoring that event leaves it hidden. An ingest's removals
# (a unit or file gone from the tree) are REMOVED_BY_INGEST instead: such a unit comes back
# when it reappears, while one a user hid stays hidden (anchor/ingest.py).
HIDDEN_ON_ITS_OWN = "own"
REMOVED_BY_INGEST = "ingest"
# The raw turns of an archived session compacted into its summary (assemble/compaction.py)
# are COMPACTED: hidden alone (what was anchored from them stays), and kept by the purge of
# soft-deleted rows, since nobody asked for them to go.
COMPACTED = "compacted"
# State records keyed by an event id: its message status, its soft-delete time; by an event
# or entity id: feedback on it, its use in assembled contexts.
KEYED_BY_ID_SCOPES = ("message", SOFT_DELETED_SCOPE, FEEDBACK_SCOPE, USES_SCOPE)
FACT_SCOPES = ("task", "session", "project", "user")
_CHUNK = 500


def _chunks(values: Sequence[Any]) -> Iterator[Sequence[Any]]:
    for i in range(0, len(values), _CHUNK):
        yield values[i : i + _CHUNK]


@dataclass
class ForgetScope:
    """Everything one forget covers."""

    event_ids: list[str] = field(default_factory=list)
    # those of `event_ids` stored as events: the ones tombstoned (a named id that was never
    # an event must not read as forgotten, nor keep a future event of that id out)
    stored_event_ids: list[str] = field(default_factory=list)
    entity_ids: list[str] = field(default_factory=list)
    # those of `entity_ids` stored as entities (tombstoned likewise)
    stored_entity_ids: list[str] = field(default_factory=list)
    session_id: str | None = None
    task_ids: list[str] = field(default_factory=list)
    # sessions and tasks of the forgotten events: where facts extracted from them live
    fact_scope_ids: set[str] = field(default_factory=set)
    forgotten: Forgotten = field(default_factory=lambda: Forgotten(()))
    # state records removed with their history, and written again when the value is not
    # None (see Store.forget's `replace_state`)
    replace_state: dict[tuple[str, str, str], Any] = field(default_factory=dict)
    # traces removed whole (Store.forget's `trace_ids`)
    trace_ids: list[str] = field(default_factory=list)

    @property
    def node_ids(self) -> list[str]:
        return list(dict.fromkeys(self.event_ids + self.entity_ids))


class ForgetSteps:
    """Shared steps of `Store.forget`; a backend supplies its dialect and `_run`."""

    _dialect: ClassVar[Dialect]

    def _run(self, conn: Any, sql: str, args: Sequence[Any] = ()) -> Any:
        """Execute one statement (already in the driver's placeholder style); the cursor."""
        raise NotImplementedError

    def _q(self, conn: Any, sql: str, args: Sequence[Any] = ()) -> Any:
        return self._run(conn, self._dialect.sql(sql), args)

    def _rows_in(
        self, conn: Any, sql: str, column: str, values: Sequence[Any], args: Sequence[Any] = ()
    ) -> list[Any]:
        """Rows of `sql` (ending in a WHERE clause) AND `column` is one of `values`."""
        out: list[Any] = []
        for part in _chunks(list(values)):
            cond, cond_args = self._dialect.any_of(column, part)
            out += self._q(conn, f"{sql} AND {cond}", [*args, *cond_args]).fetchall()
        return out

    def _delete_in(
        self, conn: Any, table: str, where: str, column: str, values: Sequence[Any], args: Any
    ) -> int:
        n = 0
        for part in _chunks(list(values)):
            cond, cond_args = self._dialect.any_of(column, part)
            sql = f"DELETE FROM {table} WHERE {where} AND {cond}"
            n += max(self._q(conn, sql, [*args, *cond_args]).rowcount, 0)
        return n

    # -- what the forget covers ----------------------------------------------------------------
    def _forget_scope(
        self,
        conn: Any,
        project_id: str,
        *,
        event_ids: Sequence[str],
        entity_ids: Sequence[str],
        session_id: str | None,
        soft_deleted_before: float | None,
        replace_state: Mapping[tuple[str, str, str], Any] | None = None,
        repos: Sequence[str] = (),
        trace_ids: Sequence[str] = (),
        redact_ids: Sequence[str] = (),
    ) -> ForgetScope:
        scope = ForgetScope(
            event_ids=list(dict.fromkeys(event_ids)),
            entity_ids=list(dict.fromkeys(entity_ids)),
            session_id=session_id,
            replace_state=dict(replace_state or {}),
            trace_ids=list(dict.fromkeys(trace_ids)),
        )
        pid = (project_id,)
        if repos:
            # An ingest of one of them may have written since the caller listed their
            # entities: read here, in the forget's transaction, they are all taken (an
            # ingest's writes after it are refused: anchor/forget_watch.py), and so is
            # where each lives.
            scope.entity_ids += self._repo_entities(conn, project_id, repos)
            for name in repos:
                scope.replace_state.setdefault((REPOSITORY_SCOPE, "", name), None)
                scope.replace_state.setdefault((INGEST_WEAVE_SCOPE, "", name), None)
        if session_id is not None:
            scope.event_ids += [
                r[0]
                for r in self._q(
                    conn,
                    "SELECT event_id FROM events WHERE project_id=? AND session_id=?",
                    (project_id, session_id),
                ).fetchall()
            ]
            scope.task_ids = [
                r[0]
                for r in self._q(
                    conn,
                    "SELECT task_id FROM tasks WHERE project_id=? AND session_id=?",
                    (project_id, session_id),
                ).fetchall()
            ]
        if soft_deleted_before is not None:
            hidden_events, hidden_entities = self._soft_deleted(
                conn, project_id, soft_deleted_before
            )
            scope.event_ids += hidden_events
            scope.entity_ids += hidden_entities
        scope.event_ids = list(dict.fromkeys(scope.event_ids))
        # Entities anchored from a forgotten message are copies of what it said.
        anchored = self._dialect.json_text("properties", "event_id")
        scope.entity_ids += [
            r[0]
            for r in self._rows_in(
                conn, "SELECT entity_id FROM entities WHERE project_id=?", anchored,
                scope.event_ids, pid,
            )
        ]  # fmt: skip
        # So are the mentions capture anchoring made for it that no other event names.
        scope.entity_ids += self._unmentioned(conn, project_id, scope.event_ids, visible=False)
        scope.entity_ids = list(dict.fromkeys(scope.entity_ids))
        texts: list[str | None] = []
        events = self._rows_in(
            conn,
            "SELECT event_id, session_id, task_id, text FROM events WHERE project_id=?",
            "event_id",
            scope.event_ids,
            pid,
        )
        for event_id, session, task, text in events:
            scope.stored_event_ids.append(event_id)
            scope.fact_scope_ids.update(s for s in (session, task) if s)
            texts.append(text)
        for entity_id, text in self._rows_in(
            conn, "SELECT entity_id, text FROM entities WHERE project_id=?", "entity_id",
            scope.entity_ids, pid,
        ):  # fmt: skip
            scope.stored_entity_ids.append(entity_id)
            texts.append(text)
        scope.fact_scope_ids.add(project_id)
        # entities kept whose text said what goes (Store.forget's `redact_ids`)
        scope.forgotten = Forgotten([*scope.node_ids, *redact_ids], texts)
        return scope

    def _forget_aliases(
        self, conn: Any, project_id: str, event_ids: Sequence[str], report: ForgetReport
    ) -> list[str]:
        """Remove the aliases of forgotten aggregated events (the ids of the events merged
        into them); returns those ids, which are tombstoned with the events."""
        gone: list[str] = []
        for part in _chunks(list(event_ids)):
            cond, cond_args = self._dialect.any_of("event_id", part)
            sql = f"DELETE FROM event_aliases WHERE project_id=? AND {cond} RETURNING alias_id"
            gone += [r[0] for r in self._q(conn, sql, [project_id, *cond_args]).fetchall()]
        report.add("event_aliases", len(gone))
        return gone

    def _repo_entities(self, conn: Any, project_id: str, repos: Sequence[str]) -> list[str]:
        """Every entity of the ingested repositories `repos`, as Store.repo_entity_ids."""
        repo = self._dialect.json_text("properties", "repo")
        by_property, args = self._dialect.any_of(repo, list(repos))
        by_item, item_args = self._dialect.any_of("repo", list(repos))
        sql = (
            f"SELECT entity_id FROM entities WHERE project_id=? AND {by_property} "
            f"UNION SELECT owner_id FROM items WHERE project_id=? AND {by_item}"
        )
        return [str(r[0]) for r in self._q(conn, sql, (project_id, *args, project_id, *item_args))]

    # -- entities made from messages ------------------------------------------------------------
    def _project_repos(self, conn: Any, project_id: str) -> list[str]:
        """The repositories a whole-project forget forgets with the project (it tombstones
        them, so a copy from a backup leaves their records out: copy_filter): those its
        items were ingested from and those its place records and knowledge-base tags name
        (repo_records)."""
        names = {
            str(r[0])
            for r in self._q(
                conn,
                "SELECT DISTINCT repo FROM items WHERE project_id=? AND repo IS NOT NULL",
                (project_id,),
            ).fetchall()
        }
        for scope, key, value in self._q(
            conn,
            "SELECT scope, key, value FROM state WHERE project_id=? AND scope_id='' "
            "AND scope IN (?, ?)",
            (project_id, REPOSITORY_SCOPE, KB_TAG_SCOPE),
        ).fetchall():
            if scope == REPOSITORY_SCOPE:
                names.add(str(key))
                continue
            tag = self._dialect.load(value)
            if isinstance(tag, Mapping):
                names.update(str(r) for r in tag.get("repos") or ())
        return sorted(n for n in names if n)

    def _capture_mentions(
        self, conn: Any, project_id: str, event_ids: Sequence[str]
    ) -> dict[str, list[tuple[str, bool]]]:
        """The mention entities capture anchoring made (rule `ctxbase:...`; not ingested or
        the user's) that `event_ids` link to -> every event linking to each, and whether
        that event is visible."""
        made = self._dialect.json_text("e.properties", "rule")
        found = {
            r[0]
            for r in self._rows_in(
                conn,
                "SELECT r.to_id FROM relations r JOIN entities e ON e.project_id=r.project_id "
                f"AND e.entity_id=r.to_id WHERE r.project_id=? AND e.type='mention' "
                f"AND {made} LIKE ?",
                "r.from_id",
                list(dict.fromkeys(event_ids)),
                (project_id, "ctxbase:%"),
            )
        }
        linked: dict[str, list[tuple[str, bool]]] = {m: [] for m in sorted(found)}
        for to_id, from_id, active in self._rows_in(
            conn,
            "SELECT r.to_id, r.from_id, v.active FROM relations r JOIN events v "
            "ON v.project_id=r.project_id AND v.event_id=r.from_id WHERE r.project_id=?",
            "r.to_id",
            list(linked),
            (project_id,),
        ):
            linked[to_id].append((from_id, bool(active)))
        return linked

    def _unmentioned(
        self, conn: Any, project_id: str, event_ids: Sequence[str], *, visible: bool
    ) -> list[str]:
        """Capture-made mentions of `event_ids` that no other stored event (`visible`: no
        other visible event) links to: what is left of them would be only what these said."""
        going = set(event_ids)
        return [
            mention
            for mention, linkers in self._capture_mentions(conn, project_id, event_ids).items()
            if not any(e not in going and (shown or not visible) for e, shown in linkers)
        ]

    def _made_from(self, conn: Any, project_id: str, ids: Sequence[str], active: bool) -> list[str]:
        """Entities hidden (`active` False) or restored with the events among `ids`: those
        anchored from them (`properties.event_id`), and their capture-made mentions (hidden
        when no other visible event names them; restored as a restored event names them,
        unless hidden by their own id: see `_record_soft_delete`)."""
        uniq = list(dict.fromkeys(ids))
        anchored = self._dialect.json_text("properties", "event_id")
        made = [
            r[0]
            for r in self._rows_in(
                conn, "SELECT entity_id FROM entities WHERE project_id=?", anchored, uniq,
                (project_id,),
            )
        ]  # fmt: skip
        if active:
            made += list(self._capture_mentions(conn, project_id, uniq))
        else:
            made += self._unmentioned(conn, project_id, uniq, visible=True)
        made += self._document_parts(conn, project_id, uniq)
        named = set(uniq)
        made = [m for m in dict.fromkeys(made) if m not in named]
        if active and made:
            own = {
                r[0]
                for r in self._rows_in(
                    conn, "SELECT key FROM state WHERE project_id=? AND scope=? AND scope_id='' "
                    "AND cause=?", "key", made, (project_id, SOFT_DELETED_SCOPE, HIDDEN_ON_ITS_OWN),
                )
            }  # fmt: skip
            made = [m for m in made if m not in own]
        return made

    def _document_parts(self, conn: Any, project_id: str, ids: Sequence[str]) -> list[str]:
        """The sections the documents among `ids` contain (CONTAINS drawn when they were
        anchored; theirs in turn): they hold the document's text, so they are hidden and
        restored with it (forgetting.py forgets them with it)."""
        parts: dict[str, None] = {}
        nodes = [i for i in ids if i.startswith(("document:", "section:"))]
        while nodes:
            found = [
                r[0]
                for r in self._rows_in(
                    conn, "SELECT to_id FROM relations WHERE project_id=? AND type='CONTAINS'",
                    "from_id", nodes, (project_id,),
                )
                if str(r[0]).startswith("section:")
            ]  # fmt: skip
            nodes = [i for i in dict.fromkeys(found) if i not in parts and i not in ids]
            parts.update(dict.fromkeys(nodes))
        return list(parts)

    def _soft_deleted(
        self, conn: Any, project_id: str, before: float
    ) -> tuple[list[str], list[str]]:
        """Events and entities soft-deleted before `before`. Rows hidden before their
        deletion time was recorded are stamped now: they go one retention later."""
        now = time.time()
        found: list[list[str]] = []
        for table, col in (("events", "event_id"), ("entities", "entity_id")):
            self._q(
                conn,
                f"INSERT INTO state(project_id, scope, scope_id, key, value, version, cause, "
                f"updated_at) SELECT project_id, ?, '', {col}, NULL, 1, NULL, ? FROM {table} t "
                f"WHERE t.project_id=? AND t.active=0 AND NOT EXISTS (SELECT 1 FROM state s "
                f"WHERE s.project_id=t.project_id AND s.scope=? AND s.scope_id='' "
                f"AND s.key=t.{col})",
                (SOFT_DELETED_SCOPE, now, project_id, SOFT_DELETED_SCOPE),
            )
            found.append(
                [
                    r[0]
                    for r in self._q(
                        conn,
                        f"SELECT t.{col} FROM {table} t JOIN state s ON s.project_id=t.project_id"
                        f" AND s.scope=? AND s.scope_id='' AND s.key=t.{col} "
                        f"WHERE t.project_id=? AND t.active=0 AND s.updated_at < ? "
                        f"AND (s.cause IS NULL OR s.cause<>?)",
                        (SOFT_DELETED_SCOPE, project_id, before, COMPACTED),
                    ).fetchall()
                ]
            )
        return found[0], found[1]

    def _reset_soft_delete(self, conn: Any, project_id: str, ids: Sequence[str]) -> None:
        """Before hiding ids: drop the records of those still visible (left when a row came
        back without `set_active`, e.g. an entity re-ingested), so their retention starts
        now."""
        for part in _chunks(list(dict.fromkeys(ids))):
            for table, col in (("events", "event_id"), ("entities", "entity_id")):
                cond, cond_args = self._dialect.any_of(col, part)
                self._q(
                    conn,
                    f"DELETE FROM state WHERE project_id=? AND scope=? AND scope_id='' AND key IN "
                    f"(SELECT {col} FROM {table} WHERE project_id=? AND active=1 AND {cond})",
                    (project_id, SOFT_DELETED_SCOPE, project_id, *cond_args),
                )

    def _record_soft_delete(
        self,
        conn: Any,
        project_id: str,
        ids: Sequence[str],
        active: bool,
        named: Sequence[str] = (),
        *,
        removed: bool = False,
        compacted: bool = False,
    ) -> None:
        """Remember when ids were soft-deleted (the first time; a repeat does not restart
        the retention), or forget it when they are restored. `named`: the ids hidden by
        their own id (not with an event): recorded as hidden on their own, also when they
        were hidden with an event before, so restoring that event leaves them hidden.
        `removed`: named ids an ingest removed, recorded so unless hidden on their own;
        `compacted`: named ids compacted into a session summary, recorded so likewise."""
        if active:
            args = (project_id, SOFT_DELETED_SCOPE)
            where = "project_id=? AND scope=? AND scope_id=''"
            self._delete_in(conn, "state", where, "key", ids, args)
            return
        now = time.time()
        for part in _chunks(list(dict.fromkeys(ids))):
            for table, col in (("events", "event_id"), ("entities", "entity_id")):
                cond, cond_args = self._dialect.any_of(f"t.{col}", part)
                self._q(
                    conn,
                    f"INSERT INTO state(project_id, scope, scope_id, key, value, version, cause, "
                    f"updated_at) SELECT project_id, ?, '', {col}, NULL, 1, NULL, ? FROM {table} t"
                    f" WHERE t.project_id=? AND t.active=0 AND {cond} AND NOT EXISTS (SELECT 1 "
                    f"FROM state s WHERE s.project_id=t.project_id AND s.scope=? "
                    f"AND s.scope_id='' AND s.key=t.{col})",
                    (SOFT_DELETED_SCOPE, now, project_id, *cond_args, SOFT_DELETED_SCOPE),
                )
        cause = REMOVED_BY_INGEST if removed else COMPACTED if compacted else HIDDEN_ON_ITS_OWN
        # a user's hide outlives the ingest removing the unit (it stays hidden if it returns)
        keep = " AND (cause IS NULL OR cause<>?)" if removed or compacted else ""
        for part in _chunks(list(dict.fromkeys(named))):
            cond, cond_args = self._dialect.any_of("key", part)
            self._q(
                conn,
                f"UPDATE state SET cause=? WHERE project_id=? AND scope=? AND scope_id='' "
                f"AND {cond}{keep}",
                (cause, project_id, SOFT_DELETED_SCOPE, *cond_args)
                + ((HIDDEN_ON_ITS_OWN,) if removed or compacted else ()),
            )

    # -- relations drawn from what a message said ---------------------------------------------
    def _forget_derived_relations(
        self, conn: Any, project_id: str, scope: ForgetScope, report: ForgetReport
    ) -> None:
        """Relations capture anchoring drew between two other nodes because a forgotten
        message said so (their `properties.event_id`, e.g. a document REFERENCES the SQL a
        message asked to change under it) go with the message."""
        made_by = self._dialect.json_text("properties", "event_id")
        n = self._delete_in(
            conn, "relations", "project_id=?", made_by, scope.event_ids, (project_id,)
        )
        report.add("relations", n)

    # -- state ---------------------------------------------------------------------------------
    def _forget_state(
        self, conn: Any, project_id: str, scope: ForgetScope, report: ForgetReport
    ) -> None:
        """Facts and their history: every scope of a forgotten session and its tasks, the
        records keyed by a forgotten id, and each fact a forgotten event caused (whole: its
        value and every version came from, or followed, forgotten content)."""
        pid = (project_id,)
        for table in ("state", "state_history"):
            n = 0
            if scope.session_id is not None:
                n += max(
                    self._q(
                        conn,
                        f"DELETE FROM {table} WHERE project_id=? AND scope IN "
                        "('session', 'message') AND scope_id=?",
                        (project_id, scope.session_id),
                    ).rowcount,
                    0,
                )
                n += self._delete_in(
                    conn, table, "project_id=? AND scope='task'", "scope_id", scope.task_ids, pid
                )
            for kind in KEYED_BY_ID_SCOPES:
                n += self._delete_in(
                    conn, table, "project_id=? AND scope=?", "key", scope.node_ids,
                    (project_id, kind),
                )  # fmt: skip
            report.add(table, n)
        facts: set[tuple[str, str, str]] = set()
        for table in ("state", "state_history"):
            for sc, scope_id, key, cause in self._rows_in(
                conn,
                f"SELECT scope, scope_id, key, cause FROM {table} WHERE project_id=? "
                "AND cause IS NOT NULL",
                "scope_id",
                sorted(scope.fact_scope_ids),
                pid,
            ):
                if sc in FACT_SCOPES and scope.forgotten.quotes(cause):
                    facts.add((sc, scope_id, key))
            # A user's own facts (preferences) live under the user, not the session: any
            # of them extracted from a forgotten message goes too.
            for sc, scope_id, key, cause in self._q(
                conn,
                f"SELECT scope, scope_id, key, cause FROM {table} WHERE project_id=? "
                "AND scope='user' AND cause IS NOT NULL",
                (project_id,),
            ).fetchall():
                if scope.forgotten.quotes(cause):
                    facts.add((sc, scope_id, key))
        removed = sorted(facts | set(scope.replace_state))
        scope.forgotten = self._with_fact_values(conn, project_id, scope, removed)
        for fact in removed:
            for table in ("state", "state_history"):
                cur = self._q(
                    conn,
                    f"DELETE FROM {table} WHERE project_id=? AND scope=? AND scope_id=? AND key=?",
                    (project_id, *fact),
                )
                report.add(table, max(cur.rowcount, 0))
        self._rewrite_state(conn, project_id, scope.replace_state)

    def _with_fact_values(
        self,
        conn: Any,
        project_id: str,
        scope: ForgetScope,
        facts: Sequence[tuple[str, str, str]],
    ) -> Forgotten:
        """`scope.forgotten` with the facts removed whole added: their layer ids in a trace
        (`state:<scope>:<scope_id>:<key>`) and every value they held, current or past, so a
        stored trace keeps no value of a fact no longer readable (a value written again by
        `replace_state` is no secret: it stays)."""
        if not facts:
            return scope.forgotten
        ids: list[str] = []
        values: list[Any] = []
        for sc, scope_id, key in facts:
            ids.append(f"state:{sc}:{scope_id}:{key}")
            where = "project_id=? AND scope=? AND scope_id=? AND key=?"
            args = (project_id, sc, scope_id, key)
            values += [r[0] for r in self._q(conn, f"SELECT value FROM state WHERE {where}", args)]
            for old, new in self._q(
                conn, f"SELECT old_value, new_value FROM state_history WHERE {where}", args
            ).fetchall():
                values += [old, new]
        kept = {_fact_text(_kept_value(v)) for v in scope.replace_state.values() if v is not None}
        texts = [t for t in (_fact_text(self._dialect.load(v)) for v in values if v is not None)]
        return Forgotten(
            [*scope.forgotten.ids, *ids],
            [*scope.forgotten.texts, *(t for t in texts if t not in kept)],
        )

    def _rewrite_state(
        self, conn: Any, project_id: str, records: Mapping[tuple[str, str, str], Any]
    ) -> None:
        """Write again, as a first version, the records `replace_state` gives a value (a
        KeptFact's with its own cause, any other with the cause "forget")."""
        now = time.time()
        for key, value in records.items():
            if value is None:
                continue
            cause = value.cause if isinstance(value, KeptFact) else "forget"
            stored = self._dialect.store_json(_kept_value(value))
            self._q(
                conn,
                "INSERT INTO state(project_id, scope, scope_id, key, value, version, cause, "
                "updated_at) VALUES (?,?,?,?,?,1,?,?)",
                (project_id, *key, stored, cause, now),
            )
            self._q(
                conn,
                "INSERT INTO state_history(project_id, scope, scope_id, key, version, old_value,"
                " new_value, cause, ts, deleted) VALUES (?,?,?,?,1,NULL,?,?,?,0)",
                (project_id, *key, stored, cause, now),
            )

    # -- traces --------------------------------------------------------------------------------
    def _forget_traces(
        self, conn: Any, project_id: str, scope: ForgetScope, report: ForgetReport
    ) -> None:
        """A forgotten session's own traces go, and those named; every other trace holding
        forgotten ids or texts is redacted in place."""
        if scope.trace_ids:
            n = self._delete_in(
                conn, "traces", "project_id=?", "context_id", scope.trace_ids, (project_id,)
            )
            report.add("traces", n)
        if scope.session_id is not None:
            cur = self._q(
                conn,
                "DELETE FROM traces WHERE project_id=? AND "
                f"{self._dialect.json_text('trace', 'session_id')} = ?",
                (project_id, scope.session_id),
            )
            report.add("traces", max(cur.rowcount, 0))
        forgotten = scope.forgotten
        if not forgotten:
            return
        candidates: dict[str, Any] = {}
        contains = self._dialect.contains("trace")
        for part in _chunks(forgotten.needles()):
            cond = " OR ".join([contains] * len(part))
            for context_id, trace in self._q(
                conn,
                f"SELECT context_id, trace FROM traces WHERE project_id=? AND ({cond})",
                (project_id, *part),
            ).fetchall():
                candidates[context_id] = trace
        redacted = 0
        for context_id, stored in candidates.items():
            new, changed = forgotten.redact(self._dialect.load(stored))
            if not changed:
                continue
            self._q(
                conn,
                "UPDATE traces SET trace=? WHERE project_id=? AND context_id=?",
                (self._dialect.store_json(new), project_id, context_id),
            )
            redacted += 1
        report.add_redacted("traces", redacted)


def _fact_text(value: Any) -> str:
    """A fact's value as a trace shows it: a string as it is, anything else as JSON."""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, default=str)


def _kept_value(value: Any) -> Any:
    return value.value if isinstance(value, KeptFact) else value
