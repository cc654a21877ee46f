"""Sessions, tasks and events (single and batch capture) of one project."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Path, Query, status

from ..capture.events import build_event
from ..errors import NotFoundError, ValidationError
from ..model import Event, SessionInfo, TaskInfo
from .deps import ReadProject, Rt, WriteProject
from .errors import RequestTooLargeError
from .schemas import (
    BatchOut,
    CaptureOut,
    EventBatchIn,
    EventIn,
    IdsOut,
    MessagesIn,
    SessionIn,
    TaskIn,
)

__all__ = ["router"]

router = APIRouter(prefix="/v1/projects/{project_id}")

EventId = Annotated[str, Path(min_length=1, max_length=200)]


def _event(rt: Rt, pid: str, body: EventIn, field: str = "") -> Event:
    """Build and check an event; a client-sent id must be the deterministic one."""
    fields = body.model_dump(exclude={"id"})
    event = build_event(project_id=pid, max_content_bytes=rt.cb.max_content_bytes, **fields)
    if body.id is not None and body.id != event.id:
        raise ValidationError(
            f"{field}id", f"{body.id!r} is not this event's id; the content gives {event.id!r}"
        )
    return event


def _capture_args(body: EventIn) -> dict[str, Any]:
    return body.model_dump(exclude={"id", "type", "session_id", "text"})


# -- sessions ------------------------------------------------------------------------------
@router.put("/sessions/{session_id:path}", response_model=SessionInfo, tags=["sessions"])
def put_session(pid: WriteProject, session_id: str, body: SessionIn, rt: Rt) -> SessionInfo:
    """Create a session, or update its title and metadata (status, status log, current
    task and archive summary are the lifecycle's; an archived session answers 409)."""
    return rt.cb.create_session(session_id, project=pid, title=body.title, metadata=body.metadata)


@router.get("/sessions", response_model=list[SessionInfo], tags=["sessions"])
def list_sessions(pid: ReadProject, rt: Rt) -> list[SessionInfo]:
    return rt.cb.list_sessions(project=pid)


@router.get("/sessions/{session_id:path}", response_model=SessionInfo, tags=["sessions"])
def get_session(pid: ReadProject, session_id: str, rt: Rt) -> SessionInfo:
    return rt.cb.get_session(session_id, project=pid)


# -- tasks ---------------------------------------------------------------------------------
@router.put("/tasks/{task_id:path}", response_model=TaskInfo, tags=["tasks"])
def put_task(pid: WriteProject, task_id: str, body: TaskIn, rt: Rt) -> TaskInfo:
    """Create or update a task of a session; a status given must be a legal move (409
    otherwise, 422 for an unknown one), none keeps the task's own."""
    fields = body.model_dump(exclude_none=True, exclude={"parent_task_id"})
    task = TaskInfo(project_id=pid, task_id=task_id, parent_task_id=body.parent_task_id, **fields)
    return rt.cb.upsert_task(task)


@router.get("/tasks", response_model=list[TaskInfo], tags=["tasks"])
def list_tasks(pid: ReadProject, rt: Rt, session_id: str | None = None) -> list[TaskInfo]:
    return rt.cb.store.list_tasks(pid, session_id)


@router.get("/tasks/{task_id:path}", response_model=TaskInfo, tags=["tasks"])
def get_task(pid: ReadProject, task_id: str, rt: Rt) -> TaskInfo:
    task = rt.cb.store.get_task(pid, task_id)
    if task is None:
        raise NotFoundError("task", task_id)
    return task


# -- events --------------------------------------------------------------------------------
@router.post("/events", response_model=Event, status_code=status.HTTP_201_CREATED, tags=["events"])
def record_event(pid: WriteProject, body: EventIn, rt: Rt) -> Event:
    """Store one event synchronously; the answer carries its session order (seq)."""
    return rt.cb.record_events([_event(rt, pid, body)])[0]


@router.post(
    "/events/queue",
    response_model=CaptureOut,
    status_code=status.HTTP_202_ACCEPTED,
    tags=["events"],
)
def capture_event(pid: WriteProject, body: EventIn, rt: Rt) -> CaptureOut:
    """Queue one event (written in the background); `id` is null if it was dropped."""
    _event(rt, pid, body)
    eid = rt.cb.capture(
        body.type, session_id=body.session_id, text=body.text, project=pid, **_capture_args(body)
    )
    return CaptureOut(id=eid)


@router.post("/events/batch", response_model=BatchOut, tags=["events"])
def capture_batch(pid: WriteProject, body: EventBatchIn, rt: Rt) -> BatchOut:
    """Several events in order: stored together (`wait`), or queued."""
    if len(body.events) > rt.settings.max_batch:
        raise RequestTooLargeError(
            f"batch of {len(body.events)} events is over the limit of {rt.settings.max_batch}",
            field="events",
        )
    events = [_event(rt, pid, e, f"events[{i}].") for i, e in enumerate(body.events)]
    if body.wait:
        stored = rt.cb.record_events(events) if events else []
        return BatchOut(ids=[e.id for e in stored], events=stored)
    ids: list[str | None] = []
    for e in body.events:
        ids.append(
            rt.cb.capture(
                e.type, session_id=e.session_id, text=e.text, project=pid, **_capture_args(e)
            )
        )
    return BatchOut(ids=ids)


@router.post("/messages", response_model=IdsOut, tags=["events"])
def capture_messages(pid: WriteProject, body: MessagesIn, rt: Rt) -> IdsOut:
    """An OpenAI-style message list; sending a longer list again adds only the new ones."""
    if len(body.messages) > rt.settings.max_batch:
        raise RequestTooLargeError(
            f"{len(body.messages)} messages is over the limit of {rt.settings.max_batch}",
            field="messages",
        )
    args = body.model_dump(exclude={"messages", "session_id"})
    return IdsOut(
        ids=rt.cb.capture_messages(body.messages, session_id=body.session_id, project=pid, **args)
    )


@router.post("/flush", status_code=status.HTTP_204_NO_CONTENT, tags=["events"])
def flush(pid: WriteProject, rt: Rt) -> None:
    """Return once every queued event is stored."""
    rt.cb.flush()


@router.get("/events", response_model=list[Event], tags=["events"])
def last_events(
    pid: ReadProject,
    rt: Rt,
    session_id: Annotated[str, Query(min_length=1, max_length=200)],
    n: Annotated[int, Query(ge=0, le=10_000)] = 20,
) -> list[Event]:
    """The last n events of a session, oldest first."""
    return rt.cb.last_events(session_id, n, project=pid)


@router.get("/events/{event_id}", response_model=Event, tags=["events"])
def get_event(pid: ReadProject, event_id: EventId, rt: Rt, include_inactive: bool = False) -> Event:
    return rt.cb.get_event(event_id, project=pid, include_inactive=include_inactive)


@router.get("/events/{event_id}/causes", response_model=list[Event], tags=["events"])
def causal_chain(pid: ReadProject, event_id: EventId, rt: Rt) -> list[Event]:
    """Everything upstream of an event, nearest first."""
    return rt.cb.causal_chain(event_id, project=pid)


@router.get("/events/{event_id}/effects", response_model=list[Event], tags=["events"])
def effects(pid: ReadProject, event_id: EventId, rt: Rt) -> list[Event]:
    """Everything downstream of an event, nearest first."""
    return rt.cb.effects(event_id, project=pid)
