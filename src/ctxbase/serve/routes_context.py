"""Search, assembled context (seed 000's POST /context/assemble), traces, outcomes, state."""

from __future__ import annotations

from dataclasses import asdict
from typing import Annotated, Any

from fastapi import APIRouter, Query, Response
from starlette.concurrency import run_in_threadpool

from ..assemble import state as facts
from ..errors import NotFoundError, ValidationError
from ..model import StateFact
from ..retrieve.config import get_preset
from ..retrieve.search import Candidate
from ..store.base import ItemFilter
from ..validation import check_query
from .assembly import assembly_key, check_server_key, compute_assembly
from .auth import Principal
from .cache import Cached
from .deps import Caller, ReadProject, Rt, WriteProject, require_project
from .schemas import (
    AssembleIn,
    AssembleOut,
    DeletedOut,
    OutcomeIn,
    OutcomeOut,
    RollbackIn,
    RollbackOut,
    Scope,
    SearchHitOut,
    SearchIn,
    SearchItemOut,
    SearchOut,
    StateChangeOut,
    StateSetIn,
)

__all__ = ["router"]

router = APIRouter()


ScopeId = Annotated[str, Query(min_length=1, max_length=200)]
Key = Annotated[str, Query(min_length=1, max_length=200)]


# -- search --------------------------------------------------------------------------------
@router.post("/v1/projects/{project_id}/search", response_model=SearchOut, tags=["search"])
def search(pid: ReadProject, body: SearchIn, who: Caller, rt: Rt) -> SearchOut:
    """Hybrid search (keyword, semantic, graph) after structured filters. A project with no
    data is a typo (404 naming the projects the key sees) unless `new_project`."""
    flt = None
    if body.filters is not None:
        raw: dict[str, Any] = {
            k: tuple(v) if isinstance(v, list) else v for k, v in body.filters.model_dump().items()
        }
        flt = ItemFilter(**raw)
    try:
        config = get_preset(body.preset, **body.options.overrides())
    except ValidationError as exc:  # a bad option is named as the request names it
        if exc.field == "preset":
            raise
        field = "options" if exc.field == "config" else f"options.{exc.field}"
        raise ValidationError(field, exc.message) from exc
    if not body.new_project:  # after the request's own checks, as embedded
        check_query(body.query, flt)
        require_project(rt, who, pid)
    check_server_key(pid, body.require_signature)
    response = rt.cb.search(
        body.query,
        project=pid,
        config=config,
        filters=flt,
        require_signature=body.require_signature,
        new_project=True,  # checked above, naming only the projects this key sees
    )
    return SearchOut(
        query=response.query,
        results=[_hit(c) for c in response.results],
        considered=[_hit(c) for c in response.considered] if body.include_considered else [],
        timings_ms=response.timings_ms,
        tampered=response.tampered,
        unsigned=response.unsigned,
        pending_vectors=response.pending_vectors,
        embedder_error=response.embedder_error,
        off_topic=response.off_topic,
        rewrites=response.rewrites,
        rewrite_error=response.rewrite_error,
    )


def _hit(c: Candidate) -> SearchHitOut:
    return SearchHitOut(
        item=SearchItemOut(**asdict(c.item)),
        score=c.score,
        keyword_rank=c.keyword_rank,
        keyword_score=c.keyword_score,
        semantic_rank=c.semantic_rank,
        similarity=c.similarity,
        graph_via=c.graph_via,
        graph_confidence=c.graph_confidence,
        dropped=c.dropped,
        confidence=c.confidence,
        confidence_source=c.confidence_source,
        correction=c.correction,
        decay=c.decay,
        decay_spared=c.decay_spared,
        retracted=c.retracted,
        expired=c.expired,
        recency=c.recency,
        reordered=c.reordered,
        duplicates=list(c.duplicates),
    )


# -- assembly and traces -------------------------------------------------------------------
@router.post(
    "/v1/context/assemble",
    response_model=AssembleOut,
    tags=["context"],
    responses={200: {"headers": {"X-Context-ID": {"description": "the context id"}}}},
)
# Seed 000 writes the path without the version prefix; the same route answers it.
@router.post(
    "/context/assemble",
    response_model=AssembleOut,
    tags=["context"],
    responses={200: {"headers": {"X-Context-ID": {"description": "the context id"}}}},
)
async def assemble(body: AssembleIn, who: Caller, rt: Rt) -> Response:
    """The context for one agent turn: messages, documents, code snippets, relationships
    and the context_id to fetch its trace with (GET /v1/traces/{context_id})."""
    pid = body.project_id
    if pid is None:
        pid = _key_project(who)
        body = body.model_copy(update={"project_id": pid})
    who.check(pid, "read")

    def lookup() -> tuple[Cached, bool]:
        if not body.new_project:
            require_project(rt, who, pid)
        key = assembly_key(body, rt.cb.store.index_generation(pid))
        return rt.cache.get_or_compute(pid, key, lambda: compute_assembly(rt, body))

    # Reached on a miss, or when AssembleShortcut could not check everything in memory.
    found = None
    # The one-row generation read runs on the event loop only where it cannot wait.
    if rt.cache.enabled and rt.cb.store.reads_never_wait:
        key = assembly_key(body, rt.cb.store.index_generation(pid))
        found = rt.cache.lookup(pid, key, lambda: compute_assembly(rt, body))
    if found is not None:
        cached, hit = found, True
        rt.cache.count_hit()
    else:
        # Store reads that may wait (another database, a miss that assembles, an assembly
        # in flight to wait for) stay off the event loop, in one threadpool trip.
        cached, hit = await run_in_threadpool(lookup)
    rt.metrics.inc("ctxbase_assemble_cache_hits_total" if hit else "ctxbase_assemble_total")
    return Response(
        cached.body, media_type="application/json", headers={"X-Context-ID": cached.context_id}
    )


def _key_project(who: Principal) -> str:
    """The project an assembly without `project_id` is for: the key's, when it has one."""
    if who.projects is not None and len(who.projects) == 1:
        return next(iter(who.projects))
    seen = "every project" if who.projects is None else f"{len(who.projects)} projects"
    raise ValidationError("project_id", f"is missing (this key is for {seen}: name one)")


@router.get("/v1/traces/{context_id:path}", response_model=dict[str, Any], tags=["context"])
def get_trace(
    context_id: str,
    who: Caller,
    rt: Rt,
    project_id: Annotated[str | None, Query(max_length=200)] = None,
) -> dict[str, Any]:
    """The stored trace of an assembly: policy, candidates, inclusions, drops, tokens.

    Without `project_id` the projects this key can see are searched."""
    if project_id is not None:
        who.check(project_id, "read")
        return rt.cb.get_trace(context_id, project=project_id)
    pid = rt.cb.store.trace_project(context_id)
    if pid is not None and (who.projects is None or pid in who.projects):
        return rt.cb.get_trace(context_id, project=pid)  # soft-deleted items masked
    raise NotFoundError("context", context_id)


@router.post(
    "/v1/projects/{project_id}/contexts/{context_id}/outcome",
    response_model=OutcomeOut,
    tags=["context"],
)
def record_outcome(pid: WriteProject, context_id: str, body: OutcomeIn, rt: Rt) -> OutcomeOut:
    """Close the loop: store the model's answer and link what it produced to the context."""
    args = body.model_dump(exclude={"answer", "produced"})
    produced = [p.model_dump(by_alias=True) for p in body.produced]
    outcome = rt.cb.record_outcome(context_id, body.answer, produced, project=pid, **args)
    return OutcomeOut(
        event_id=outcome.event_id,
        entities=[e.model_dump(mode="json") for e in outcome.entities],
        relations=[r.model_dump(mode="json") for r in outcome.relations],
    )


# -- state ---------------------------------------------------------------------------------
@router.get("/v1/projects/{project_id}/state", response_model=dict[str, StateFact], tags=["state"])
def get_state(
    pid: ReadProject, rt: Rt, scope_id: ScopeId, scope: Scope = "task"
) -> dict[str, StateFact]:
    """The current facts of one scope, by key."""
    return facts.get_facts(rt.cb, scope_id=scope_id, scope=scope, project=pid)


@router.put("/v1/projects/{project_id}/state", response_model=StateFact, tags=["state"])
def set_state(
    pid: WriteProject, rt: Rt, key: Key, scope_id: ScopeId, body: StateSetIn, scope: Scope = "task"
) -> StateFact:
    """Write one fact: a new version, with the old value kept in the history."""
    facts.check_scope_open(rt.cb, scope, scope_id, pid)
    return facts.set_fact(
        rt.cb,
        key,
        body.value,
        scope_id=scope_id,
        scope=scope,
        cause=body.cause,
        project=pid,
        ttl=body.ttl,
    )


@router.delete("/v1/projects/{project_id}/state", response_model=DeletedOut, tags=["state"])
def delete_state(
    pid: WriteProject,
    rt: Rt,
    key: Key,
    scope_id: ScopeId,
    who: Caller,
    scope: Scope = "task",
    cause: str | None = None,
    hard: bool = False,
) -> DeletedOut:
    """Delete one fact, kept in its history (a rollback brings a value back); `hard=true`
    (admin keys) removes it with its whole history."""
    if hard:
        who.check(
            pid, "admin", "a hard delete of a fact", "a write key may delete it keeping its history"
        )
    deleted = facts.delete_fact(
        rt.cb, key, scope_id=scope_id, scope=scope, cause=cause, project=pid, hard=hard
    )
    return DeletedOut(deleted=deleted)


@router.get(
    "/v1/projects/{project_id}/state/history",
    response_model=list[StateChangeOut],
    tags=["state"],
)
def state_history(
    pid: ReadProject, rt: Rt, scope_id: ScopeId, scope: Scope = "task", key: str | None = None
) -> list[StateChangeOut]:
    """Every change of the scope's facts (or one key's), oldest first per key."""
    changes = facts.fact_history(rt.cb, key, scope_id=scope_id, scope=scope, project=pid)
    return [StateChangeOut(**asdict(c)) for c in changes]


@router.post("/v1/projects/{project_id}/state/rollback", response_model=RollbackOut, tags=["state"])
def rollback_state(
    pid: WriteProject, rt: Rt, key: Key, scope_id: ScopeId, body: RollbackIn, scope: Scope = "task"
) -> RollbackOut:
    """Make a fact's value at `to_version` current again, as one more recorded change."""
    facts.check_scope_open(rt.cb, scope, scope_id, pid)
    fact = facts.rollback_fact(
        rt.cb,
        key,
        body.to_version,
        scope_id=scope_id,
        scope=scope,
        cause=body.cause,
        project=pid,
    )
    return RollbackOut(fact=None if fact is None else fact.model_dump(mode="json"))
