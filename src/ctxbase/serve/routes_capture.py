"""Sessions, tasks and events (single and batch capture) of one project."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Header, Path, Query, Response, status
from fastapi.responses import JSONResponse

from ..capture.events import RecordReport, build_event
from ..errors import ValidationError
from ..idempotency import IdempotencyConflict
from ..model import Event, SessionInfo, TaskInfo
from .auth import Principal
from .deps import Caller, KnownProject, ReadProject, Rt, WriteProject
from .errors import RequestTooLargeError
from .keys import key_agent
from .schemas import (
    BatchOut,
    CaptureOut,
    EventBatchIn,
    EventIn,
    EventNotStoredOut,
    IdsOut,
    MessagesIn,
    SessionIn,
    TaskIn,
)

__all__ = ["event_reads", "router"]

router = APIRouter(prefix="/v1/projects/{project_id}")
# GET /events/{id}: an id may hold "/", so this route takes the rest of the path and the
# app includes it after every router with a longer /events/{id}/... path (the console's).
event_reads = APIRouter(prefix="/v1/projects/{project_id}")

# no length bound: an id longer than any stored is not found, as embedded says (id_arg)
EventId = Annotated[str, Path(min_length=1)]
# A retry of the same request sends the same key; the event's id is derived from it.
IdempotencyKey = Annotated[str | None, Header(alias="Idempotency-Key")]


def _agent(who: Principal) -> str:
    # An event whose body names no agent is the key's, as an edge without a source is.
    return "agent" if who.key_id is None else key_agent(who.key_id)


def _event(
    rt: Rt,
    pid: str,
    body: EventIn,
    who: Principal,
    field: str = "",
    header_key: str | None = None,
) -> Event:
    """Build and check an event: the client's id, else one from its idempotency key (the
    body's, else the header's), else a fresh one."""
    if header_key is not None and body.idempotency_key not in (None, header_key):
        raise ValidationError(
            f"{field}idempotency_key", "differs from the Idempotency-Key header; send one"
        )
    key = _request_key(body, header_key)
    fields = body.model_dump(exclude={"id", "idempotency_key"})
    if fields["agent_id"] is None:
        fields["agent_id"] = _agent(who)
    try:
        return build_event(
            project_id=pid,
            max_content_bytes=rt.cb.max_content_bytes,
            event_id=body.id,
            idempotency_key=key,
            **fields,
        )
    except ValidationError as exc:  # name the field as the request spells it
        name = "id" if exc.field == "event_id" else exc.field
        raise ValidationError(field + name, exc.message) from exc


def _request_key(body: EventIn, header_key: str | None) -> str | None:
    """The idempotency key an event is written under: the body's, else the header's (when
    the body gives no id)."""
    if body.idempotency_key is not None or body.id is not None:
        return body.idempotency_key
    return header_key


def _capture_args(body: EventIn, event: Event, header_key: str | None) -> dict[str, Any]:
    """capture()'s fields for a checked event: under the id `_event` gave it when the
    client named one (its id or idempotency key: capture never merges such an event into
    a burst, so a retry finds it), else capture's own fresh id."""
    args = body.model_dump(exclude={"id", "idempotency_key", "type", "session_id", "text"})
    named = body.id is not None or _request_key(body, header_key) is not None
    return {**args, "agent_id": event.agent_id, **({"event_id": event.id} if named else {})}


# -- sessions ------------------------------------------------------------------------------
@router.put("/sessions/{session_id:path}", response_model=SessionInfo, tags=["sessions"])
def put_session(pid: WriteProject, session_id: str, body: SessionIn, rt: Rt) -> SessionInfo:
    """Create a session, or update its title and metadata (status, status log, current
    task and archive summary are the lifecycle's; an archived session answers 409)."""
    return rt.cb.create_session(session_id, project=pid, title=body.title, metadata=body.metadata)


@router.get("/sessions", response_model=list[SessionInfo], tags=["sessions"])
def list_sessions(pid: KnownProject, rt: Rt) -> list[SessionInfo]:
    """The project's sessions; a project with no data is a 404 (a typo) unless
    `new_project=true`."""
    return rt.cb.list_sessions(project=pid, new_project=True)  # checked by KnownProject


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
def list_tasks(pid: KnownProject, rt: Rt, session_id: str | None = None) -> list[TaskInfo]:
    """The project's tasks, or one session's; a project with no data is a 404 unless
    `new_project=true`."""
    return rt.cb.list_tasks(session_id, project=pid, new_project=True)


@router.get("/tasks/{task_id:path}", response_model=TaskInfo, tags=["tasks"])
def get_task(pid: ReadProject, task_id: str, rt: Rt) -> TaskInfo:
    return rt.cb.get_task(task_id, project=pid)


# -- events --------------------------------------------------------------------------------
@router.post(
    "/events",
    response_model=Event,
    status_code=status.HTTP_201_CREATED,
    responses={
        200: {
            "model": EventNotStoredOut,
            "description": "not written: the project forgot an event of this id",
        }
    },
    tags=["events"],
)
def record_event(
    pid: WriteProject, body: EventIn, rt: Rt, who: Caller, idempotency_key: IdempotencyKey = None
) -> Event | JSONResponse:
    """Store one event synchronously; the answer carries its session order (seq). A retry
    with the same id or idempotency key answers with the event stored the first time. A
    retry of an event the project has forgotten since is not written again: 200 (not 201)
    with the event as sent and `"stored": false, "reason": "forgotten"`. 409 when the session
    is archived, or when the id or idempotency key was used for an event with different
    content (a retry must resend the same request)."""
    event = _event(rt, pid, body, who, header_key=idempotency_key)
    try:
        report = rt.cb.record_events_report([event])
    except IdempotencyConflict as exc:
        raise exc.for_key(_request_key(body, idempotency_key)) from None
    (event,) = report.events
    if report.forgotten:
        answer = EventNotStoredOut(**event.model_dump())
        return JSONResponse(answer.model_dump(mode="json"), status_code=status.HTTP_200_OK)
    return event


@router.post(
    "/events/queue",
    response_model=CaptureOut,
    status_code=status.HTTP_202_ACCEPTED,
    tags=["events"],
)
def capture_event(
    pid: WriteProject, body: EventIn, rt: Rt, who: Caller, idempotency_key: IdempotencyKey = None
) -> CaptureOut:
    """Queue one event (written in the background; `durable` is false: it is on disk only
    after a flush); `id` is null if it was dropped. 409 when the session is archived (one
    archived by another process is refused when written: `GET /v1/capture/stats` counts
    it in `refused`)."""
    event = _event(rt, pid, body, who, header_key=idempotency_key)
    eid = rt.cb.capture(
        body.type,
        session_id=body.session_id,
        text=body.text,
        project=pid,
        **_capture_args(body, event, idempotency_key),
    )
    return CaptureOut(id=eid)


@router.post(
    "/events/batch",
    response_model=BatchOut,
    status_code=status.HTTP_201_CREATED,
    responses={
        200: {"model": BatchOut, "description": "none written: the project forgot every id"},
        202: {"model": BatchOut, "description": "queued (`wait: false`), not durable"},
    },
    tags=["events"],
)
def capture_batch(
    pid: WriteProject,
    body: EventBatchIn,
    rt: Rt,
    who: Caller,
    response: Response,
    idempotency_key: IdempotencyKey = None,
) -> BatchOut:
    """Several events in order. By default (`wait: true`) they are stored when the answer
    comes: 201, `durable: true`; `forgotten` names those not written because the project
    forgot an event of that id (a stale retry is never written again), and when that is
    every event the answer is 200. With `wait: false` they are queued: 202, `durable:
    false` (a crash before the next flush loses them; a forgotten id is skipped when
    written). An Idempotency-Key header K keys each event without its own id or key as
    "K/<position>". 409, nothing stored or queued, when one event's session is archived;
    409, nothing stored, when one event's id or key names an event with different content
    (queued, such an event is refused when written: `GET /v1/capture/stats` counts it)."""
    if len(body.events) > rt.settings.max_batch:
        raise RequestTooLargeError(
            f"batch of {len(body.events)} events is over the limit of {rt.settings.max_batch}",
            field="events",
        )

    def header_key(i: int, e: EventIn) -> str | None:
        own = e.id is not None or e.idempotency_key is not None
        return None if idempotency_key is None or own else f"{idempotency_key}/{i}"

    events = [
        _event(rt, pid, e, who, f"events[{i}].", header_key(i, e))
        for i, e in enumerate(body.events)
    ]
    if body.wait:
        keys = {
            event.id: _request_key(e, header_key(i, e))
            for i, (e, event) in enumerate(zip(body.events, events, strict=True))
        }
        try:
            report = rt.cb.record_events_report(events) if events else RecordReport()
        except IdempotencyConflict as exc:
            raise exc.for_key(keys.get(exc.event_id)) from None
        if events and set(report.forgotten) >= {e.id for e in events}:
            response.status_code = status.HTTP_200_OK  # nothing of it is written
        ids: list[str | None] = [e.id for e in report.events]
        return BatchOut(ids=ids, events=report.events, durable=True, forgotten=report.forgotten)
    rt.cb.check_writable(events)  # an archived session refuses the whole batch (409)
    response.status_code = status.HTTP_202_ACCEPTED
    ids = []
    for i, (e, event) in enumerate(zip(body.events, events, strict=True)):
        ids.append(
            rt.cb.capture(
                e.type,
                session_id=e.session_id,
                text=e.text,
                project=pid,
                **_capture_args(e, event, header_key(i, e)),
            )
        )
    return BatchOut(ids=ids, durable=False)


@router.post("/messages", response_model=IdsOut, tags=["events"])
def capture_messages(
    pid: WriteProject, body: MessagesIn, rt: Rt, idempotency_key: IdempotencyKey = None
) -> IdsOut:
    """An OpenAI-style message list: the whole history, a window of the last messages or
    only the new ones; what equals the session's last stored messages is not added again,
    except a single message (see `ContextBase.capture_messages`); `shape` says which it
    is instead: "new" stores every message, "history" starts at the session's first message
    (409 when the list does not). A retry of the same call with the same idempotency key
    (body or Idempotency-Key header) adds nothing; 409 when that key was used for a call
    with other messages (nothing written), or when the session is archived."""
    if (
        idempotency_key is not None
        and body.idempotency_key is not None
        and idempotency_key != body.idempotency_key
    ):
        raise ValidationError(
            "idempotency_key", "differs from the Idempotency-Key header; send one"
        )
    if len(body.messages) > rt.settings.max_batch:
        raise RequestTooLargeError(
            f"{len(body.messages)} messages is over the limit of {rt.settings.max_batch}",
            field="messages",
        )
    args = body.model_dump(exclude={"messages", "session_id"})
    if args["idempotency_key"] is None:
        args["idempotency_key"] = idempotency_key
    return IdsOut(
        ids=rt.cb.capture_messages(body.messages, session_id=body.session_id, project=pid, **args)
    )


@router.post("/flush", status_code=status.HTTP_204_NO_CONTENT, tags=["events"])
def flush(pid: ReadProject, rt: Rt) -> None:
    """Return once every queued event is stored. A read key may call it (it changes
    nothing): a reader waits for what another client wrote (read-your-writes)."""
    rt.cb.flush()
    rt.cache.invalidate(pid)  # as after a write: the next assembly sees what was stored


@router.get("/events", response_model=list[Event], tags=["events"])
def last_events(
    pid: ReadProject,
    rt: Rt,
    session_id: Annotated[str, Query(min_length=1, max_length=200)],
    n: Annotated[int, Query(ge=0, le=10_000)] = 20,
) -> list[Event]:
    """The last n events of a session, oldest first."""
    return rt.cb.last_events(session_id, n, project=pid)


# An id may hold "/" (ids are ASCII letters, digits and _ . : @ / -): the id takes the
# path up to the route's suffix (so an id ending in "/causes", "/effects" or "/chain" is
# read as that route of the id before it).
@router.get("/events/{event_id:path}/causes", response_model=list[Event], tags=["events"])
def causal_chain(pid: ReadProject, event_id: EventId, rt: Rt) -> list[Event]:
    """Everything upstream of an event, nearest first."""
    return rt.cb.causal_chain(event_id, project=pid)


@router.get("/events/{event_id:path}/effects", response_model=list[Event], tags=["events"])
def effects(pid: ReadProject, event_id: EventId, rt: Rt) -> list[Event]:
    """Everything downstream of an event, nearest first."""
    return rt.cb.effects(event_id, project=pid)


@event_reads.get("/events/{event_id:path}", response_model=Event, tags=["events"])
def get_event(pid: ReadProject, event_id: EventId, rt: Rt, include_inactive: bool = False) -> Event:
    return rt.cb.get_event(event_id, project=pid, include_inactive=include_inactive)
