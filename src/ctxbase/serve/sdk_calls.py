"""The remote SDK's requests, described once: each method builds a `Call` (HTTP method,
path, body, and how to turn the answer into the embedded API's return type). The sync and
async clients (sdk.py) only differ in how they send a Call.

Events are built and checked here, before sending, with the same code as the embedded API
(capture.events.build_event): the client assigns each event its id (fresh, or derived from
the caller's idempotency_key) and sends it, so the SDK's own retry of a request that timed
out stores nothing twice, and errors are raised before anything leaves the process.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from dataclasses import fields as dataclass_fields
from datetime import timedelta
from typing import TYPE_CHECKING, Any, Generic, TypeVar
from urllib.parse import quote

from ..aliases import edge_args, entity_args, identity_source
from ..assemble.budget import check_max_tokens
from ..capture.bus import BusStats
from ..capture.event_fields import capture_fields
from ..capture.events import DEFAULT_MAX_CONTENT_BYTES, RecordReport, build_event, with_ids
from ..errors import ValidationError
from ..forgetting import VisibilityReport, check_forget_named, retention_seconds
from ..model import Entity, Event, Relation, SessionInfo, TaskInfo, check_id, id_arg
from ..retrieve.graph import GraphHit
from ..retrieve.search import Candidate, SearchResponse
from ..search_filters import merged_filters
from ..store.base import ForgetReport, ItemFilter, SearchItem
from ..validation import (
    MessageShape,
    check_id_list,
    check_message_list,
    check_message_shape,
    json_refusal,
)
from .sdk_facts import FactCalls
from .sdk_feedback import FeedbackCalls
from .sdk_kb_calls import KnowledgeCalls
from .sdk_retention import RetentionCalls

if TYPE_CHECKING:
    from ..assemble.loop import Outcome
    from ..assemble.trace import AssembledContext
    from ..retrieve.config import SearchConfig

__all__ = ["Call", "Calls"]

T = TypeVar("T")

_EVENT_WIRE_EXCLUDE = {"project_id", "active", "seq", "id", "marks", "merged_id"}
# The status each session lifecycle route moves a session to.
_MOVED_TO = {"suspend": "suspended", "resume": "active", "expire": "expired", "archive": "archived"}
_CANDIDATE_FIELDS = frozenset(f.name for f in dataclass_fields(Candidate))


@dataclass(frozen=True)
class Call(Generic[T]):
    method: str
    path: str
    parse: Callable[[Any], T]
    params: Mapping[str, Any] | None = None
    body: Any = None
    # a queued capture: the server answers it at once when healthy, so the client's short
    # `capture_timeout` bounds it (all attempts together), not the per-call `timeout`
    queued: bool = False
    # a lifecycle move: the status it moves to and the read of its record, so that a retry
    # after a lost answer that finds the move already made returns the record (sdk.py)
    moves_to: str | None = None
    read_back: Call[T] | None = None

    def refused(self, exc: Exception) -> Exception:
        """What to raise when encoding this call's body failed with `exc`: a ValidationError
        naming the field JSON cannot carry, as embedded (not the client's TypeError), else
        `exc`. Looked for only after a failure: a body that encodes is encoded once."""
        if isinstance(self.body, dict):
            for field, value in self.body.items():
                try:
                    _check_wire_json(str(field), value)
                except ValidationError as refusal:
                    return refusal
        return exc


def _check_wire_json(field: str, value: Any) -> None:
    try:
        json.dumps(value, allow_nan=False)
    except RecursionError:
        raise ValidationError(field, "is nested too deep to send as JSON") from None
    except (ValueError, TypeError) as exc:
        raise json_refusal(field, exc) from None


def _q(part: str, field: str = "id") -> str:
    """One path segment: an id, quoted (an Event or a SessionInfo where its id goes is
    refused naming `field`, as embedded). The ids "." and ".." are sent as %2E: a URL's
    dot segments would be resolved away on the way."""
    quoted = quote(id_arg(field, part), safe="")
    return quoted.replace(".", "%2E") if quoted in (".", "..") else quoted


def _none(_: Any) -> None:
    return None


def _events(raw: Any) -> list[Event]:
    return [Event.model_validate(e) for e in raw]


def _recorded(raw: Mapping[str, Any]) -> Event:
    """POST /events' answer: the event, stored or (200, `"stored": false`) not written
    because the project forgot its id, which comes back as sent (seq None), as embedded.
    Only the event's own fields are read, so a server that adds to the answer does not
    break this client."""
    return Event.model_validate({k: v for k, v in raw.items() if k in Event.model_fields})


def _record_report(raw: Mapping[str, Any]) -> RecordReport:
    return RecordReport(events=_events(raw["events"]), forgotten=list(raw.get("forgotten") or []))


def _event_wire(event: Event, idempotency_key: str | None = None) -> dict[str, Any]:
    """The event as sent: its id, or the caller's idempotency key it was derived from (the
    server derives the same id, and names the key in a conflict)."""
    body = event.model_dump(mode="json", exclude=_EVENT_WIRE_EXCLUDE)
    if idempotency_key is not None:
        return {**body, "idempotency_key": idempotency_key}
    return {**body, "id": event.id}


def _candidate(raw: Mapping[str, Any]) -> Candidate:
    # only the hit's own fields: a server that adds one to its answer does not break this client
    fields = {k: v for k, v in raw.items() if k != "item" and k in _CANDIDATE_FIELDS}
    return Candidate(item=SearchItem(**raw["item"]), **fields)


def _assembled(raw: Mapping[str, Any]) -> AssembledContext:
    from ..assemble.trace import AssembledContext

    return AssembledContext(
        context_id=raw["context_id"],
        messages=raw["messages"],
        documents=raw["documents"],
        code_snippets=raw["code_snippets"],
        events=raw["events"],
        relationships=raw["relationships"],
        tokens_by_layer=raw["tokens_by_layer"],
        total_tokens=raw["total_tokens"],
        max_tokens=raw["max_tokens"],
        policy=raw["policy"],
        strategies=tuple(raw["strategies"]),
        trace=raw.get("trace") or {},
    )


def _no_remote_key(signing_key: bytes | str | None) -> None:
    if signing_key is not None:
        raise ValidationError(
            "signing_key",
            "a remote server verifies signatures with its own key (CTXBASE_HMAC_KEY_<PROJECT> "
            "or CTXBASE_HMAC_KEY on the server); keys are not sent over the wire",
        )


def _outcome(raw: Mapping[str, Any]) -> Outcome:
    from ..assemble.loop import Outcome

    return Outcome(
        raw["event_id"],
        [Entity.model_validate(e) for e in raw["entities"]],
        [Relation.model_validate(r) for r in raw["relations"]],
    )


def _forget_report(raw: Mapping[str, Any]) -> ForgetReport:
    return ForgetReport(
        removed=dict(raw["removed"]),
        redacted=dict(raw.get("redacted") or {}),
        caches=dict(raw.get("caches") or {}),
        not_found=list(raw.get("not_found") or []),
        already_forgotten=list(raw.get("already_forgotten") or []),
        sources_forgotten=list(raw.get("sources_forgotten") or []),
        sources_still_visible=list(raw.get("sources_still_visible") or []),
        same_text_still_visible=list(raw.get("same_text_still_visible") or []),
        repos=list(raw.get("repos") or []),
    )


def _visibility(raw: Mapping[str, Any]) -> VisibilityReport:
    return VisibilityReport(
        changed=int(raw["changed"]),
        unchanged=list(raw.get("unchanged") or []),
        not_found=list(raw.get("not_found") or []),
        already_forgotten=list(raw.get("already_forgotten") or []),
        sources_hidden=list(raw.get("sources_hidden") or []),
        sources_still_visible=list(raw.get("sources_still_visible") or []),
        same_text_still_visible=list(raw.get("same_text_still_visible") or []),
    )


def _graph_hit(raw: Mapping[str, Any]) -> GraphHit:
    via = raw.get("via")
    return GraphHit(
        raw["node_id"],
        raw["hops"],
        raw["confidence"],
        None if via is None else Relation.model_validate(via),
        raw["seed_id"],
    )


def _filters(flt: ItemFilter | None) -> dict[str, Any] | None:
    if flt is None:
        return None
    if flt.view is not None:  # the server applies its own pin (options.kb_version)
        raise ValidationError("filters.view", "is not sent: name a version with kb_version")
    raw = {k: v for k, v in asdict(flt).items() if k != "view"}
    return {k: list(v) if isinstance(v, tuple) else v for k, v in raw.items()}


class Calls(KnowledgeCalls, FeedbackCalls, FactCalls, RetentionCalls):
    """Request builders with the signatures of ContextBase's methods (the knowledge-base
    versions' in sdk_kb_calls.py, feedback's in sdk_feedback.py, facts' in sdk_facts.py,
    the compaction of archived sessions' in sdk_retention.py)."""

    def __init__(
        self,
        project: str,
        max_content_bytes: int = DEFAULT_MAX_CONTENT_BYTES,
        *,
        identity: str | None = None,
        agent_id: str | None = None,
    ) -> None:
        self.project = check_id("project", project)
        self.max_content_bytes = max_content_bytes
        # The agent of events whose caller names none (None: build_event's default).
        self.agent_id = agent_id
        # The source of edges whose caller names none (the client's agent id or key id).
        self.identity = identity_source(None, identity)

    def _pid(self, project: str | None) -> str:
        return self.project if project is None else check_id("project", project)

    def _path(self, project: str | None, *parts: str) -> str:
        return "/".join(["/v1/projects", _q(self._pid(project)), *parts])

    def _build(self, project: str | None, kwargs: Mapping[str, Any]) -> Event:
        if kwargs.get("agent_id") is None and self.agent_id is not None:
            # the client's agent, as an embedded context base's own agent id
            kwargs = {**kwargs, "agent_id": self.agent_id}
        return build_event(
            project_id=self._pid(project), max_content_bytes=self.max_content_bytes, **kwargs
        )

    # -- capture -------------------------------------------------------------------------
    def capture(
        self,
        /,
        type: str | None = None,
        *,
        session_id: str,
        text: str | bytes | None = None,
        project: str | None = None,
        **fields: Any,
    ) -> Call[str | None]:
        """Queue an event on the server; returns its id (None if dropped under backpressure).
        Takes the fields of `ContextBase.capture`, seed 001's names included; an unknown
        field is refused before anything is sent."""
        event = self._build(project, capture_fields(type, session_id, text, fields))
        path = self._path(event.project_id, "events", "queue")
        body = _event_wire(event, fields.get("idempotency_key"))
        return Call("POST", path, lambda r: r["id"], body=body, queued=True)

    def record(
        self,
        /,
        type: str | None = None,
        *,
        session_id: str,
        text: str | bytes | None = None,
        project: str | None = None,
        **fields: Any,
    ) -> Call[Event]:
        """Store an event synchronously; returns it with its seq (as sent, seq None, when
        the project forgot an event of its id: it is not written again)."""
        event = self._build(project, capture_fields(type, session_id, text, fields))
        path = self._path(event.project_id, "events")
        body = _event_wire(event, fields.get("idempotency_key"))
        return Call("POST", path, _recorded, body=body)

    def record_events(self, events: Sequence[Event]) -> Call[list[Event]]:
        """Store already-built events (one project) synchronously, in order."""
        return self._record_batch(events, lambda r: _events(r["events"]))

    def record_events_report(self, events: Sequence[Event]) -> Call[RecordReport]:
        """`record_events`, with the ids not written because the project forgot them."""
        return self._record_batch(events, _record_report)

    def _record_batch(self, events: Sequence[Event], parse: Callable[[Any], T]) -> Call[T]:
        # ids are given before sending, so the SDK's own retry of the call adds nothing
        events = with_ids(events)
        pid = events[0].project_id if events else self.project
        for i, e in enumerate(events):
            if e.project_id != pid:
                raise ValidationError(f"events[{i}].project_id", "one batch is one project")
        body = {"events": [_event_wire(e) for e in events], "wait": True}
        return Call("POST", self._path(pid, "events", "batch"), parse, body=body)

    def capture_messages(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        session_id: str,
        project: str | None = None,
        user_id: str = "user",
        assistant_id: str | None = None,
        assistant_role: str | None = None,
        task_id: str | None = None,
        sync: bool = False,
        idempotency_key: str | None = None,
        shape: MessageShape = "auto",
    ) -> Call[list[str]]:
        """The call keys itself (the caller's `idempotency_key`, else a fresh one), so the
        SDK's own retry of it adds nothing, even for a list of one message. Assistant turns
        are `assistant_id`'s, else the client's agent id, else "assistant" (as embedded).
        `shape` ("auto", "new" or "history") says what the list is, as embedded."""
        check_message_list(messages)  # as embedded, before anything is sent
        check_message_shape(shape)
        body = {
            "messages": [dict(m) if isinstance(m, Mapping) else m for m in messages],
            "session_id": session_id,
            "user_id": user_id,
            "assistant_id": assistant_id or self.agent_id,
            "assistant_role": assistant_role,
            "task_id": task_id,
            "sync": sync,
            "idempotency_key": idempotency_key or f"sdk:{uuid.uuid4().hex}",
            "shape": shape,
        }
        return Call("POST", self._path(project, "messages"), lambda r: list(r["ids"]), body=body)

    def flush(self, timeout: float | None = None, *, project: str | None = None) -> Call[None]:
        """Return once the server has stored every queued event."""
        return Call("POST", self._path(project, "flush"), _none)

    def capture_stats(self) -> Call[BusStats]:
        return Call("GET", "/v1/capture/stats", lambda r: BusStats(**r))

    # -- projects, sessions and tasks ----------------------------------------------------------
    def list_projects(self) -> Call[list[str]]:
        return Call("GET", "/v1/projects", lambda r: list(r["projects"]))

    def create_session(
        self,
        session_id: str,
        *,
        project: str | None = None,
        title: str | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> Call[SessionInfo]:
        check_id("session_id", session_id)
        body = {"title": title, "metadata": dict(metadata or {})}
        path = self._path(project, "sessions", _q(session_id, "session_id"))
        return Call("PUT", path, SessionInfo.model_validate, body=body)

    def get_session(self, session_id: str, *, project: str | None = None) -> Call[SessionInfo]:
        path = self._path(project, "sessions", _q(check_id("session_id", session_id)))
        return Call("GET", path, SessionInfo.model_validate)

    def _new_project(self, project: str | None, new_project: bool) -> dict[str, str]:
        # The client's own project lists empty before its first write, as an embedded
        # base's own does; another one with no data is the server's 404.
        own = self._pid(project) == self.project
        return {"new_project": "true"} if new_project or own else {}

    def list_sessions(
        self, *, project: str | None = None, new_project: bool = False
    ) -> Call[list[SessionInfo]]:
        path = self._path(project, "sessions")
        params = self._new_project(project, new_project)
        return Call(
            "GET", path, lambda r: [SessionInfo.model_validate(s) for s in r], params=params
        )

    def upsert_task(self, task: TaskInfo) -> Call[TaskInfo]:
        check_id("task_id", task.task_id)
        body = task.model_dump(
            mode="json", include={"session_id", "parent_task_id", "title", "status", "metadata"}
        )
        if "status" not in task.model_fields_set:
            body["status"] = None  # as embedded: the task keeps its own status
        path = self._path(task.project_id, "tasks", _q(task.task_id))
        return Call("PUT", path, TaskInfo.model_validate, body=body)

    # -- lifecycle (seed 003) ------------------------------------------------------------------
    def _move(
        self, session_id: str, action: str, project: str | None, cause: str | None
    ) -> Call[SessionInfo]:
        check_id("session_id", session_id)
        path = self._path(project, "sessions", _q(session_id, "session_id"), action)
        return Call(
            "POST",
            path,
            SessionInfo.model_validate,
            body={"cause": cause},
            moves_to=_MOVED_TO[action],
            read_back=self.get_session(session_id, project=project),
        )

    def suspend_session(
        self, session_id: str, *, project: str | None = None, cause: str = "suspend"
    ) -> Call[SessionInfo]:
        return self._move(session_id, "suspend", project, cause)

    def resume_session(
        self, session_id: str, *, project: str | None = None, cause: str = "resume"
    ) -> Call[SessionInfo]:
        return self._move(session_id, "resume", project, cause)

    def expire_session(
        self, session_id: str, *, project: str | None = None, cause: str = "expired"
    ) -> Call[SessionInfo]:
        return self._move(session_id, "expire", project, cause)

    def archive_session(
        self, session_id: str, *, project: str | None = None, cause: str = "archive"
    ) -> Call[SessionInfo]:
        return self._move(session_id, "archive", project, cause)

    def switch_task(
        self,
        session_id: str,
        goal: str = "",
        *,
        task_id: str | None = None,
        parent_task_id: str | None = None,
        background: str | None = None,
        project: str | None = None,
    ) -> Call[TaskInfo]:
        check_id("session_id", session_id)
        body = {
            "goal": goal,
            "task_id": task_id,
            "parent_task_id": parent_task_id,
            "background": background,
        }
        path = self._path(project, "sessions", _q(session_id, "session_id"), "switch-task")
        return Call("POST", path, TaskInfo.model_validate, body=body)

    def expire_message(
        self,
        session_id: str,
        message_id: str,
        *,
        project: str | None = None,
        cause: str = "retracted",
    ) -> Call[None]:
        check_id("session_id", session_id)
        path = self._path(
            project,
            "sessions",
            _q(session_id, "session_id"),
            "messages",
            _q(message_id, "message_id"),
        )
        return Call("POST", path + "/expire", _none, body={"cause": cause})

    def expire_idle_sessions(
        self,
        *,
        project: str | None = None,
        idle_timeout_s: float | None = None,
        now: float | None = None,
    ) -> Call[list[str]]:
        if now is not None:
            raise ValidationError("now", "the server expires sessions by its own clock")
        path = self._path(project, "sessions", "expire-idle")
        body = {"idle_timeout_s": idle_timeout_s}
        return Call("POST", path, lambda r: list(r["expired"]), body=body)

    def get_task(self, task_id: str, *, project: str | None = None) -> Call[TaskInfo]:
        path = self._path(project, "tasks", _q(check_id("task_id", task_id)))
        return Call("GET", path, TaskInfo.model_validate)

    def list_tasks(
        self,
        session_id: str | None = None,
        *,
        project: str | None = None,
        new_project: bool = False,
    ) -> Call[list[TaskInfo]]:
        params = self._new_project(project, new_project)
        if session_id is not None:
            params["session_id"] = check_id("session_id", session_id)
        return Call(
            "GET",
            self._path(project, "tasks"),
            lambda r: [TaskInfo.model_validate(t) for t in r],
            params=params,
        )

    # -- events and the event graph ------------------------------------------------------------
    def get_event(
        self, event_id: str, *, project: str | None = None, include_inactive: bool = False
    ) -> Call[Event]:
        if not event_id:
            raise ValidationError("event_id", "is empty")  # as the embedded API says
        params = {"include_inactive": "true"} if include_inactive else None
        path = self._path(project, "events", _q(event_id, "event_id"))
        return Call("GET", path, Event.model_validate, params=params)

    def last_events(
        self, session_id: str, n: int = 20, *, project: str | None = None
    ) -> Call[list[Event]]:
        params = {"session_id": id_arg("session_id", session_id), "n": n}
        return Call("GET", self._path(project, "events"), _events, params=params)

    def causal_chain(self, event_id: str, *, project: str | None = None) -> Call[list[Event]]:
        return Call(
            "GET", self._path(project, "events", _q(event_id, "event_id"), "causes"), _events
        )

    def effects(self, event_id: str, *, project: str | None = None) -> Call[list[Event]]:
        return Call(
            "GET", self._path(project, "events", _q(event_id, "event_id"), "effects"), _events
        )

    def neighbourhood(
        self,
        node_id: str,
        k: int = 1,
        *,
        project: str | None = None,
        types: Sequence[str] | None = None,
    ) -> Call[list[GraphHit]]:
        params: dict[str, Any] = {"node_id": node_id, "k": k}
        if types is not None:
            params["types"] = list(types)
        return Call(
            "GET",
            self._path(project, "neighbourhood"),
            lambda r: [_graph_hit(h) for h in r],
            params=params,
        )

    # -- entities and relations ------------------------------------------------------------------
    def upsert_entity(
        self,
        type: str | None = None,
        name: str | None = None,
        text: str = "",
        *,
        id: str | None = None,
        properties: Mapping[str, Any] | None = None,
        project: str | None = None,
        version: int | None = None,
        keep_history: bool = True,
        entity_type: str | None = None,
        entity_id: str | None = None,
    ) -> Call[Entity]:
        """Create or update an entity, keeping the previous version as `<id>@v<n>` (see
        ContextBase.upsert_entity); a stale `version` is a ConflictError (409)."""
        args = entity_args(
            type, name, text, id, properties, entity_type=entity_type, entity_id=entity_id
        )
        body = {
            "type": args.type,
            "name": args.name,
            "text": args.text,
            "id": args.id,
            "properties": args.properties,
            "version": version,
            "keep_history": keep_history,
        }
        return Call("POST", self._path(project, "entities"), Entity.model_validate, body=body)

    def get_entity(self, entity_id: str, *, project: str | None = None) -> Call[Entity]:
        path = self._path(project, "entities", _q(entity_id, "entity_id"))
        return Call("GET", path, Entity.model_validate)

    def list_entities(
        self,
        *,
        type: str | None = None,
        name: str | None = None,
        latest_only: bool = True,
        project: str | None = None,
        limit: int | None = None,
        repos: Sequence[str] = (),
        new_project: bool = False,
    ) -> Call[list[Entity]]:
        params: dict[str, Any] = {"latest_only": "true" if latest_only else "false"}
        params.update(self._new_project(project, new_project))
        for k, v in (("type", type), ("name", name), ("limit", limit)):
            if v is not None:
                params[k] = v
        if repos:
            params["repo"] = list(repos)
        return Call(
            "GET",
            self._path(project, "entities"),
            lambda r: [Entity.model_validate(e) for e in r],
            params=params,
        )

    def upsert_relationship(
        self,
        from_id: str | None = None,
        type: str | None = None,
        to_id: str | None = None,
        *,
        source: str | None = None,
        confidence: float | None = None,
        properties: Mapping[str, Any] | None = None,
        project: str | None = None,
        check_nodes: bool = True,
        edge_type: str | None = None,
    ) -> Call[Relation]:
        """Create or update the edge (from, type, to); never a duplicate open edge (an
        earlier confidence is kept as a closed copy, see ContextBase.upsert_relationship).
        Seed 000's spelling is accepted as by the embedded base (see ctxbase.aliases)."""
        args = edge_args(
            from_id,
            type,
            to_id,
            edge_type=edge_type,
            source=source,
            confidence=confidence,
            properties=properties,
            identity=self.identity,
        )
        body = {
            "from_id": args.from_id,
            "type": args.type,
            "to_id": args.to_id,
            "source": args.source,
            "confidence": args.confidence,
            "properties": args.properties,
            "check_nodes": check_nodes,
        }
        path = self._path(project, "relations")
        return Call("POST", path, Relation.model_validate, body=body)

    def close_relationship(
        self, relation_id: str, *, project: str | None = None, at: float | None = None
    ) -> Call[bool]:
        path = self._path(project, "relations", _q(relation_id, "relation_id"), "close")
        return Call("POST", path, lambda r: bool(r["closed"]), body={"at": at})

    def relationships(
        self,
        node_id: str | None = None,
        *,
        direction: str = "both",
        types: Sequence[str] | None = None,
        include_closed: bool = False,
        project: str | None = None,
    ) -> Call[list[Relation]]:
        params: dict[str, Any] = {
            "direction": direction,
            "include_closed": "true" if include_closed else "false",
        }
        if node_id is not None:
            params["node_id"] = node_id
        if types is not None:
            params["types"] = list(types)
        return Call(
            "GET",
            self._path(project, "relations"),
            lambda r: [Relation.model_validate(x) for x in r],
            params=params,
        )

    def embeddings_wait_step(
        self, timeout: float, project: str | None = None, all_projects: bool = False
    ) -> Call[dict[str, Any]]:
        """One server-side wait of up to `timeout` s (at most 60) for vectors; the answer
        says whether the server is done and the project's backlog (every project's with
        `all_projects`). The clients' `wait_for_embeddings` asks again until done or out of
        time (embedding_wait)."""
        params: dict[str, Any] = {"timeout": min(max(0.0, timeout), 60.0)}
        if all_projects:
            if project is not None:
                raise ValidationError("project", "give a project or all_projects=True, not both")
            params["all_projects"] = "true"
        else:
            params["project"] = self._pid(project)
        return Call("POST", "/v1/embeddings/wait", dict, params=params)

    # -- retrieval and assembly ------------------------------------------------------------------
    def search(
        self,
        /,
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
    ) -> Call[SearchResponse]:
        """Search on the server; the answer is rebuilt as the embedded SearchResponse. A
        project with no data other than the connected one is not found, as embedded."""
        _no_remote_key(signing_key)
        filters = merged_filters(filters, session_id=session_id, repos=repos)
        options = config.model_dump(mode="json") if config is not None else overrides
        body = {
            "new_project": new_project or self._pid(project) == self._pid(None),
            "query": query,
            "preset": preset,
            "filters": _filters(filters),
            "options": options,
            "require_signature": require_signature,
            "include_considered": True,  # res.considered as the embedded base fills it
        }
        return Call(
            "POST",
            self._path(project, "search"),
            lambda r: SearchResponse(
                query=r["query"],
                results=[_candidate(c) for c in r["results"]],
                considered=[_candidate(c) for c in r.get("considered", ())],
                timings_ms=dict(r["timings_ms"]),
                tampered=list(r.get("tampered", ())),
                unsigned=int(r.get("unsigned", 0)),
                pending_vectors=int(r.get("pending_vectors", 0)),
                embedder_error=r.get("embedder_error"),
                off_topic=r.get("off_topic"),
                rewrites=list(r.get("rewrites", ())),
                rewrite_error=r.get("rewrite_error"),
            ),
            body=body,
        )

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
        repos: Sequence[str] | None = None,
        strategy: str | None = None,
        new_project: bool = False,
        memory_scope: str | None = None,
        user_id: str | None = None,
    ) -> Call[AssembledContext]:
        """Seed 000's POST /v1/context/assemble; the trace comes with the answer."""
        _no_remote_key(signing_key)
        pid = self._pid(project_id)
        for field, given in (("session_id", session_id), ("task_id", task_id)):
            if given is not None:
                id_arg(field, given)  # a SessionInfo where its id goes: said as embedded
        if max_tokens is not None:  # "100" is refused as embedded, not coerced by the server
            check_max_tokens(max_tokens)
        body = {
            "project_id": pid,
            "agent_role": agent_role,
            "user_intent": user_intent,
            "session_id": session_id,
            "max_tokens": max_tokens,
            "task_id": task_id,
            "debug": debug,
            "include_trace": True,
            "require_signature": require_signature,
            "repos": None if repos is None else list(repos),
            "strategy": strategy,
            # the client's own project assembles before anything was captured into it (an
            # agent's first turn), as an embedded base's own does; another one must exist
            "new_project": new_project or pid == self._pid(None),
        }
        # sent when given: a server from before memory_scope takes the body without them
        if memory_scope is not None:
            body["memory_scope"] = memory_scope
        if user_id is not None:
            body["user_id"] = user_id
        return Call("POST", "/v1/context/assemble", _assembled, body=body)

    def get_trace(self, context_id: str, *, project: str | None = None) -> Call[dict[str, Any]]:
        params = {"project_id": self._pid(project)}
        return Call("GET", f"/v1/traces/{_q(context_id, 'context_id')}", dict, params=params)

    def record_outcome(
        self,
        context_id: str,
        answer: str,
        produced: Sequence[Any] = (),
        *,
        project: str | None = None,
        session_id: str | None = None,
        agent_role: str | None = None,
        source: str = "auto:record_outcome",
        confidence: float = 0.9,
    ) -> Call[Outcome]:
        items = [
            p.model_dump(by_alias=True) if hasattr(p, "model_dump") else dict(p) for p in produced
        ]
        body = {
            "answer": answer,
            "produced": items,
            "session_id": session_id,
            "agent_role": agent_role,
            "source": source,
            "confidence": confidence,
        }
        path = self._path(project, "contexts", _q(context_id, "context_id"), "outcome")
        return Call("POST", path, _outcome, body=body)

    # -- forget ----------------------------------------------------------------------------------
    def soft_delete(self, ids: Sequence[str], *, project: str | None = None) -> Call[int]:
        check_id_list("ids", ids)  # as embedded: one string is no list of its characters
        path = self._path(project, "soft-delete")
        return Call("POST", path, lambda r: int(r["changed"]), body={"ids": list(ids)})

    def restore(self, ids: Sequence[str], *, project: str | None = None) -> Call[int]:
        check_id_list("ids", ids)
        path = self._path(project, "restore")
        return Call("POST", path, lambda r: int(r["changed"]), body={"ids": list(ids)})

    def set_hidden(
        self, ids: Sequence[str], hidden: bool = True, *, project: str | None = None
    ) -> Call[VisibilityReport]:
        check_id_list("ids", ids)
        path = self._path(project, "soft-delete" if hidden else "restore")
        return Call("POST", path, _visibility, body={"ids": list(ids)})

    def forget(
        self,
        *,
        event_ids: Sequence[str] = (),
        entity_ids: Sequence[str] = (),
        session_id: str | None = None,
        whole_project: bool = False,
        soft_deleted_older_than: float | timedelta | str | None = None,
        project: str | None = None,
        repo: str | None = None,
        repos: Sequence[str] = (),
    ) -> Call[ForgetReport]:
        names = check_forget_named(
            event_ids, entity_ids, session_id, whole_project, soft_deleted_older_than, repo, repos
        )
        older = (
            None if soft_deleted_older_than is None else retention_seconds(soft_deleted_older_than)
        )
        body = {
            "event_ids": list(event_ids),
            "entity_ids": list(entity_ids),
            "session_id": session_id,
            "repos": names,
            "whole_project": whole_project,
            "soft_deleted_older_than_s": older,
        }
        return Call("POST", self._path(project, "forget"), _forget_report, body=body)

    def purge_soft_deleted(
        self,
        older_than: float | timedelta | str,
        *,
        project: str | None = None,
        all_projects: bool = False,
    ) -> Call[ForgetReport]:
        """Hard forget what was soft-deleted more than `older_than` ago, in one project
        (`all_projects` is refused by name: a request names one project)."""
        if all_projects:
            from .sdk_retention import every_project_refused

            raise every_project_refused(
                "forget --soft-deleted-older-than 30d --all-projects", "--soft-delete-retention 30d"
            )
        return self.forget(soft_deleted_older_than=older_than, project=project)
