"""Seed 003's explicit lifecycle moves of one project's sessions: suspend, resume, expire,
archive, switch task, retract a message, the idle-expiry sweep, and the compaction of old
archived sessions (assemble/compaction.py).

Every move goes through `assemble.lifecycle`: an illegal one answers 409 (with the allowed
moves in the message), an unknown status 422, a write to an archived session 409.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, status

from ..model import SessionInfo, TaskInfo
from .deps import Rt, WriteProject
from .schemas import (
    CompactArchivedIn,
    CompactedOut,
    ExpiredOut,
    ExpireIdleIn,
    LifecycleIn,
    SwitchTaskIn,
)

__all__ = ["router"]

router = APIRouter(prefix="/v1/projects/{project_id}/sessions", tags=["lifecycle"])

MessageId = Annotated[str, Path(min_length=1)]
# The moves' and the sweep's fields are all optional, so the body may be left out.
_NO_CAUSE = LifecycleIn()
_NO_TIMEOUT = ExpireIdleIn()


@router.post("/expire-idle", response_model=ExpiredOut)
def expire_idle_sessions(pid: WriteProject, rt: Rt, body: ExpireIdleIn = _NO_TIMEOUT) -> ExpiredOut:
    """Expire every session idle longer than `idle_timeout_s` (default: the server's
    --session-idle-timeout); answers the ids expired now."""
    return ExpiredOut(
        expired=rt.cb.expire_idle_sessions(project=pid, idle_timeout_s=body.idle_timeout_s)
    )


@router.post("/compact-archived", response_model=CompactedOut)
def compact_archived(pid: WriteProject, rt: Rt, body: CompactArchivedIn) -> CompactedOut:
    """Compact the sessions archived more than `older_than` ago (seconds or "30d"): one
    summary event each, their raw turns hidden (restore brings one back)."""
    report = rt.cb.compact_archived(body.older_than, project=pid)
    return CompactedOut(**report.as_dict())


# Before the session moves: a session id may contain '/', and this path is longer.
@router.post(
    "/{session_id:path}/messages/{message_id:path}/expire",
    status_code=status.HTTP_204_NO_CONTENT,
)
def expire_message(
    pid: WriteProject, session_id: str, message_id: MessageId, rt: Rt, body: LifecycleIn = _NO_CAUSE
) -> None:
    """Retract a message: it never appears in an assembled prompt again."""
    rt.cb.expire_message(session_id, message_id, project=pid, cause=body.cause or "retracted")


@router.post("/{session_id:path}/suspend", response_model=SessionInfo)
def suspend_session(
    pid: WriteProject, session_id: str, rt: Rt, body: LifecycleIn = _NO_CAUSE
) -> SessionInfo:
    return rt.cb.suspend_session(session_id, project=pid, cause=body.cause or "suspend")


@router.post("/{session_id:path}/resume", response_model=SessionInfo)
def resume_session(
    pid: WriteProject, session_id: str, rt: Rt, body: LifecycleIn = _NO_CAUSE
) -> SessionInfo:
    return rt.cb.resume_session(session_id, project=pid, cause=body.cause or "resume")


@router.post("/{session_id:path}/expire", response_model=SessionInfo)
def expire_session(
    pid: WriteProject, session_id: str, rt: Rt, body: LifecycleIn = _NO_CAUSE
) -> SessionInfo:
    return rt.cb.expire_session(session_id, project=pid, cause=body.cause or "expired")


@router.post("/{session_id:path}/archive", response_model=SessionInfo)
def archive_session(
    pid: WriteProject, session_id: str, rt: Rt, body: LifecycleIn = _NO_CAUSE
) -> SessionInfo:
    """Archive the session and its tasks (final); metadata.archive_summary keeps a summary."""
    return rt.cb.archive_session(session_id, project=pid, cause=body.cause or "archive")


@router.post("/{session_id:path}/switch-task", response_model=TaskInfo)
def switch_task(pid: WriteProject, session_id: str, body: SwitchTaskIn, rt: Rt) -> TaskInfo:
    """Suspend the current task; make a new one for `goal` (or the task `task_id`) current."""
    return rt.cb.switch_task(
        session_id,
        body.goal,
        task_id=body.task_id,
        parent_task_id=body.parent_task_id,
        background=body.background,
        project=pid,
    )
