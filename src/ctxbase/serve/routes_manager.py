"""Seed 003's ContextManager over REST: the calls the remote `client.context_manager()`
makes (serve/sdk_manager.py), each run by the server's own `ContextManager` of the project.

So a message sent here is what `cm.add_message` makes embedded: its facts are extracted into
the state layer, a user message starts a new turn, a message asking to be kept is
important. The lifecycle moves (switch task, retract a message, archive, suspend, resume,
expire) are the sessions routes' (routes_lifecycle.py); the SDK manager calls those. The
manager's own reads and moves are here: a session's current task, a message's status, a
task moved to a status on purpose.
"""

from __future__ import annotations

from dataclasses import asdict
from datetime import date
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query
from pydantic import Field

from ..assemble.lifecycle import Status
from ..assemble.manager import ContextManager
from ..assemble.state import Scope
from ..model import StateFact, TaskInfo
from .deps import ReadProject, Rt, WriteProject
from .schemas import RollbackOut, StateChangeOut, _In, _Out

__all__ = ["router"]

router = APIRouter(prefix="/v1/projects/{project_id}/manager", tags=["manager"])

SessionQ = Annotated[str, Query(min_length=1, max_length=200)]
KeyQ = Annotated[str, Query(min_length=1, max_length=200)]
MessageQ = Annotated[str, Query(min_length=1, max_length=200)]


class ManagerSessionIn(_In):
    user_id: str = "user"
    session_id: str | None = None
    title: str | None = None


class ManagerSessionOut(_Out):
    session_id: str


class ManagerMessageIn(_In):
    session_id: str
    role: str
    content: str
    task_id: str | None = None
    per_turn: bool = False
    important: bool = False
    metadata: dict[str, Any] | None = None
    refers_to: list[str] = Field(default_factory=list)
    agent_role: str | None = None
    # relative dates in the message ("下周三") count from this day (default: the message's)
    today: date | None = None
    # False: the message is stored without extracting facts (ContextManager's extract_facts)
    extract_facts: bool = True
    # a retry with the same key stores the message (and extracts its facts) once
    idempotency_key: str | None = None


class MessageIdOut(_Out):
    id: str


class PromptIn(_In):
    session_id: str
    max_tokens: int = 3000
    agent_role: str | None = None
    user_input: str | None = None
    # ContextManager's memory_scope (None: the server's policy)
    memory_scope: Literal["project", "user"] | None = None


class PromptOut(_Out):
    messages: list[dict[str, str]]


class ManagerStateIn(_In):
    session_id: str
    key: str
    value: Any = None
    scope: Scope = "task"
    cause: str | None = None
    ttl: float | None = None  # seconds; the library checks it


class StateValueOut(_Out):
    value: Any = None


class ManagerRollbackIn(_In):
    session_id: str
    key: str
    to_version: int
    scope: Scope = "task"


class CurrentTaskOut(_Out):
    # null: the session has no current task yet (no switch_task)
    task: TaskInfo | None = None


class MessageStatusOut(_Out):
    # active unless the message was retracted, expired (per-turn) or archived
    status: Status


class TaskStatusIn(_In):
    task_id: str
    status: str  # checked by the manager: an unknown one is named with the valid ones
    cause: str = ""


def _manager(rt: Rt, pid: str, *, extract_facts: bool = True) -> ContextManager:
    return rt.cb.context_manager(project=pid, extract_facts=extract_facts)


@router.post("/sessions", response_model=ManagerSessionOut)
def create_session(pid: WriteProject, body: ManagerSessionIn, rt: Rt) -> ManagerSessionOut:
    """A new session for `user_id` (its id generated unless `session_id` is given)."""
    sid = _manager(rt, pid).create_session(
        body.user_id, session_id=body.session_id, title=body.title
    )
    return ManagerSessionOut(session_id=sid)


@router.post("/messages", response_model=MessageIdOut)
def add_message(pid: WriteProject, body: ManagerMessageIn, rt: Rt) -> MessageIdOut:
    """`cm.add_message`: the message stored in the current (or given) task, its facts
    extracted into the state layer, per-turn tool results of earlier turns expired."""
    mid = _manager(rt, pid, extract_facts=body.extract_facts).add_message(
        body.session_id,
        body.role,
        body.content,
        body.task_id,
        per_turn=body.per_turn,
        important=body.important,
        metadata=body.metadata,
        refers_to=body.refers_to,
        agent_role=body.agent_role,
        today=body.today,
        idempotency_key=body.idempotency_key,
    )
    return MessageIdOut(id=mid)


@router.post("/prompt", response_model=PromptOut)
def get_prompt_messages(pid: ReadProject, body: PromptIn, rt: Rt) -> PromptOut:
    """`cm.get_prompt_messages`: the assembled messages for the session's current task."""
    manager = rt.cb.context_manager(project=pid, memory_scope=body.memory_scope)
    messages = manager.get_prompt_messages(
        body.session_id, body.max_tokens, agent_role=body.agent_role, user_input=body.user_input
    )
    return PromptOut(messages=messages)


@router.put("/state", response_model=StateFact)
def set_state(pid: WriteProject, body: ManagerStateIn, rt: Rt) -> StateFact:
    """`cm.set_state`: a fact of the session's current task (or of `scope`)."""
    return _manager(rt, pid).set_state(
        body.session_id, body.key, body.value, scope=body.scope, cause=body.cause, ttl=body.ttl
    )


@router.get("/state", response_model=StateValueOut)
def get_state(
    pid: ReadProject, rt: Rt, session_id: SessionQ, key: KeyQ, scope: Scope | None = None
) -> StateValueOut:
    """`cm.get_state`: the task's value, else the session's, the user's, the project's."""
    return StateValueOut(value=_manager(rt, pid).get_state(session_id, key, scope=scope))


@router.get("/state/history", response_model=list[StateChangeOut])
def state_history(
    pid: ReadProject, rt: Rt, session_id: SessionQ, key: str | None = None, scope: Scope = "task"
) -> list[StateChangeOut]:
    changes = _manager(rt, pid).state_history(session_id, key, scope=scope)
    return [StateChangeOut(**asdict(c)) for c in changes]


@router.post("/state/rollback", response_model=RollbackOut)
def rollback_state(pid: WriteProject, body: ManagerRollbackIn, rt: Rt) -> RollbackOut:
    fact = _manager(rt, pid).rollback_state(
        body.session_id, body.key, body.to_version, scope=body.scope
    )
    return RollbackOut(fact=None if fact is None else fact.model_dump(mode="json"))


@router.get("/current-task", response_model=CurrentTaskOut)
def current_task(pid: ReadProject, rt: Rt, session_id: SessionQ) -> CurrentTaskOut:
    """`cm.current_task`: the session's current task, null before its first."""
    return CurrentTaskOut(task=_manager(rt, pid).current_task(session_id))


@router.get("/message-status", response_model=MessageStatusOut)
def message_status(
    pid: ReadProject, rt: Rt, session_id: SessionQ, message_id: MessageQ
) -> MessageStatusOut:
    """`cm.message_status`: a message's status in the session (active unless moved); 404
    for an unknown session or an id that is no message of it."""
    return MessageStatusOut(status=_manager(rt, pid).message_status(session_id, message_id))


@router.post("/task-status", response_model=TaskInfo)
def set_task_status(pid: WriteProject, body: TaskStatusIn, rt: Rt) -> TaskInfo:
    """`cm.set_task_status`: move a task on purpose (e.g. to expired when its goal is
    abandoned); an illegal move is a 409. Returns the task as it now is."""
    cm = _manager(rt, pid)
    cm.set_task_status(body.task_id, body.status, cause=body.cause)
    return cm.task(body.task_id)
