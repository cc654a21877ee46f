"""What a copy into a store leaves out because that store hard-forgot it (migrate-data).

A store that forgot events, entities or sessions keeps their tombstones. A copy from an
older source (a backup taken before the forget) must write back neither them nor what the
forget removed with them.

A whole-project forget leaves the project's own tombstone: while the destination does not
hold the project again, nothing of it is written (every table's rows are left out, traces
and tombstones included). A project written to again after its forget keeps its tombstone
and is held, so the copy goes on row by row, as for a session used again (below): what the
forget tombstoned is left out, and so is every project row, task, fact and trace of the
source from before that forget (copy_reborn); the destination's rows are its own.

Row by row, tables come in schema.TABLES order, parents first, so what one table left out
is known when its children come:

- sessions: tombstoned as sessions in the destination and not held there again (a session
  id used again after its forget keeps its tombstone, and its new rows stay; of its rows
  in the source, those from before the forget are its forgotten life and left out below:
  copy_reborn);
- tasks: of a session left out, or created before the forget of a session used again;
- events: tombstoned as events, or of a session left out;
- entities: tombstoned as entities, anchored from an event left out
  (`properties.event_id`), or of a repository left out;
- relations: from or to a node left out or tombstoned, or drawn because an event left out
  said so (`properties.event_id`);
- items: owned by a node left out or tombstoned, or of a session left out; vectors of the
  items left out. An item indexed with the words of a node left out (`context_id`) is
  written without them (redacted), as a forget drops them;
- state and state_history: a left-out session's scopes ('session', 'message') and its
  tasks' (of a session used again, the records and versions from before its forget),
  records keyed by a node left out or tombstoned, and every version of a fact whose cause
  quotes what was left out (as `Store.forget` removes them). The records that name a
  repository left out (where it lives, knowledge-base tags covering it, the pinned view of
  such a tag) are written as its forget left them (repo_records.py): left out, or
  rewritten without it as a first version, without their history;
- traces: a left-out session's own, and those of a session used again from before its
  forget; any other is written with the left-out ids and texts redacted
  (trace_redaction).

A repository is left out when it is tombstoned in the destination (a repository forget
leaves its name's, a whole-project forget each of its repositories') and not held there
again: a repository ingested again after its forget keeps its tombstone, and what the
source holds of it is copied, as for a session used again.

The source may have begun again what it forgot (the destination holding the tombstones an
earlier copy brought): a session whose row in the source is newer than its tombstone here
is copied as a session used again (its rows from before the forget left out); an entity
tombstoned here whose row in the source was made after that forget (the same code unit
ingested again) is copied, with what hangs off it; a repository whose place record in the
source was written after its forget is held; and a project forgotten whole whose row in
the source is newer than that forget is copied row by row as a project written to again.

Tombstones are all copied, the source's included: the destination then refuses what the
source forgot too, and a later copy from it keeps refusing. Only Store protocol methods
are used, so this works between any two backends. The destination's rows of the new
lives of sessions used again are counted (`own`) after the copy by reading them back.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from .base import Store, TombstoneKind
from .copy_reborn import Lives
from .forget_steps import FACT_SCOPES, KEYED_BY_ID_SCOPES
from .repo_records import (
    KB_PIN_KEY,
    KB_PIN_SCOPE,
    KB_TAG_SCOPE,
    REPOSITORY_SCOPE,
    StateKey,
    named_repos,
    without_repos,
)
from .schema import TABLES
from .trace_redaction import Forgotten

__all__ = ["ForgottenThere"]

_NODES: tuple[TombstoneKind, ...] = ("event", "entity")
Row = dict[str, Any]


def _event_of(properties: Any) -> str | None:
    """The event a row was anchored or drawn from (`properties.event_id`), if any."""
    if isinstance(properties, Mapping):
        value = properties.get("event_id")
        return value if isinstance(value, str) else None
    return None


class ForgottenThere:
    """Filters one project's exported rows, table by table, against what the destination
    forgot. `skipped[table]`: source rows not written; `redacted[table]`: rows written with
    forgotten content taken out. Inactive (every row kept as it is) when the destination
    keeps no tombstones of the project; `project_gone` (every row left out) when it forgot
    the whole project and does not hold it again."""

    def __init__(self, src: Store, dst: Store, project_id: str) -> None:
        self._src, self._dst, self._pid = src, dst, project_id
        self.active = dst.has_forgotten(project_id)
        self.project_gone = (
            self.active
            and bool(dst.forgotten_ids(project_id, [project_id], ("project",)))
            and project_id not in dst.list_projects()
            and not self._begun_again_in_source()
        )
        self.skipped: Counter[str] = Counter()
        self.redacted: Counter[str] = Counter()
        self.sessions: set[str] = set()  # left out
        self._sessions_seen: set[str] = set()
        self.tasks: set[str] = set()
        self.events: set[str] = set()
        self.entities: set[str] = set()
        self.items: set[str] = set()
        self._texts: list[str | None] = []
        self._fact_scopes: set[str] = {project_id}  # scopes facts of left-out events live in
        self._facts: set[tuple[str, str, str]] = set()  # (scope, scope_id, key) left out whole
        self._forgotten: Forgotten | None = None
        self.repos: set[str] = set()  # left out
        self._repo_entities: set[str] = set()  # the source's entities of those
        self._reborn: set[str] = set()  # tombstoned entities the source made again since
        self._rewritten: dict[StateKey, Any] = {}  # records of them: None, left out
        self._history_written: set[StateKey] = set()
        self.lives = Lives({})  # sessions forgotten there and written to again
        if self.active and not self.project_gone:
            self._gone_repos()
            self.lives = self._lives()

    # -- the destination's tombstones -------------------------------------------------------
    def _tombstoned(self, ids: Iterable[str | None], kinds: Sequence[TombstoneKind]) -> set[str]:
        wanted = [i for i in dict.fromkeys(ids) if i]
        return self._dst.forgotten_ids(self._pid, wanted, kinds) if wanted else set()

    def _begun_again_in_source(self) -> bool:
        """Whether the source's project row is newer than the destination's tombstone of
        the project: the source forgot it whole and was written to since (a new life,
        copied row by row), not a backup from before the forget."""
        at = self._dst.forgotten_times(self._pid, [self._pid], "project").get(self._pid)
        rows = [r for b in self._src.export_rows(self._pid, "projects") for r in b]
        return at is not None and any(float(r["created_at"]) >= at for r in rows)

    def _gone_sessions(self, ids: Iterable[str | None]) -> set[str]:
        """Of `ids`, the sessions left out: tombstoned and not held in the destination."""
        new = {i for i in ids if i and i not in self._sessions_seen}
        self._sessions_seen |= new
        for session_id in self._tombstoned(new, ("session",)):
            held = session_id in self.lives.forgot  # here, or begun again in the source
            if not held and self._dst.get_session(self._pid, session_id) is None:
                self.sessions.add(session_id)
        return self.sessions

    def _lives(self) -> Lives:
        """The destination's sessions it forgot and holds again, with the time of their
        forget (a tombstone kept before that time was recorded: none, as before)."""
        held = [s.session_id for s in self._dst.list_sessions(self._pid)]
        times = self._dst.forgotten_times(self._pid, held, "session") if held else {}
        forgot = {s: at for s, at in times.items() if at is not None}
        # a session the source forgot (its tombstone copied here) or this store forgot,
        # that the source began again since: its rows newer than the forget are copied
        begun = {s.session_id: s.created_at for s in self._src.list_sessions(self._pid)}
        others = [s for s in begun if s not in forgot]
        for s, at in (
            self._dst.forgotten_times(self._pid, others, "session") if others else {}
        ).items():
            if at is not None and begun[s] >= at:
                forgot[s] = at
        return Lives(forgot, self._project_life())

    def _project_life(self) -> float | None:
        """When the destination forgot the whole project it holds again (None: it did not).
        A tombstone kept before schema 9 recorded the time: the project's new row was
        created after that forget, so its creation time stands in."""
        times = self._dst.forgotten_times(self._pid, [self._pid], "project")
        if self._pid not in times:
            return None
        at = times[self._pid]
        if at is None:
            rows = [r for b in self._dst.export_rows(self._pid, "projects") for r in b]
            at = min((float(r["created_at"]) for r in rows), default=None)
        return at

    def own(self) -> Counter[str]:
        """After the copy, per table: the rows the destination holds of those sessions'
        new lives beyond the source's (what it wrote since their forget). Reads the
        destination's rows of the project, only when there are such sessions."""
        if not self.lives:
            return Counter()
        there = Lives(self.lives.forgot, self.lives.project)
        for table in TABLES:
            for rows in self._dst.export_rows(self._pid, table):
                there.note(table, rows)
        return Counter(
            {
                t: n - self.lives.counts[t]
                for t, n in there.counts.items()
                if n > self.lives.counts[t]
            }
        )

    def _gone_repos(self) -> None:
        """The repositories the source names that the destination forgot (tombstoned) and
        does not hold again (no entity, no record of where it lives), and the source's
        entities of them."""
        places = self._src.get_state(self._pid, REPOSITORY_SCOPE, "")
        tags = self._src.get_state(self._pid, KB_TAG_SCOPE, "")
        names = set(self._src.list_repos(self._pid))
        names |= named_repos((f.key for f in places), (t.value for t in tags))
        gone = self._tombstoned(sorted(names), ("repo",))
        if not gone:
            return
        held = set(self._dst.repo_entity_ids(self._pid, sorted(gone)))
        held.update(n for n in gone if self._dst.get_state(self._pid, REPOSITORY_SCOPE, "", n))
        # ingested again in the source since its forget: where it lives was recorded after
        forgot = self._dst.forgotten_times(self._pid, sorted(gone), "repo")
        for f in places:
            at = forgot.get(f.key)
            if f.key in gone and at is not None and f.updated_at >= at:
                held.add(f.key)
        self.repos = gone - held
        if self.repos:
            found = self._src.repo_entity_ids(self._pid, sorted(self.repos))
            self._repo_entities = {i for ids in found.values() for i in ids}

    def _gone_nodes(self, ids: Iterable[str | None]) -> set[str]:
        """Of `ids`, the events and entities left out here or tombstoned there."""
        ids = [i for i in ids if i]
        known = self.events | self.entities
        return {i for i in ids if i in known} | (
            self._tombstoned((i for i in ids if i not in known), _NODES) - self._reborn
        )

    @property
    def forgotten(self) -> Forgotten:
        """The ids and texts of the events and entities left out: asked for after those
        tables (by state and traces), then kept."""
        if self._forgotten is None:
            self._forgotten = Forgotten(self.events | self.entities, self._texts)
        return self._forgotten

    # -- per table -----------------------------------------------------------------------------
    def prepare(self, table: str) -> None:
        """Before a table's rows come: facts are left out whole, so the causes of every
        version (state and state_history) are read first."""
        if not self.active or self.project_gone or table != "state":
            return
        if self.repos:
            src, pid = self._src, self._pid
            pins = src.get_state(pid, KB_PIN_SCOPE, "", KB_PIN_KEY)
            records = without_repos(
                {f.key: f.value for f in src.get_state(pid, REPOSITORY_SCOPE, "")},
                {f.key: f.value for f in src.get_state(pid, KB_TAG_SCOPE, "")},
                pins[0].value if pins else None,
                self.repos,
                self._repo_entities,
            )
            self._rewritten = records.for_copy()
        forgotten = self.forgotten
        if not forgotten:
            return
        for name in ("state", "state_history"):
            for rows in self._src.export_rows(self._pid, name):
                for r in rows:
                    scope, scope_id = r["scope"], r["scope_id"]
                    if (
                        scope in FACT_SCOPES
                        and (scope_id in self._fact_scopes or scope == "user")
                        and forgotten.quotes(r["cause"])
                    ):
                        self._facts.add((scope, scope_id, r["key"]))

    def rows(self, table: str, rows: Sequence[Row]) -> Sequence[Row]:
        """The rows of `table` to write: those the destination forgot left out, and
        forgotten content redacted out of the rest."""
        if self.project_gone:
            self.skipped[table] += len(rows)
            return []
        if not self.active or table == "tombstones":
            return rows
        keep: Callable[[Sequence[Row]], list[Row]] = getattr(self, f"_{table}")
        kept = keep(rows)
        self.skipped[table] += len(rows) - len(kept)
        self.lives.note(table, kept)
        return kept

    def _projects(self, rows: Sequence[Row]) -> list[Row]:
        return [r for r in rows if not self.lives.before(None, r["created_at"])]

    def _sessions(self, rows: Sequence[Row]) -> list[Row]:
        gone = self._gone_sessions(r["session_id"] for r in rows)
        old = self.lives.before  # a session row of a project's forgotten life (any session)
        return [r for r in rows if r["session_id"] not in gone and not old(None, r["created_at"])]

    def _tasks(self, rows: Sequence[Row]) -> list[Row]:
        gone = self._gone_sessions(r["session_id"] for r in rows)
        old = self.lives.before
        self.tasks.update(
            r["task_id"]
            for r in rows
            if r["session_id"] in gone or old(r["session_id"], r["created_at"])
        )
        return [r for r in rows if r["task_id"] not in self.tasks]

    def _events(self, rows: Sequence[Row]) -> list[Row]:
        sessions = self._gone_sessions(r["session_id"] for r in rows)
        tombstoned = self._tombstoned((r["event_id"] for r in rows), ("event",))
        kept = []
        for r in rows:
            if r["event_id"] in tombstoned or r["session_id"] in sessions:
                self.events.add(r["event_id"])
                self._texts.append(r["text"])
                self._fact_scopes.update(s for s in (r["session_id"], r["task_id"]) if s)
            else:
                kept.append(r)
        return kept

    def _entities(self, rows: Sequence[Row]) -> list[Row]:
        tombstoned = self._tombstoned((r["entity_id"] for r in rows), ("entity",))
        if tombstoned:  # made again in the source after its forget (the same id): its own
            forgot = self._dst.forgotten_times(self._pid, sorted(tombstoned), "entity")
            for r in rows:
                at = forgot.get(r["entity_id"])
                if at is not None and float(r["created_at"]) >= at:
                    self._reborn.add(r["entity_id"])
            tombstoned -= self._reborn
        kept = []
        for r in rows:
            if (
                r["entity_id"] in tombstoned
                or r["entity_id"] in self._repo_entities
                or _event_of(r["properties"]) in self.events
            ):
                self.entities.add(r["entity_id"])
                self._texts.append(r["text"])
            else:
                kept.append(r)
        return kept

    def _relations(self, rows: Sequence[Row]) -> list[Row]:
        gone = self._gone_nodes(
            i for r in rows for i in (r["from_id"], r["to_id"], _event_of(r["properties"]))
        )
        return [
            r for r in rows if not {r["from_id"], r["to_id"], _event_of(r["properties"])} & gone
        ]

    def _items(self, rows: Sequence[Row]) -> list[Row]:
        gone = self._gone_nodes(i for r in rows for i in (r["owner_id"], r.get("context_id")))
        kept = []
        for r in rows:
            if r["owner_id"] in gone or r.get("session_id") in self.sessions:
                self.items.add(r["item_id"])
            elif r.get("context_id") in gone:  # indexed with a forgotten node's words
                kept.append({**r, "context_terms": "", "context_id": None, "context_hidden": 0})
                self.redacted["items"] += 1
            else:
                kept.append(r)
        return kept

    def _item_vectors(self, rows: Sequence[Row]) -> list[Row]:
        return [r for r in rows if r["item_id"] not in self.items]

    def _state(self, rows: Sequence[Row]) -> list[Row]:
        keyed = self._gone_nodes(r["key"] for r in rows if r["scope"] in KEYED_BY_ID_SCOPES)
        kept = []
        for r in rows:
            fact = (r["scope"], r["scope_id"], r["key"])
            if fact in self._rewritten:  # a record of a repository left out
                value = self._rewritten[fact]
                if value is not None:  # as the forget wrote it again
                    kept.append({**r, "value": value, "version": 1, "cause": "forget"})
                    self.redacted["state"] += 1
            elif not self._fact_gone(r, keyed, r["updated_at"]):
                kept.append(r)
        return kept

    def _state_history(self, rows: Sequence[Row]) -> list[Row]:
        keyed = self._gone_nodes(r["key"] for r in rows if r["scope"] in KEYED_BY_ID_SCOPES)
        kept = []
        for r in rows:
            fact = (r["scope"], r["scope_id"], r["key"])
            if fact in self._rewritten:
                # no earlier version; one first version of a record written again
                value = self._rewritten[fact]
                if value is not None and fact not in self._history_written:
                    self._history_written.add(fact)
                    kept.append({**r, "version": 1, "old_value": None, "new_value": value,
                                 "cause": "forget", "deleted": 0})  # fmt: skip
                    self.redacted["state_history"] += 1
            elif not self._fact_gone(r, keyed, r["ts"]):
                kept.append(r)
        return kept

    def _fact_gone(self, r: Row, keyed: set[str], at: Any) -> bool:
        """Left out: of a session or task left out, keyed by a node left out, a fact
        drawn from one, or of a session's forgotten life (written before its forget, `at`:
        the record's or version's time)."""
        scope, scope_id, key = r["scope"], r["scope_id"], r["key"]
        return (
            (scope in ("session", "message") and scope_id in self.sessions)
            or self.lives.old_fact(r, at)
            or (scope == "task" and scope_id in self.tasks)
            or (scope in KEYED_BY_ID_SCOPES and key in keyed)
            or (scope, scope_id, key) in self._facts
        )

    def _traces(self, rows: Sequence[Row]) -> list[Row]:
        forgotten = self.forgotten
        kept = []
        for r in rows:
            trace = r["trace"]
            session = r.get("session_id") or (
                trace.get("session_id") if isinstance(trace, Mapping) else None
            )
            if session in self.sessions or self.lives.before(session, r["created_at"]):
                continue
            if forgotten:
                new, changed = forgotten.redact(trace)
                if changed:
                    r = {**r, "trace": new}
                    self.redacted["traces"] += 1
            kept.append(r)
        return kept
