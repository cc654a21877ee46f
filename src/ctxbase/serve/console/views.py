"""What the web console shows, read from one project: a page of a session's timeline, the
causal chain of an event both ways, the entity graph (or one node's neighbourhood), the
list of assembled contexts, one context's trace (with its dropped items' texts) and the
diff of two.

Each function is a few store reads through the ContextBase and returns a response model;
the routes (api.py) only check access and pass the arguments on.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict
from typing import Any

from pydantic import BaseModel, ConfigDict

from ...assemble.diff import diff_as_json
from ...assemble.trace import diff_contexts, mask_hidden
from ...contextbase import ContextBase
from ...errors import NotFoundError
from ...model import Entity, Event, Relation, SessionInfo
from ...retrieve import causes, graph
from ...retrieve.retracted import event_marks

__all__ = [
    "ChainNode",
    "ChainOut",
    "ContextSummaryOut",
    "ContextsOut",
    "EventCountOut",
    "GraphEdgeOut",
    "GraphNodeOut",
    "GraphOut",
    "TimelineOut",
    "causal_chain",
    "context_diff",
    "contexts",
    "entity_graph",
    "timeline",
    "trace",
]

# Edges of the event graph itself (order and causes): the causal chain view draws those.
_EVENT_EDGES = frozenset({"NEXT", "CAUSED_BY", "REFERS_TO"})
_SHORT = 240  # characters of a node's text sent for its label and tooltip


class _Out(BaseModel):
    model_config = ConfigDict(frozen=True)


class EventCountOut(_Out):
    agent_id: str
    type: str
    count: int
    first_ts: float
    last_ts: float


class TimelineOut(_Out):
    session: SessionInfo
    events: list[Event]
    total: int  # events of the session that the filters admit
    counts: list[EventCountOut]  # the whole session, by agent and type (for the filters)
    hidden: int  # events of the session hidden (soft-deleted): in no count, page or total
    # the page's events that are retracted ("retracted"; a per-turn tool result of an
    # earlier turn: "expired") or rated false ("wrong"), by id; the others are not listed
    marks: dict[str, list[str]]
    has_before: bool
    has_after: bool


class ChainNode(_Out):
    event: Event
    hops: int


class ChainOut(_Out):
    event: Event
    causes: list[ChainNode]  # upstream, nearest first
    effects: list[ChainNode]  # downstream, nearest first
    truncated: bool


class GraphNodeOut(_Out):
    id: str
    kind: str  # "entity" | "event" | "missing"
    type: str
    name: str
    text: str


class GraphEdgeOut(_Out):
    id: str
    from_id: str
    to_id: str
    type: str
    confidence: float
    source: str


class GraphOut(_Out):
    nodes: list[GraphNodeOut]
    edges: list[GraphEdgeOut]
    entity_types: dict[str, int]  # every active entity of the project, by type
    relation_types: dict[str, int]  # relations among the nodes shown, before the type filter
    truncated: bool


class ContextSummaryOut(_Out):
    context_id: str
    created_at: float
    agent_role: str | None
    session_id: str | None
    task_id: str | None
    intent: str | None
    policy: str | None
    total_tokens: int | None


class ContextsOut(_Out):
    contexts: list[ContextSummaryOut]
    next_before: float | None  # pass as `before` for the next (older) page


def _short(text: str | None) -> str:
    flat = " ".join((text or "").split())
    return flat if len(flat) <= _SHORT else flat[: _SHORT - 1] + "…"


# -- timeline ------------------------------------------------------------------------------
def timeline(
    cb: ContextBase,
    pid: str,
    session_id: str,
    *,
    after_seq: int | None,
    before_seq: int | None,
    limit: int,
    agents: Sequence[str] | None,
    types: Sequence[str] | None,
) -> TimelineOut:
    """One page of a session's events (seq order) with the counts its filters offer."""
    session = cb.get_session(session_id, project=pid)  # NotFoundError for an unknown one
    store = cb.store
    flt: dict[str, Any] = {"agent_ids": agents or None, "types": types or None}
    events = store.event_page(
        pid, session_id, after_seq=after_seq, before_seq=before_seq, limit=limit, **flt
    )
    counts = store.event_counts(pid, session_id)
    total = sum(
        c.count
        for c in counts
        if (not agents or c.agent_id in agents) and (not types or c.type in types)
    )
    has_before = has_after = False
    if events:
        first, last = events[0].seq, events[-1].seq
        has_before = bool(store.event_page(pid, session_id, before_seq=first, limit=1, **flt))
        has_after = bool(store.event_page(pid, session_id, after_seq=last, limit=1, **flt))
    marks = event_marks(store, pid, events)
    return TimelineOut(
        session=session,
        events=[
            e.model_copy(update={"marks": marks[e.id]}) if e.id in marks else e for e in events
        ],
        total=total,
        counts=[EventCountOut(**asdict(c)) for c in counts],
        hidden=store.hidden_event_counts(pid, [session_id]).get(session_id, 0),
        marks=marks,
        has_before=has_before,
        has_after=has_after,
    )


# -- causal chain --------------------------------------------------------------------------
def causal_chain(cb: ContextBase, pid: str, event_id: str, *, depth: int, limit: int) -> ChainOut:
    """The event, what caused it and what it caused, up to `depth` hops and `limit` events
    each way (nearest first); a hidden cause or effect is a placeholder marked "hidden" and
    the events beyond it are shown (retrieve/causes.py)."""
    try:
        event = cb.get_event(event_id, project=pid)
    except NotFoundError:
        causes.check_chain_root(cb.store, pid, event_id)  # says when it is hidden
        raise
    # One node more than shown: a walk that reaches it was cut short.
    up = causes.causes_with_hops(cb.store, pid, event, max_hops=depth, max_nodes=limit + 2)
    down = causes.effects_with_hops(cb.store, pid, event, max_hops=depth, max_nodes=limit + 2)
    return ChainOut(
        event=event,
        causes=[ChainNode(event=e, hops=hops) for e, hops in up[:limit]],
        effects=[ChainNode(event=e, hops=hops) for e, hops in down[:limit]],
        truncated=len(up) > limit or len(down) > limit,
    )


# -- entity graph --------------------------------------------------------------------------
def _entity_node(e: Entity) -> GraphNodeOut:
    return GraphNodeOut(id=e.id, kind="entity", type=e.type, name=e.name, text=_short(e.text))


def _event_node(e: Event) -> GraphNodeOut:
    name = f"{e.agent_id} #{e.seq}" if e.seq is not None else e.agent_id
    return GraphNodeOut(id=e.id, kind="event", type=e.type, name=name, text=_short(e.text))


def _edge(r: Relation) -> GraphEdgeOut:
    return GraphEdgeOut(
        id=r.id,
        from_id=r.from_id,
        to_id=r.to_id,
        type=r.type,
        confidence=r.confidence,
        source=r.source,
    )


def entity_graph(
    cb: ContextBase,
    pid: str,
    *,
    entity_types: Sequence[str] | None,
    relation_types: Sequence[str] | None,
    limit: int,
    focus: str | None,
    hops: int,
    include_events: bool,
) -> GraphOut:
    """Entities (of the given types) and the typed relations among them; with `focus`, the
    nodes within `hops` of that node instead. Event-graph edges (NEXT, CAUSED_BY) are the
    causal chain's, not shown here; events appear only with `include_events`."""
    store = cb.store
    wanted = set(entity_types or ())
    truncated = False
    if focus is not None:
        hits = graph.neighbourhood(store, pid, focus, hops)
        ids = [focus, *(h.node_id for h in hits if h.via is None or h.via.type not in _EVENT_EDGES)]
        if len(ids) > limit:
            ids, truncated = ids[:limit], True
        entities = store.get_entities(pid, ids)
    else:
        if wanted:
            entities = []
            for t in sorted(wanted):
                entities += store.list_entities(pid, type=t, limit=limit + 1)
        else:
            entities = store.list_entities(pid, limit=limit + 1)
        if len(entities) > limit:
            entities, truncated = entities[:limit], True
        ids = [e.id for e in entities]
    nodes: dict[str, GraphNodeOut] = {
        e.id: _entity_node(e) for e in entities if not wanted or e.type in wanted or e.id == focus
    }
    wide = include_events or focus is not None
    # Edges between entities leave an entity: reading only those keeps the many MENTIONS
    # edges from events to a popular entity out of a view that does not show events.
    direction = "both" if wide else "out"
    rels = [
        r for r in store.list_relations(pid, ids, direction=direction) if r.type not in _EVENT_EDGES
    ]
    if wide:
        # the other ends that are events (MENTIONS, GENERATES ...), as event nodes
        missing = [x for r in rels for x in (r.from_id, r.to_id) if x not in nodes]
        room = max(0, limit - len(nodes))
        extra = list(dict.fromkeys(missing))
        if len(extra) > room:
            extra, truncated = extra[:room], True
        for ev in store.get_events(pid, extra):
            nodes[ev.id] = _event_node(ev)
        if focus is not None and focus not in nodes:
            nodes[focus] = _focus_node(cb, pid, focus)
    rels = [r for r in rels if r.from_id in nodes and r.to_id in nodes]
    relation_counts = dict(sorted(Counter(r.type for r in rels).items()))
    if relation_types:
        rels = [r for r in rels if r.type in relation_types]
    # a node kept only for an edge of a type now filtered out stays: it is still in the view
    return GraphOut(
        nodes=list(nodes.values()),
        edges=[_edge(r) for r in rels],
        entity_types=store.entity_type_counts(pid),
        relation_types=relation_counts,
        truncated=truncated,
    )


def _focus_node(cb: ContextBase, pid: str, focus: str) -> GraphNodeOut:
    """The focus as a node when no edge brought it: an event, or an entity (`kind:...`
    ids) with the entity's own not-found (hidden, forgotten), not an event's."""
    if ":" in focus:
        try:
            return _entity_node(cb.get_entity(focus, project=pid))
        except NotFoundError as exc:
            if str(exc) == f"entity {focus!r} not found":  # neither hidden nor forgotten
                try:
                    return _event_node(cb.get_event(focus, project=pid))
                except NotFoundError:
                    pass
            raise exc from None
    try:
        return _event_node(cb.get_event(focus, project=pid))
    except NotFoundError as exc:
        if str(exc) != f"event {focus!r} not found":  # hidden or forgotten: as it says
            raise
        try:  # an entity named by an id of its own making
            return _entity_node(cb.get_entity(focus, project=pid))
        except NotFoundError:
            pass
        # a graph node is an event or an entity: the error names both
        message = f"no event or entity {focus!r} in project {pid!r}"
        raise NotFoundError("node", focus, message=message) from None


# -- assembled contexts --------------------------------------------------------------------
def contexts(
    cb: ContextBase, pid: str, *, session_id: str | None, before: float | None, limit: int
) -> ContextsOut:
    """Assembled contexts, newest first, a page at a time."""
    found = cb.store.list_traces(pid, session_id=session_id, before=before, limit=limit + 1)
    more = len(found) > limit
    found = found[:limit]
    return ContextsOut(
        contexts=[ContextSummaryOut(**asdict(t)) for t in found],
        next_before=found[-1].created_at if more and found else None,
    )


def trace(cb: ContextBase, pid: str, context_id: str) -> dict[str, Any]:
    """The stored trace of an assembly (as GET /v1/traces) with a short `text` for each
    dropped event or entity, read from the store: a drop records only its id, reason and
    detail. Texts are added before what is hidden now is masked, so a hidden item's text
    shows as `[hidden]` like the rest of its entry."""
    found = cb.store.get_trace(pid, context_id)
    if found is None:
        raise NotFoundError("context", context_id)
    dropped = [d for d in found.get("dropped", ()) if isinstance(d, dict)]
    ids = list(dict.fromkeys(str(d.get("id")) for d in dropped if d.get("id")))
    texts: dict[str, str] = {}
    if ids:
        store = cb.store
        texts.update(
            (e.id, e.text) for e in store.get_events(pid, ids, include_inactive=True) if e.text
        )
        texts.update(
            (e.id, f"{e.name}: {e.text}" if e.text else e.name)
            for e in store.get_entities(pid, ids, include_inactive=True)
        )
    with_texts = {
        **found,
        "dropped": [
            {**d, "text": _short(texts[str(d.get("id"))])} if str(d.get("id")) in texts else d
            for d in found.get("dropped", ())
        ],
    }
    return mask_hidden(cb.store, pid, with_texts)


def context_diff(cb: ContextBase, pid: str, before_id: str, after_id: str) -> dict[str, Any]:
    """The diff of two stored assemblies (assemble.diff.TraceDiff) as JSON."""
    return diff_as_json(diff_contexts(cb, before_id, after_id, project=pid))
