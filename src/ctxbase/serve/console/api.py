"""The read endpoints the web console needs beyond the rest of the API: a paged session
timeline, an event's causal chain both ways, the entity graph, the list of assembled
contexts, one context's trace with its dropped items' texts, and the diff of two. Same
keys and project checks as every other route."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Path, Query

from ..deps import KnownProject, ReadProject, Rt
from . import views

__all__ = ["router"]

router = APIRouter(prefix="/v1/projects/{project_id}", tags=["console"])

Id = Annotated[str, Query(min_length=1, max_length=200)]
Names = Annotated[list[Annotated[str, Query(min_length=1, max_length=200)]] | None, Query()]
Seq = Annotated[int | None, Query(ge=0, le=2**62)]


@router.get("/timeline", response_model=views.TimelineOut)
def timeline(
    pid: KnownProject,  # an unknown project is named as such, not as a missing session
    rt: Rt,
    session_id: Id,
    after_seq: Seq = None,
    before_seq: Seq = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    agent: Names = None,
    type: Names = None,
) -> views.TimelineOut:
    """A page of a session's events in order (after `after_seq`, else the last before
    `before_seq`, else the first), filtered by agent and type, with counts by both."""
    return views.timeline(
        rt.cb,
        pid,
        session_id,
        after_seq=after_seq,
        before_seq=before_seq,
        limit=limit,
        agents=agent,
        types=type,
    )


@router.get("/events/{event_id:path}/chain", response_model=views.ChainOut)
def causal_chain(
    pid: ReadProject,
    rt: Rt,
    event_id: Annotated[str, Path(min_length=1)],
    depth: Annotated[int, Query(ge=1, le=50)] = 10,
    limit: Annotated[int, Query(ge=1, le=500)] = 100,
) -> views.ChainOut:
    """The event with its causes (up) and effects (down), nearest first."""
    return views.causal_chain(rt.cb, pid, event_id, depth=depth, limit=limit)


@router.get("/graph", response_model=views.GraphOut)
def entity_graph(
    pid: KnownProject,
    rt: Rt,
    entity_type: Names = None,
    relation_type: Names = None,
    limit: Annotated[int, Query(ge=1, le=2000)] = 300,
    focus: Annotated[str | None, Query(min_length=1, max_length=200)] = None,
    hops: Annotated[int, Query(ge=1, le=3)] = 1,
    include_events: bool = False,
) -> views.GraphOut:
    """Typed entities and the typed relations among them (confidence, source); `focus`
    narrows to one node's neighbourhood."""
    return views.entity_graph(
        rt.cb,
        pid,
        entity_types=entity_type,
        relation_types=relation_type,
        limit=limit,
        focus=focus,
        hops=hops,
        include_events=include_events,
    )


@router.get("/contexts", response_model=views.ContextsOut)
def contexts(
    pid: KnownProject,
    rt: Rt,
    session_id: Annotated[str | None, Query(min_length=1, max_length=200)] = None,
    before: Annotated[float | None, Query(allow_inf_nan=False)] = None,
    limit: Annotated[int, Query(ge=1, le=500)] = 50,
) -> views.ContextsOut:
    """Assembled contexts, newest first (their traces: GET /v1/traces/{context_id})."""
    return views.contexts(rt.cb, pid, session_id=session_id, before=before, limit=limit)


@router.get("/contexts/diff", response_model=dict[str, Any])
def context_diff(pid: ReadProject, rt: Rt, before_id: Id, after_id: Id) -> dict[str, Any]:
    """What changed from one assembled context to another: items added, removed and moved,
    score changes, tokens per layer, drops, and the unified diff of the prompts."""
    return views.context_diff(rt.cb, pid, before_id, after_id)


@router.get("/contexts/{context_id}", response_model=dict[str, Any])
def context_trace(
    pid: ReadProject, rt: Rt, context_id: Annotated[str, Path(min_length=1)]
) -> dict[str, Any]:
    """An assembly's trace (as GET /v1/traces/{context_id}) with a short text of each
    dropped event or entity; what is hidden now shows as `[hidden]`."""
    return views.trace(rt.cb, pid, context_id)
