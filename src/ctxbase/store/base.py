"""The storage protocol: what every backend (SQLite, PostgreSQL) provides.

Retrieval, assembly and the service talk to a `Store` only; dialect differences stay inside
the backend modules. Everything is keyed by project id first.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:  # vectors are numpy arrays; a command that reads no vector never loads it
    import numpy as np
    import numpy.typing as npt

from ..model import Entity, Event, Relation, SessionInfo, StateFact, TaskInfo
from .index_rows import KeywordDelta, KeywordHit, KeywordRow, VectorBlock, VectorDelta, VectorRow
from .records import (
    ApiKeyRecord,
    EventCount,
    EventRetext,
    ForgetReport,
    ItemFilter,
    KeptFact,
    KnowledgeView,
    SearchItem,
    StateChange,
    TraceSummary,
)

__all__ = [
    "FEEDBACK_SCOPE",
    "KEYWORD_LOG_CHECK_EVERY",
    "KEYWORD_LOG_LIMIT",
    "MESSAGE_SCOPE",
    "OWN_TERMS_WEIGHT",
    "SCHEMA_VERSION",
    "TOOL_CALL_TEXTS",
    "USES_SCOPE",
    "ApiKeyRecord",
    "EventCount",
    "EventRetext",
    "ForgetReport",
    "ItemFilter",
    "KeptFact",
    "KeywordDelta",
    "KeywordHit",
    "KeywordRow",
    "KnowledgeView",
    "SearchItem",
    "StateChange",
    "Store",
    "TombstoneKind",
    "VectorBlock",
    "VectorDelta",
    "VectorRow",
]

SCHEMA_VERSION = 12

# Upgrade steps a schema migration cannot finish in SQL, since they need what is above the
# store (capture's rendering of a text, the index's terms): the migration records each one
# pending in `meta` (key "upgrade:<name>") only when the database holds rows it applies to,
# and the base opening the store does it (`pending_upgrades`, `finish_upgrade`).
# v8, "tool_call_texts": assistant messages made only of tool calls, stored before their
# text was rendered from the calls (no text, data {"tool_calls": n}), get that text and
# their search units again (ctxbase/tool_turn_texts.py, `retext_events`).
TOOL_CALL_TEXTS = "tool_call_texts"

# What a tombstone stands for: a forgotten event (a stale retry of it is never written
# again), entity or session (forgetting it again is "already forgotten", not "not found"),
# a whole project (its id: a copy from a backup does not bring the project back) or an
# ingested repository (its name: a copy from a backup leaves out its records, and
# forgetting it again is "already forgotten"; an ingest under the name is no less new).
TombstoneKind = Literal["event", "entity", "session", "project", "repo"]

# State records keyed by the id of an event or entity that are no facts (facts are task,
# session, user or project): feedback on a memory (value: label, confidence, where it was
# seen; its history is every feedback given; memory_feedback.py) and how often assembled
# contexts placed it (`version`: that count, `updated_at`: the last one; no history; written
# in batches by retrieve/signals.py). Scope id "": the project's. A forget removes them
# with the node.
FEEDBACK_SCOPE = "feedback"
USES_SCOPE = "uses"
# The statuses of a session's messages (scope id: the session, key: the message id, value:
# a lifecycle status; assemble/state.py writes them): one other than active ("expired": a
# retracted message, a per-turn tool result of an earlier turn) keeps the message out of
# prompts and searches. A message without a record is active.
MESSAGE_SCOPE = "message"

# Keywords are ranked like FTS5's bm25() over two columns, indexed terms (own + live context)
# with weight 1 and own terms with this weight: a query term's frequency counts
# tf(indexed) + OWN_TERMS_WEIGHT * tf(own), so a word an item says itself outranks one it
# only follows. Every backend ranks this way.
OWN_TERMS_WEIGHT = 0.5

# A project's record of the rows that left the keyword index (KeywordDelta.removed) is kept
# to this many rows: past it the oldest are dropped, and a reader that last read before the
# newest one dropped reloads (store/keyword_log.py). The record is measured every this many
# writes of a project that can add to it (per store; the first write included).
KEYWORD_LOG_LIMIT = 50_000
KEYWORD_LOG_CHECK_EVERY = 64


class Store(ABC):
    """A storage backend. Methods are thread-safe; writes are transactional per call."""

    url: str
    # The bound on the record of keyword removals and how often it is checked (see
    # KEYWORD_LOG_LIMIT); set on a store to change them for it (tests use small ones).
    keyword_log_limit: int = KEYWORD_LOG_LIMIT
    keyword_log_check_every: int = KEYWORD_LOG_CHECK_EVERY

    @property
    def reads_never_wait(self) -> bool:
        """True when a short read never waits on a writer or the network (so a service may
        run it on its event loop); backends that cannot promise it keep the default."""
        return False

    # -- lifecycle ---------------------------------------------------------------------
    @abstractmethod
    def close(self) -> None: ...

    @property
    def closed(self) -> bool:
        """Whether `close` was called (a backend that tracks it says so; else False)."""
        return bool(getattr(self, "_closed", False))

    @abstractmethod
    def schema_version(self) -> int: ...

    @abstractmethod
    def pending_upgrades(self) -> frozenset[str]:
        """The upgrade steps (TOOL_CALL_TEXTS) the database still waits for; one read."""

    @abstractmethod
    def finish_upgrade(self, name: str) -> None:
        """Record an upgrade step done: `pending_upgrades` no longer names it."""

    @abstractmethod
    def mark_upgrade(self, name: str) -> None:
        """Record an upgrade step pending (again): `pending_upgrades` names it until
        `finish_upgrade`. A copy does this for the steps its source has pending, so the
        rows it brings get the step when a base next opens the destination."""

    @abstractmethod
    def textless_events(self, type_: str, after: tuple[str, str] | None, limit: int) -> list[Event]:
        """Active events of `type_` in every project with no text and some data, in
        (project, event id) order: the first `limit` after `after` (a project and event
        id). What an upgrade step re-derives texts from; it reads the events table whole."""

    @abstractmethod
    def retext_events(self, project_id: str, changes: Sequence[EventRetext]) -> int:
        """Give stored events the text an upgrade re-derived, in one transaction: each
        event that is still active and still holds its `old_text` (None: no text) gets its
        text and metadata, its
        search units replaced (their vectors dropped: the embedding worker computes them
        again) and the items that follow it their new context terms. An event forgotten,
        hidden or given another text meanwhile is left as it is. Returns how many changed."""

    def same_database(self, other: Store) -> bool:
        """True when `other` is this store's database, however it was named (another path
        or a symlink to the same file, another URL of the same PostgreSQL database)."""
        return other is self

    # -- projects, sessions, tasks -----------------------------------------------------
    @abstractmethod
    def ensure_project(self, project_id: str) -> None: ...

    @abstractmethod
    def list_projects(self) -> list[str]: ...

    @abstractmethod
    def has_forgotten(self, project_id: str) -> bool:
        """True when the project keeps tombstones (`forgotten_ids`): it held data that was
        hard-forgotten, a whole-project forget included, whether or not it holds any now."""

    @abstractmethod
    def list_repos(self, project_id: str) -> list[str]:
        """The repositories ingested into the project (its items' `repo`), sorted. Reads
        every item of the project: for telling a user which names exist, not per query."""

    @abstractmethod
    def upsert_session(self, session: SessionInfo) -> None: ...

    @abstractmethod
    def get_session(self, project_id: str, session_id: str) -> SessionInfo | None: ...

    @abstractmethod
    def list_sessions(self, project_id: str) -> list[SessionInfo]: ...

    @abstractmethod
    def upsert_task(self, task: TaskInfo) -> None: ...

    @abstractmethod
    def get_task(self, project_id: str, task_id: str) -> TaskInfo | None: ...

    @abstractmethod
    def list_tasks(self, project_id: str, session_id: str | None = None) -> list[TaskInfo]: ...

    # -- events ------------------------------------------------------------------------
    @abstractmethod
    def write_events(
        self,
        events: Sequence[Event],
        items: Sequence[Sequence[SearchItem]],
        *,
        backlog: Callable[[Event], bool] | None = None,
        anchored: Sequence[tuple[str, str]] = (),
    ) -> list[Event]:
        """Insert events (ignoring ids already stored or forgotten) with their search items.

        Assigns `seq` within each session and adds the event-graph edges (NEXT from the
        session's previous event, CAUSED_BY to each parent, REFERS_TO to each reference), all
        in one transaction. The inserted events `backlog` keeps are recorded in their
        project's anchoring backlog in that transaction too (`anchor_backlog`), and the
        `anchored` (project, event id) pairs leave it (`drop_anchor_backlog` without a
        commit of its own). Returns the events actually inserted, with `seq` set.
        """

    @abstractmethod
    def anchor_backlog(self, project_id: str) -> list[str]:
        """The ids in the project's anchoring backlog: events stored that capture anchoring
        has not anchored yet (`write_events(backlog=...)` records them, `drop_anchor_backlog`
        removes them), oldest first; an id whose event is gone (forgotten) may be among them."""

    @abstractmethod
    def add_anchor_backlog(self, project_id: str, event_ids: Sequence[str]) -> None:
        """Record these stored events in the project's anchoring backlog (a copy carries
        its source's); ids there already are kept."""

    @abstractmethod
    def drop_anchor_backlog(self, project_id: str, event_ids: Sequence[str]) -> None:
        """Remove these ids from the project's anchoring backlog (anchored, or gone)."""

    @abstractmethod
    def existing_ids(self, project_id: str, ids: Sequence[str]) -> set[str]:
        """Which of these ids are stored events or entities in the project (active or not)."""

    @abstractmethod
    def forgotten_ids(
        self, project_id: str, ids: Sequence[str], kinds: Sequence[TombstoneKind] = ("event",)
    ) -> set[str]:
        """Which of these ids the project has hard-forgotten as one of `kinds` (events by
        default): a forget keeps a tombstone, a hash of the id and its kind, for each
        stored event, entity and session it removed and each repository it forgot whole
        (see rows.tombstone_hash)."""

    @abstractmethod
    def forgotten_times(
        self, project_id: str, ids: Sequence[str], kind: TombstoneKind
    ) -> dict[str, float | None]:
        """Of these ids, those the project has forgotten as `kind`: when each was last
        forgotten (a unix time; None for a tombstone kept before schema 9 recorded it)."""

    @abstractmethod
    def get_events(
        self, project_id: str, ids: Sequence[str], include_inactive: bool = False
    ) -> list[Event]: ...

    def event_aliases(self, project_id: str, ids: Sequence[str]) -> dict[str, str]:
        """Of these ids, those of events the capture bus merged into a stored one (the ids
        in its `data["aggregated"]` other than its own, rows.merged_ids): alias -> the
        stored event's id. Written with that event, removed (and tombstoned) with it. A
        backend that keeps none has none."""
        return {}

    @abstractmethod
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
        """Events in session order (seq ascending); `last_n` keeps the newest n."""

    @abstractmethod
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
        """One page of a session's active events in seq order: the first `limit` after
        `after_seq`, or the last `limit` before `before_seq` (neither: the first page)."""

    @abstractmethod
    def event_counts(self, project_id: str, session_id: str) -> list[EventCount]:
        """A session's active events counted by (agent, type), with first and last time."""

    @abstractmethod
    def hidden_event_counts(
        self, project_id: str, session_ids: Sequence[str] | None = None
    ) -> dict[str, int]:
        """Session id -> how many of its events are hidden (soft-deleted), for the sessions
        (all when None) that have any."""

    @abstractmethod
    def set_active(
        self,
        project_id: str,
        ids: Sequence[str],
        active: bool,
        *,
        removed: bool = False,
        compacted: bool = False,
    ) -> int:
        """Soft delete (False) or restore (True) events or entities, with what capture
        anchoring made from those events (see ForgetSteps._made_from); returns rows changed.
        An entity soft-deleted by its own id is not restored with an event it was anchored
        from, only by its id. The first soft delete's time is kept (see forget's
        `soft_deleted_before`). `removed`: an ingest soft-deletes what left the tree; they
        are recorded as removed, not as hidden on their own, and one a user hid before
        stays recorded as hidden (an ingest writes such a unit hidden when it returns).
        `compacted` (a hide only): the raw turns of an archived session compacted into its
        summary; only the named rows are hidden (what was anchored from them stays), recorded
        as compacted, which the purge of soft-deleted rows leaves alone."""

    @abstractmethod
    def set_context_hidden(self, project_id: str, ids: Sequence[str], hidden: bool) -> None:
        """Hide (or show again) the words of events `ids` where the items that follow them
        were indexed with them (SearchItem.context_terms), the events themselves staying
        visible: a message retracted or rated false no longer finds its neighbour."""

    # -- entities and relations ----------------------------------------------------------
    @abstractmethod
    def upsert_entity(self, entity: Entity, items: Sequence[SearchItem]) -> Entity: ...

    @abstractmethod
    def get_entities(
        self, project_id: str, ids: Sequence[str], include_inactive: bool = False
    ) -> list[Entity]: ...

    @abstractmethod
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
        """Entities by type and name; `newest_first` orders by last update (newest first,
        then id) instead of type, name and version, so `limit` keeps the newest.
        `updated_after`: only those last updated after that time; `session_id`: only
        those anchored from that session (their `session_id` property).
        `exclude_types` leaves those types out (in the query, before any row is read);
        `repos` keeps only the entities of those ingested repositories (their `repo`
        property)."""

    @abstractmethod
    def entities_fingerprint(
        self, project_id: str, exclude_types: Sequence[str] = (), until: float | None = None
    ) -> tuple[float, ...]:
        """A value that changes whenever what `list_entities(project_id,
        exclude_types=...)` returns changes (an entity written, hidden, restored or
        forgotten): the key of what is built from them, read in one aggregate query.
        `until`: of the entities last updated then or before only. Its second value is
        the newest update time."""

    @abstractmethod
    def repo_entity_ids(self, project_id: str, repos: Sequence[str]) -> dict[str, list[str]]:
        """Every entity of each of `repos` (ingested: the `repo` property, or the `repo` of
        its items), active or not, every version and kept copy: name -> ids, a name with
        none left out."""

    @abstractmethod
    def entity_type_counts(self, project_id: str) -> dict[str, int]:
        """Active latest entities of the project counted by type."""

    @abstractmethod
    def upsert_relations(self, relations: Sequence[Relation]) -> list[Relation]: ...

    @abstractmethod
    def close_relation(self, project_id: str, relation_id: str, at: float) -> bool: ...

    @abstractmethod
    def has_relation(self, project_id: str, relation_id: str) -> bool:
        """Whether the project holds the relation, open or closed."""

    @abstractmethod
    def list_relations(
        self,
        project_id: str,
        node_ids: Sequence[str] | None = None,
        *,
        direction: str = "both",  # "out" (from node), "in" (to node), "both"
        types: Sequence[str] | None = None,
        include_closed: bool = False,
        min_confidence: float = 0.0,
        limit_per_node: int | None = None,
        exclude_types: Sequence[str] = (),
        include_hidden: bool = False,
        deliberate_only: bool = False,
    ) -> list[Relation]:
        """Relations touching `node_ids` (or all), oldest first (created_at, id); none of
        `exclude_types` (left out by the query: an event's NEXT and CAUSED_BY edges are most
        of its edges, and most readers skip them). An edge touching a soft-deleted event or
        entity is hidden with it, unless `include_hidden` (for walks that show a hidden
        event by a placeholder and go on through it: retrieve/causes.py). With
        `deliberate_only`, only edges created on purpose (rows.is_deliberate: not inferred
        by a rule) are read, the limit counting those.

        `limit_per_node` (with `node_ids` and `types`) keeps the first that many of each
        node, side and type, read by index: a node with thousands of edges (an entity every
        event mentions) costs what is kept, not what it has."""

    # -- search index --------------------------------------------------------------------
    @abstractmethod
    def keyword_search(
        self, project_id: str, match: str, flt: ItemFilter | None, limit: int
    ) -> list[KeywordHit]:
        """BM25 over the items' terms; `match` is an FTS query built by retrieve.tokenize."""

    @abstractmethod
    def keyword_changes(self, project_id: str, after: int) -> KeywordDelta:
        """The project's active items stored since `after` (0: all) and the rows removed
        since (see KeywordDelta), for readers that keep a keyword index in memory and
        update it instead of reloading."""

    @abstractmethod
    def get_items(self, project_id: str, ids: Sequence[str]) -> list[SearchItem]: ...

    @abstractmethod
    def filter_item_ids(
        self,
        project_id: str,
        flt: ItemFilter,
        *,
        among: Sequence[str] | None = None,
        limit: int | None = None,
    ) -> set[str]:
        """Ids of the active items `flt` admits; only those in `among` when given, at most
        `limit` of them when given (a search asks for a few before listing a whole filter)."""

    @abstractmethod
    def count_items(self, project_id: str) -> int: ...

    # -- vectors -------------------------------------------------------------------------
    @abstractmethod
    def pending_embeddings(
        self, model: str, limit: int, project_id: str | None = None, *, missing_only: bool = False
    ) -> list[tuple[str, str, str]]:
        """(project_id, item_id, text) of active items with no vector for `model`; with
        `missing_only`, only those with no vector of any model (another model's vectors are
        replaced only in the projects a base addresses: retrieve/embedding_worker.py)."""

    @abstractmethod
    def pending_projects(self, model: str, *, missing_only: bool = False) -> list[str]:
        """The projects (sorted) with active items that have no vector for `model` (with
        `missing_only`: no vector at all): the embedding worker serves them in turn."""

    def count_pending_embeddings(
        self, model: str, limit: int, project_id: str, *, missing_only: bool = False
    ) -> int:
        """How many active items of the project have no vector for `model` (up to `limit`)."""
        return len(self.pending_embeddings(model, limit, project_id, missing_only=missing_only))

    @abstractmethod
    def other_vector_model(self, project_id: str, model: str) -> str | None:
        """A model other than `model` that made vectors of the project's active items, if
        any: an embedder of another name re-embeds those items and replaces their vectors."""

    @abstractmethod
    def pending_among(self, project_id: str, model: str, ids: Sequence[str]) -> set[str]:
        """Those of `ids` that are active items of the project with no vector for `model`."""

    @abstractmethod
    def put_vectors(
        self, model: str, rows: Sequence[tuple[str, str, npt.NDArray[np.float32]]]
    ) -> int:
        """Store (project_id, item_id, vector) rows for `model`; returns rows written."""

    @abstractmethod
    def iter_vectors(
        self, project_id: str, model: str, batch: int = 4096
    ) -> Iterator[list[VectorRow]]: ...

    def get_vectors(
        self, project_id: str, model: str, ids: Sequence[str]
    ) -> dict[str, npt.NDArray[np.float32]]:
        """The stored vectors of the active items `ids` that have one for `model`."""
        wanted = set(ids)
        return {
            r.item_id: r.vector
            for batch in self.iter_vectors(project_id, model)
            for r in batch
            if r.item_id in wanted
        }

    def vector_block(self, project_id: str, model: str) -> VectorBlock:
        """All active vectors of a (project, model) read in blocks into one matrix: a reader
        that keeps them in memory gets no object per row but its id (at 1M rows those
        objects took gigabytes while loading)."""
        from .vector_block import VectorFill

        fill = VectorFill()
        for batch in self.iter_vectors(project_id, model):
            fill.add_rows((r.item_id, r.vector) for r in batch)
        return fill.block(0, 0)

    def vector_changes(self, project_id: str, model: str, after: int) -> VectorDelta | None:
        """Vectors stored since `after` (0: all), for readers that keep vectors in memory
        and update them instead of reloading; None when the backend cannot tell (reload)."""
        return None

    def vector_ids(self, project_id: str, model: str) -> VectorBlock | None:
        """The ids of every active vector of a (project, model), without the vectors (a 0 x 0
        matrix), with the marker and removal count of the same read: a reader that keeps the
        vectors finds what was removed or hidden without reading them all again. None when
        the backend cannot tell (reload)."""
        return None

    @abstractmethod
    def vector_search(
        self,
        project_id: str,
        model: str,
        query: npt.NDArray[np.float32],
        limit: int,
        allowed_ids: set[str] | None = None,
    ) -> list[tuple[str, float]] | None:
        """Nearest items by cosine if the backend has a native index, else None (the caller
        then searches the vectors itself)."""

    @abstractmethod
    def index_generation(self, project_id: str) -> int:
        """A number that changes whenever the project's items or vectors change (cache key)."""

    @abstractmethod
    def touch_index(self, project_id: str) -> None:
        """Change the project's index generation with no item changed: what searches cache
        by it (the pinned knowledge-base view, retrieve/kb_view.py; memories' confidence)
        is read again."""

    # -- state ---------------------------------------------------------------------------
    @abstractmethod
    def set_state(self, fact: StateFact) -> StateFact:
        """Write a fact; bumps its version and records the change in the history. Its
        `ttl` and `updated_at` are stored as given: the store keeps an expired fact and
        returns it (the state layer leaves it out of what it reads, assemble/state.py)."""

    @abstractmethod
    def delete_state(
        self, project_id: str, scope: str, scope_id: str, key: str, cause: str | None
    ) -> bool: ...

    @abstractmethod
    def get_state(
        self, project_id: str, scope: str, scope_id: str, key: str | None = None
    ) -> list[StateFact]: ...

    def get_states(
        self, project_id: str, scopes: Sequence[tuple[str, str]]
    ) -> dict[tuple[str, str], list[StateFact]]:
        """The facts of several (scope, scope_id) pairs at once, by pair (each pair asked
        for is a key, with [] when it holds none), each list ordered by key as `get_state`
        orders it. Backends read them in one statement; this default asks once per pair."""
        return {pair: self.get_state(project_id, *pair) for pair in dict.fromkeys(scopes)}

    def get_state_keys(
        self, project_id: str, scope: str, scope_id: str, keys: Sequence[str]
    ) -> dict[str, StateFact]:
        """The facts of one scope whose keys are among `keys`, by key. Backends read them
        by key in one statement; this default reads the whole scope."""
        wanted = set(keys)
        return {f.key: f for f in self.get_state(project_id, scope, scope_id) if f.key in wanted}

    @abstractmethod
    def add_uses(self, project_id: str, counts: Mapping[str, int], at: float) -> None:
        """Add `counts` (node id -> assembled contexts that placed it) to the project's
        USES_SCOPE records (scope id ""), each record's `updated_at` becoming `at`: one
        transaction, no history."""

    @abstractmethod
    def state_history(
        self, project_id: str, scope: str, scope_id: str, key: str | None = None
    ) -> list[StateChange]: ...

    # -- traces --------------------------------------------------------------------------
    @abstractmethod
    def put_trace(self, project_id: str, context_id: str, trace: dict[str, Any]) -> None:
        """Store an assembly's trace. One is written per assembly, so backends commit it
        without waiting for the disk flush: an OS crash may lose the last few."""

    @abstractmethod
    def get_trace(self, project_id: str, context_id: str) -> dict[str, Any] | None: ...

    @abstractmethod
    def context_entities(self, project_id: str, context_id: str) -> set[str] | None:
        """The entities an assembled context carried (its included entity candidates) and
        those its outcome names, read inside the database without sending the whole trace;
        None when there is no such trace."""

    @abstractmethod
    def trace_project(self, context_id: str) -> str | None:
        """The project an assembled context belongs to (context ids are unique), or None."""

    @abstractmethod
    def list_traces(
        self,
        project_id: str,
        *,
        session_id: str | None = None,
        before: float | None = None,
        limit: int = 50,
    ) -> list[TraceSummary]:
        """Stored assemblies, newest first (created before `before` when given)."""

    @abstractmethod
    def latest_context_ids(
        self,
        project_id: str,
        agent_roles: Sequence[str],
        *,
        task_id: str | None = None,
        aliases: Mapping[str, Sequence[str]] | None = None,
    ) -> dict[str, str]:
        """The context last assembled for each of `agent_roles` (of `task_id` when given):
        role -> context_id, roles with none left out. With `aliases` (role -> the role
        names whose contexts count as its own), the latest context of any of them."""

    # -- forget --------------------------------------------------------------------------
    @abstractmethod
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
        """Hard forget events and entities (named, a session's, or those soft-deleted before
        `soft_deleted_before`, a unix time) or the whole project: their rows, search units,
        index entries, vectors and edges; entities anchored from a forgotten event and the
        capture-made mentions no remaining event names; the
        facts (with history) of a forgotten session's scopes and facts extracted from a
        forgotten event; the session's own traces. Traces of other sessions that used them
        are redacted (see store.trace_redaction). Each stored event and entity removed, and
        the session when the project held it, leaves a tombstone (`forgotten_ids`); a
        whole-project forget leaves those of all the project's events, entities and
        sessions, one of the project itself (its id as kind "project") and one of each
        repository it held (items ingested from it, where it lives, a tag over it), and keeps
        the tombstones already there.

        `replace_state` names state records, (scope, scope_id, key), whose content the
        forget covers too: each is removed with its whole history, and written again (one
        fresh version, `cause` "forget", or a KeptFact's own cause) when its value here is
        not None; in the same transaction, so no earlier value is left. `repos` names the
        ingested repositories the forget covers whole (their entities and records come in the
        lists above): each leaves a tombstone of kind "repo" (ignored with whole_project,
        which tombstones every repository of the project). `trace_ids` names assembled
        contexts whose traces go whole (a copy forgetting what the source forgot with its
        project: copy_forgets.py). `redact_ids` names entities that stay but whose stored
        text said what is forgotten (a document's card listing a forgotten section's
        words): their entries in other traces are redacted as a forgotten id's are."""

    # -- bulk copy (migrate-data) ----------------------------------------------------------
    @abstractmethod
    def export_rows(
        self, project_id: str, table: str, batch: int = 1000
    ) -> Iterator[list[dict[str, Any]]]:
        """The project's rows of one table of schema.TABLES, in batches, keyed by the names of
        schema.COLUMNS[table]; JSON columns as Python values, item_vectors.vec as float32."""

    @abstractmethod
    def import_rows(self, project_id: str, table: str, rows: Sequence[Mapping[str, Any]]) -> int:
        """Insert exported rows of the project, keeping rows already present (and the keyword
        index in step for items); returns the rows inserted."""

    @abstractmethod
    def held_rows(
        self, project_id: str, table: str, rows: Sequence[Mapping[str, Any]]
    ) -> list[dict[str, Any]]:
        """The project's rows of one table of schema.TABLES with the keys (schema.KEYS) of
        `rows`, exported as `export_rows` does; those it does not hold are not there."""

    @abstractmethod
    def delete_rows(
        self, project_id: str, table: str, rows: Sequence[Mapping[str, Any]]
    ) -> dict[str, int]:
        """Delete the project's rows of one table with the keys of `rows` (a copy replacing
        them with the source's: `import_rows` writes those next), keeping the keyword index
        in step; an item's vectors go with it. Returns the rows deleted per table."""

    @abstractmethod
    def count_rows(self, project_id: str, table: str) -> int:
        """How many rows of one table belong to the project (active or not)."""

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """The calling thread's writes inside run in one transaction: committed (once) at the
        end, all rolled back if the block raises; reads inside see them. Blocks nest (an
        inner one joins the outer). By default each call stays its own transaction."""
        yield

    @contextmanager
    def read_snapshot(self) -> Iterator[None]:
        """The calling thread's reads inside see the database as of one moment: what other
        writers commit meanwhile is not seen (a copy reads every table of a project in one
        state, not each table as it was when reached). Writes inside are refused. By
        default no snapshot is held."""
        yield

    @abstractmethod
    def hold_project(self, project_id: str) -> None:
        """Inside `transaction()`: wait for the project's write lock and hold it until the
        block ends, so what the block reads next no other writer of the project changes
        before it commits (an ingest reading its repository's tombstone before it writes:
        anchor/forget_watch.py)."""

    def hold_key(self, project_id: str, key: str) -> None:
        """Inside `transaction()`: until it ends, another process's transaction holding the
        same key waits (a read-then-write of one entity by two writers is made in turn). By
        default nothing: a backend whose write transactions exclude each other needs none."""
        return None

    @contextmanager
    def bulk_load(self) -> Iterator[None]:
        """A bulk import runs inside: the backend may defer index upkeep to its end (and
        then build each index once instead of row by row). Searches during it stay correct
        and may be slower. By default nothing is deferred."""
        yield

    # -- API keys (global, not keyed by project) -------------------------------------------
    # Not abstract: a backend without them can still serve the embedded API.
    def create_api_key(self, key: ApiKeyRecord) -> None:
        """Store a new key; StorageError if the key id exists."""
        raise NotImplementedError(f"{type(self).__name__} does not store API keys")

    def get_api_key(self, key_id: str) -> ApiKeyRecord | None:
        raise NotImplementedError(f"{type(self).__name__} does not store API keys")

    def list_api_keys(self) -> list[ApiKeyRecord]:
        """Every key, revoked ones included, oldest first."""
        raise NotImplementedError(f"{type(self).__name__} does not store API keys")

    def revoke_api_key(self, key_id: str, at: float) -> bool:
        """Set revoked_at (once); False when the key does not exist or is already revoked."""
        raise NotImplementedError(f"{type(self).__name__} does not store API keys")
