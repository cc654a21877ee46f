"""Entities, relations, graph neighbourhoods, feedback on memories, and forgetting, in one
project."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Path, Query

from ..aliases import edge_args, identity_source
from ..errors import ValidationError
from ..knowledge_graph import MAX_NEIGHBOURHOOD_HOPS
from ..memory_feedback import Feedback
from ..model import Entity, Relation
from ..validation import either
from .deps import Caller, HardForgetProject, KnownProject, ReadProject, Rt, WriteProject
from .schemas import (
    ChangedOut,
    ClosedOut,
    CloseRelationIn,
    EntityIn,
    FeedbackIn,
    FeedbackOut,
    ForgetIn,
    ForgetOut,
    GraphHitOut,
    IdsIn,
    RelationIn,
)

__all__ = ["router"]

router = APIRouter(prefix="/v1/projects/{project_id}")

# no length bound: a node id longer than any stored is not found (or has no relations),
# as embedded answers
NodeId = Annotated[str, Query(min_length=1)]


# -- entities ------------------------------------------------------------------------------
@router.post("/entities", response_model=Entity, tags=["entities"])
def upsert_entity(pid: WriteProject, body: EntityIn, rt: Rt) -> Entity:
    """Create or update a typed entity (document, code, sql, requirement, ...). Changed
    content raises the version and keeps the previous one as `<id>@v<n>`; a `version`
    older than the stored one (or equal, with other content) is 409 naming it."""
    return rt.cb.upsert_entity(
        body.type,
        body.name,
        body.text,
        id=body.id,
        properties=body.properties,
        project=pid,
        version=body.version,
        keep_history=body.keep_history,
        entity_type=body.entity_type,
        entity_id=body.entity_id,
    )


@router.get("/entities", response_model=list[Entity], tags=["entities"])
def list_entities(
    pid: KnownProject,
    rt: Rt,
    type: str | None = None,
    name: str | None = None,
    latest_only: bool = True,
    limit: Annotated[int | None, Query(ge=1, le=10_000)] = None,
    repo: Annotated[list[str] | None, Query(max_length=100)] = None,
) -> list[Entity]:
    """Active entities by type and name; `repo` (repeatable) keeps those of these
    ingested repositories. A project with no data is a 404 unless `new_project=true`."""
    return rt.cb.list_entities(
        type=type,
        name=name,
        latest_only=latest_only,
        project=pid,
        limit=limit,
        repos=repo or (),
        new_project=True,  # checked by KnownProject, naming only the projects the key sees
    )


@router.get("/entities/{entity_id:path}", response_model=Entity, tags=["entities"])
def get_entity(pid: ReadProject, entity_id: str, rt: Rt) -> Entity:
    return rt.cb.get_entity(entity_id, project=pid)


# -- relations -----------------------------------------------------------------------------
@router.post("/relations", response_model=Relation, tags=["relations"])
def upsert_relationship(pid: WriteProject, body: RelationIn, rt: Rt, who: Caller) -> Relation:
    """Create or update the edge (from, type, to); never a duplicate open edge (seed 000's
    create_edge / upsert_relationship). Another confidence, source or properties keeps the
    earlier assertion as a closed copy `<relation id>@<n>`. Without a source (nor one in
    `properties`) the API key's identity is the source."""
    args = edge_args(
        body.from_id,
        body.type,
        body.to_id,
        edge_type=body.edge_type,
        source=body.source,
        confidence=body.confidence,
        properties=body.properties,
        identity=identity_source(None, None if who.key_id is None else f"key:{who.key_id}"),
    )
    return rt.cb.upsert_relationship(
        args.from_id,
        args.type,
        args.to_id,
        source=args.source,
        confidence=args.confidence,
        properties=args.properties,
        project=pid,
        check_nodes=body.check_nodes,
    )


@router.get("/relations", response_model=list[Relation], tags=["relations"])
def relationships(
    pid: ReadProject,
    rt: Rt,
    node_id: str | None = None,
    direction: Literal["out", "in", "both"] = "both",
    types: Annotated[list[str] | None, Query()] = None,
    include_closed: bool = False,
) -> list[Relation]:
    return rt.cb.relationships(
        node_id, direction=direction, types=types, include_closed=include_closed, project=pid
    )


@router.post("/relations/{relation_id:path}/close", response_model=ClosedOut, tags=["relations"])
def close_relationship(
    pid: WriteProject,
    relation_id: Annotated[str, Path(min_length=1)],
    body: CloseRelationIn,
    rt: Rt,
) -> ClosedOut:
    """Mark a relation as superseded: it is kept, with its validity closed."""
    return ClosedOut(closed=rt.cb.close_relationship(relation_id, project=pid, at=body.at))


@router.get("/neighbourhood", response_model=list[GraphHitOut], tags=["relations"])
def neighbourhood(
    pid: ReadProject,
    rt: Rt,
    node_id: NodeId,
    k: Annotated[int | None, Query(ge=0, le=MAX_NEIGHBOURHOOD_HOPS, description="hops (1)")] = None,
    types: Annotated[list[str] | None, Query()] = None,
    depth: Annotated[
        int | None, Query(ge=0, le=MAX_NEIGHBOURHOOD_HOPS, description="another name for k")
    ] = None,
) -> list[GraphHitOut]:
    """Nodes within k hops of a node, with the edge that reached each; 404 when the
    project has no such node."""
    hops = either("k", k, "depth", depth)
    hits = rt.cb.neighbourhood(node_id, 1 if hops is None else hops, project=pid, types=types)
    return [
        GraphHitOut(
            node_id=h.node_id,
            hops=h.hops,
            confidence=h.confidence,
            via=None if h.via is None else h.via.model_dump(mode="json"),
            seed_id=h.seed_id,
        )
        for h in hits
    ]


# -- feedback ------------------------------------------------------------------------------
@router.post("/feedback", response_model=Feedback, tags=["feedback"])
def give_feedback(pid: WriteProject, body: FeedbackIn, rt: Rt, who: Caller) -> Feedback:
    """Mark a memory (event, entity, or a search unit of one) liked, helpful, disliked,
    wrong or neutral: its confidence, which search ranking uses. 404 when the project
    holds no such node or `context_id`. `by` defaults to the API key's identity."""
    by = body.by or (None if who.key_id is None else identity_source(None, f"key:{who.key_id}"))
    return rt.cb.feedback(
        body.node_id,
        body.label,
        confidence=body.confidence,
        context_id=body.context_id,
        note=body.note,
        by=by,
        project=pid,
    )


@router.get("/feedback/{node_id:path}", response_model=FeedbackOut, tags=["feedback"])
def read_feedback(pid: ReadProject, node_id: str, rt: Rt) -> FeedbackOut:
    """The current feedback on a node (null: none) and every feedback given on it."""
    return FeedbackOut(
        current=rt.cb.get_feedback(node_id, project=pid),
        history=rt.cb.feedback_history(node_id, project=pid),
    )


# -- forget --------------------------------------------------------------------------------
@router.post("/soft-delete", response_model=ChangedOut, tags=["forget"])
def soft_delete(pid: WriteProject, body: IdsIn, rt: Rt) -> ChangedOut:
    """Hide events or entities from every read; /restore brings them back. `changed`
    counts the rows hidden, `unchanged` names the ids hidden already, `already_forgotten`
    those hard-forgotten before (no error: nothing left to hide), `not_found` those the
    project does not hold (404 when that is every id)."""
    return ChangedOut(**rt.cb.set_hidden(body.ids, True, project=pid).as_dict())


@router.post("/restore", response_model=ChangedOut, tags=["forget"])
def restore(pid: WriteProject, body: IdsIn, rt: Rt) -> ChangedOut:
    """Bring back what /soft-delete hid; the answer is /soft-delete's."""
    return ChangedOut(**rt.cb.set_hidden(body.ids, False, project=pid).as_dict())


@router.post("/forget", response_model=ForgetOut, tags=["forget"])
def forget(pid: HardForgetProject, body: ForgetIn, rt: Rt) -> ForgetOut:
    """Hard forget (admin keys): every stored copy is removed, or redacted in other
    sessions' traces; `soft_deleted_older_than_s` forgets what was soft-deleted longer ago,
    `repos` ingested repositories whole (404 naming the project's repositories when one
    is neither among them nor forgotten before, nothing done).
    The report counts rows removed and redacted per table and cache entries dropped, and
    names in `not_found` the ids (and session) it named that the project does not hold
    and in `already_forgotten` the events, entities, session and repositories it forgot
    before (no error, so a retry after a lost answer is a 200); 404 when every one named is unknown
    (and neither whole_project nor a purge was asked)."""
    # Before and after: an assembly racing with the forget must not stay cached.
    if body.model_dump(exclude_defaults=True) == {}:  # as the library says it, in REST's names
        raise ValidationError(
            "forget",
            "name event_ids, entity_ids, session_id, repos, soft_deleted_older_than_s or "
            "whole_project: true",
        )
    cached = rt.cache.invalidate(pid)
    fields = body.model_dump()
    older = fields.pop("soft_deleted_older_than_s")
    report = rt.cb.forget(project=pid, soft_deleted_older_than=older, **fields)
    report.add_cache("assemble_cache", cached + rt.cache.invalidate(pid))
    return ForgetOut(**report.as_dict())
