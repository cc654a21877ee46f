"""FastAPI dependencies: the runtime, the authenticated principal, per-project access."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Annotated, cast

from fastapi import Depends, Path, Query, Request, Security
from fastapi.security import APIKeyHeader, HTTPAuthorizationCredentials, HTTPBearer
from starlette.concurrency import run_in_threadpool

from ..errors import NEW_PROJECT_HINT, UnknownProjectError
from .auth import Principal, local_principal, presented_token, principal_of
from .errors import AuthenticationError
from .keys import recall_key, verify_key
from .runtime import Runtime

__all__ = [
    "HARD_FORGET",
    "AdminProject",
    "Caller",
    "HardForgetProject",
    "KnownProject",
    "ProjectPath",
    "ReadProject",
    "Rt",
    "WriteProject",
    "get_runtime",
    "principal",
    "require_project",
]

_bearer = HTTPBearer(auto_error=False, description="Authorization: Bearer cb_<key_id>_<secret>")
_header = APIKeyHeader(name="X-API-Key", auto_error=False, description="the API key")


# The dependencies on every request are `async def` where they only do in-memory work, so
# they run on the event loop instead of each taking a trip through the threadpool.
async def get_runtime(request: Request) -> Runtime:
    return cast(Runtime, request.app.state.runtime)


Rt = Annotated[Runtime, Depends(get_runtime)]


async def principal(
    request: Request,
    rt: Rt,
    bearer: Annotated[HTTPAuthorizationCredentials | None, Security(_bearer)],
    api_key: Annotated[str | None, Security(_header)],
) -> Principal:
    """Every request is checked: the key must exist, match and not be revoked."""
    if rt.settings.no_auth:
        return local_principal(request.scope.get("client"))
    auth_header = None if bearer is None else f"{bearer.scheme} {bearer.credentials}"
    if bearer is None and api_key is None:
        auth_header = request.headers.get("authorization")
    try:
        token = presented_token(auth_header, api_key)
        record = recall_key(rt.cb.store, token)
        if record is None and rt.cb.store.reads_never_wait:
            record = verify_key(rt.cb.store, token)
        elif record is None:  # not verified here within the TTL: read the store, off the loop
            record = await run_in_threadpool(verify_key, rt.cb.store, token)
        who = principal_of(record)
    except AuthenticationError:
        rt.metrics.inc("ctxbase_auth_failures_total")
        raise
    request.state.key_id = who.key_id
    try:
        rt.limiter.take(str(who.key_id))
    except Exception:
        rt.metrics.inc("ctxbase_rate_limited_total")
        raise
    return who


Caller = Annotated[Principal, Depends(principal)]
ProjectPath = Annotated[str, Path(min_length=1, max_length=200, description="project id")]


async def _read(project_id: ProjectPath, who: Caller) -> str:
    who.check(project_id, "read")
    return project_id


def _write(project_id: ProjectPath, who: Caller, rt: Rt) -> Iterator[str]:
    who.check(project_id, "write")
    # Before and after: an assembly racing with this write must not stay cached.
    rt.cache.invalidate(project_id)
    yield project_id
    rt.cache.invalidate(project_id)


def _admin(project_id: ProjectPath, who: Caller, rt: Rt) -> Iterator[str]:
    who.check(project_id, "admin")
    rt.cache.invalidate(project_id)
    yield project_id
    rt.cache.invalidate(project_id)


async def _hard_forget(project_id: ProjectPath, who: Caller, rt: Rt) -> str:
    # The handler invalidates the assemble cache itself (and counts what it held).
    who.check(project_id, "admin", *HARD_FORGET)
    if not rt.cb.store.has_forgotten(project_id):  # a project forgotten before: no typo
        require_project(rt, who, project_id)
    return project_id


# What a write key is told: it may hide (soft-delete), not remove.
HARD_FORGET = (
    "a hard forget",
    "it cannot be undone; a write key may hide instead (POST .../soft-delete, which "
    "POST .../restore undoes)",
)


def require_project(rt: Runtime, who: Principal, pid: str) -> None:
    """A project with no data is a typo (as on the command line), not an empty answer (and
    an assembly's stored trace would create it). Only the projects the key sees are named.
    The one project of a key made for it alone is no typo: it answers empty before its
    first write, as an embedded base's own project does."""
    if who.projects == frozenset({pid}):
        return
    known = rt.cb.store.list_projects()
    if pid not in known:
        raise UnknownProjectError(
            pid,
            [p for p in known if who.sees(p)],
            seen_only=who.projects is not None,
            start=NEW_PROJECT_HINT,
        )


NewProject = Annotated[
    bool,
    Query(
        description="answer empty for a project with no data yet; without it such a "
        "project is a 404 naming the projects the key sees (a typo)"
    ),
]


def _known(project_id: ProjectPath, who: Caller, rt: Rt, new_project: NewProject = False) -> str:
    who.check(project_id, "read")
    if not new_project:
        require_project(rt, who, project_id)
    return project_id


ReadProject = Annotated[str, Depends(_read)]
# A read of a listing, where an unknown project would answer an empty list.
KnownProject = Annotated[str, Depends(_known)]
WriteProject = Annotated[str, Depends(_write)]
AdminProject = Annotated[str, Depends(_admin)]
HardForgetProject = Annotated[str, Depends(_hard_forget)]
