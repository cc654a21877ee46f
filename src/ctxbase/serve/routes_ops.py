"""Operations: liveness, readiness (the store answers), Prometheus metrics, capture stats."""

from __future__ import annotations

from dataclasses import asdict
from typing import Annotated

from fastapi import APIRouter, Query
from fastapi.responses import JSONResponse, PlainTextResponse

from ..errors import ValidationError
from .auth import Principal
from .deps import Caller, Rt
from .errors import PermissionDeniedError
from .runtime import COUNTER_HELP
from .schemas import CaptureStatsOut, IdleOut, ProjectsOut

__all__ = ["router"]

router = APIRouter()


@router.get("/healthz", tags=["ops"])
async def healthz() -> dict[str, str]:
    """The process is up."""
    return {"status": "ok"}


@router.get("/readyz", tags=["ops"], responses={503: {"description": "store unreachable"}})
def readyz(rt: Rt) -> JSONResponse:
    """The store answers a query."""
    health = rt.cb.health()
    return JSONResponse(health, 200 if health["status"] == "ready" else 503)


@router.get("/metrics", tags=["ops"], response_class=PlainTextResponse)
def metrics(rt: Rt) -> PlainTextResponse:
    """Prometheus text format: request latency histograms, counters, capture queue, embed
    backlog; with several workers, the requests of all of them."""
    return PlainTextResponse(
        rt.metrics.render(COUNTER_HELP), media_type="text/plain; version=0.0.4; charset=utf-8"
    )


@router.get("/v1/projects", response_model=ProjectsOut, tags=["projects"])
def list_projects(rt: Rt, who: Caller) -> ProjectsOut:
    """The projects this key can see (that hold data)."""
    return ProjectsOut(projects=[p for p in rt.cb.store.list_projects() if who.sees(p)])


@router.get("/v1/whoami", tags=["projects"])
def whoami(who: Caller) -> dict[str, object]:
    """The caller's key: its id, role and projects (null: every project)."""
    projects = None if who.projects is None else sorted(who.projects)
    return {"key_id": who.key_id, "role": who.role, "projects": projects}


@router.get("/v1/capture/stats", response_model=CaptureStatsOut, tags=["events"])
def capture_stats(rt: Rt, who: Caller) -> CaptureStatsOut:
    """Counters of this server process's capture queue, every project's; the last error
    (which names sessions and event ids) only to a key that sees each project it came from."""
    stats = asdict(rt.cb.capture_stats())
    if not all(who.sees(p) for p in stats["last_error_projects"]):
        stats["last_error"], stats["last_error_projects"] = None, []
    return CaptureStatsOut(**stats)


@router.post(
    "/v1/embeddings/wait",
    response_model=IdleOut,
    tags=["search"],
    responses={503: {"description": "the embedder fails (embedder_unavailable, with why)"}},
)
def wait_for_embeddings(
    rt: Rt,
    who: Caller,
    timeout: Annotated[float, Query(ge=0, le=60)] = 10.0,
    project: Annotated[str | None, Query(min_length=1, max_length=200)] = None,
    all_projects: bool = False,
) -> IdleOut:
    """Block until every item of the project has a vector (or the timeout passes; another
    project's backlog is not waited for), the project's captures still queued written
    first (a wait right after POST .../messages covers those messages), then answer how
    many items of `project` still have none (`pending_vectors`; without `project`: the
    key's one project, else the server's default). `all_projects=true` waits for (and
    counts) every project's, for a key that sees every project (`project` left out). A
    failing embedder is a 503 with its error, not a wait for vectors that never come."""
    from ..embedding_wait import pending_vectors

    if all_projects:
        return _wait_for_all(rt, who, timeout, project)
    if project is not None:
        who.check(project, "read")
    pid = project or _only_project(who) or rt.cb.project
    # idle=false tells the client; a client polling would fill the server log with warnings
    if not who.sees(pid):
        return IdleOut(idle=rt.cb.wait_for_embeddings(timeout, warn=False))
    idle = rt.cb.wait_for_embeddings(timeout, warn=False, project=pid)
    worker = rt.cb.embedding_worker
    if worker is None:  # no vectors made: none pending
        return IdleOut(idle=idle, project=pid, pending_vectors=0)
    model = worker.embedder.name
    left = pending_vectors(rt.cb.store, model, pid, worker.replacing())
    return IdleOut(idle=idle, project=pid, pending_vectors=left, model=model)


def _wait_for_all(rt: Rt, who: Caller, timeout: float, project: str | None) -> IdleOut:
    from ..embedding_wait import pending_vectors

    if project is not None:
        raise ValidationError("project", "give a project or all_projects=true, not both")
    if who.projects is not None:
        raise PermissionDeniedError("all_projects needs a key that sees every project")
    idle = rt.cb.wait_for_embeddings(timeout, warn=False, all_projects=True)
    worker = rt.cb.embedding_worker
    if worker is None:
        return IdleOut(idle=idle, pending_vectors=0)
    model = worker.embedder.name
    return IdleOut(
        idle=idle,
        pending_vectors=pending_vectors(rt.cb.store, model, None, worker.replacing()),
        model=model,
    )


def _only_project(who: Principal) -> str | None:
    return next(iter(who.projects)) if who.projects is not None and len(who.projects) == 1 else None
