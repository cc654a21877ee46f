"""Seed 003's ContextManager for remote clients: `client.context_manager()` on
`ctxbase.connect(...)` (or `connect_async`) gives a manager with the embedded one's calls and
signatures, each one REST request run by the server's own ContextManager (routes_manager.py
and the sessions' lifecycle routes). Facts are extracted into the state layer on the server,
as embedded.

Embedded only: the in-process `assembler` / `extractor` / `clock` (the server's own).
"""

from __future__ import annotations

import functools
import uuid
from collections.abc import Callable, Coroutine, Mapping, Sequence
from datetime import date
from typing import TYPE_CHECKING, Any, Concatenate, ParamSpec, TypeVar

from ..assemble.lifecycle import Status, check_status
from ..assemble.user_scope import MEMORY_SCOPES
from ..errors import ValidationError
from ..model import SessionInfo, StateFact, TaskInfo, check_id
from ..own_names import named_as
from ..store.base import StateChange
from .sdk_calls import Call, Calls

if TYPE_CHECKING:
    from .sdk import AsyncClient, Client

__all__ = ["AsyncRemoteContextManager", "ManagerCalls", "RemoteContextManager"]

P = ParamSpec("P")
T = TypeVar("T")

# The embedded manager's options a server keeps to itself: named when given to a client.
_SERVER_OPTIONS = ("assembler", "extractor", "llm", "idle_timeout_s", "clock")


def _check_options(options: Mapping[str, Any]) -> tuple[str | None, bool, str]:
    for name in options:
        if name in _SERVER_OPTIONS:
            raise ValidationError(
                name,
                "a remote manager uses the server's (its fact extractor, LLM, assembler, "
                "clock and --session-idle-timeout)",
            )
        if name not in ("project", "extract_facts", "default_role", "memory_scope"):
            raise ValidationError(name, "not an option of context_manager()")
    project = options.get("project")
    return (
        None if project is None else check_id("project", project),
        bool(options.get("extract_facts", True)),
        str(options.get("default_role", "assistant")),
    )


def _q(part: str) -> str:
    from urllib.parse import quote

    return quote(part, safe="")


class ManagerCalls:
    """The manager's requests, with the embedded ContextManager's signatures."""

    def __init__(self, calls: Calls, options: Mapping[str, Any]) -> None:
        self._calls = calls
        project, self.extract_facts, self.default_role = _check_options(options)
        self.project = calls._pid(project)
        # sent with each prompt request; None: the server's policy decides
        self.memory_scope: str | None = options.get("memory_scope")
        if self.memory_scope is not None and self.memory_scope not in MEMORY_SCOPES:
            raise ValidationError("memory_scope", f"must be one of {', '.join(MEMORY_SCOPES)}")

    def _path(self, *parts: str) -> str:
        return self._calls._path(self.project, "manager", *parts)

    def create_session(
        self, user_id: str = "user", *, session_id: str | None = None, title: str | None = None
    ) -> Call[str]:
        if session_id is not None:
            check_id("session_id", session_id)
        body = {"user_id": user_id, "session_id": session_id, "title": title}
        return Call("POST", self._path("sessions"), lambda r: str(r["session_id"]), body=body)

    def session(self, session_id: str) -> Call[SessionInfo]:
        return self._calls.get_session(session_id, project=self.project)

    def session_status(self, session_id: str) -> Call[Status]:
        call = self._calls.get_session(session_id, project=self.project)
        return Call(call.method, call.path, lambda r: Status(r["status"]))

    def suspend_session(self, session_id: str, *, cause: str = "suspend") -> Call[SessionInfo]:
        return self._calls.suspend_session(session_id, project=self.project, cause=cause)

    def resume_session(self, session_id: str, *, cause: str = "resume") -> Call[SessionInfo]:
        return self._calls.resume_session(session_id, project=self.project, cause=cause)

    def expire_session(self, session_id: str, *, cause: str = "expired") -> Call[SessionInfo]:
        return self._calls.expire_session(session_id, project=self.project, cause=cause)

    def archive_session(self, session_id: str, *, cause: str = "archive") -> Call[str]:
        """Archive the session; returns the summary of its messages, as embedded."""
        call = self._calls.archive_session(session_id, project=self.project, cause=cause)
        summary: Callable[[Any], str] = lambda r: str(  # noqa: E731
            r.get("metadata", {}).get("archive_summary") or ""
        )
        return Call(call.method, call.path, summary, body=call.body)

    def task(self, task_id: str) -> Call[TaskInfo]:
        return self._calls.get_task(task_id, project=self.project)

    def current_task(self, session_id: str) -> Call[TaskInfo | None]:
        params = {"session_id": check_id("session_id", session_id)}
        return Call(
            "GET",
            self._path("current-task"),
            lambda r: None if r["task"] is None else TaskInfo.model_validate(r["task"]),
            params=params,
        )

    def set_task_status(self, task_id: str, status: Status | str, *, cause: str = "") -> Call[None]:
        body = {
            "task_id": check_id("task_id", task_id),
            "status": check_status(status).value,
            "cause": cause,
        }
        return Call("POST", self._path("task-status"), lambda r: None, body=body)

    def message_status(self, session_id: str, message_id: str) -> Call[Status]:
        params = {"session_id": check_id("session_id", session_id), "message_id": message_id}
        return Call(
            "GET", self._path("message-status"), lambda r: Status(r["status"]), params=params
        )

    def switch_task(
        self,
        session_id: str,
        goal: str,
        *,
        task_id: str | None = None,
        parent_task_id: str | None = None,
        background: str | None = None,
    ) -> Call[str]:
        call = self._calls.switch_task(
            session_id,
            goal,
            task_id=task_id,
            parent_task_id=parent_task_id,
            background=background,
            project=self.project,
        )
        return Call(call.method, call.path, lambda r: str(r["task_id"]), body=call.body)

    def set_state(
        self,
        session_id: str,
        key: str,
        value: Any,
        *,
        scope: str = "task",
        cause: str | None = None,
        ttl: float | None = None,
    ) -> Call[StateFact]:
        body = {
            "session_id": check_id("session_id", session_id),
            "key": key,
            "value": value,
            "scope": scope,
        }
        body["cause"] = cause
        if ttl is not None:  # a server without fact ttls still takes a fact without one
            body["ttl"] = ttl
        return Call("PUT", self._path("state"), StateFact.model_validate, body=body)

    def get_state(self, session_id: str, key: str, *, scope: str | None = None) -> Call[Any]:
        params = {"session_id": check_id("session_id", session_id), "key": key}
        if scope is not None:
            params["scope"] = scope
        return Call("GET", self._path("state"), lambda r: r["value"], params=params)

    def state_history(
        self, session_id: str, key: str | None = None, *, scope: str = "task"
    ) -> Call[list[StateChange]]:
        params = {"session_id": check_id("session_id", session_id), "scope": scope}
        if key is not None:
            params["key"] = key
        return Call(
            "GET",
            self._path("state", "history"),
            lambda r: [StateChange(**c) for c in r],
            params=params,
        )

    def rollback_state(
        self, session_id: str, key: str, to_version: int, *, scope: str = "task"
    ) -> Call[StateFact | None]:
        body = {
            "session_id": check_id("session_id", session_id),
            "key": key,
            "to_version": to_version,
            "scope": scope,
        }
        return Call(
            "POST",
            self._path("state", "rollback"),
            lambda r: None if r["fact"] is None else StateFact.model_validate(r["fact"]),
            body=body,
        )

    def add_message(
        self,
        session_id: str,
        role: str,
        content: str,
        task_id: str | None = None,
        *,
        per_turn: bool = False,
        important: bool = False,
        metadata: Mapping[str, Any] | None = None,
        refers_to: Sequence[str] = (),
        agent_role: str | None = None,
        today: date | None = None,
        idempotency_key: str | None = None,
    ) -> Call[str]:
        body = {
            "session_id": check_id("session_id", session_id),
            "role": role,
            "content": content,
            "task_id": task_id,
            "per_turn": per_turn,
            "important": important,
            "metadata": None if metadata is None else dict(metadata),
            "refers_to": list(refers_to),
            "agent_role": agent_role,
            "today": None if today is None else today.isoformat(),
            "extract_facts": self.extract_facts,
            # the SDK's retry of this request stores the message once
            "idempotency_key": idempotency_key or f"cm_{uuid.uuid4().hex}",
        }
        return Call("POST", self._path("messages"), lambda r: str(r["id"]), body=body)

    def expire_message(
        self, session_id: str, message_id: str, *, cause: str = "retracted"
    ) -> Call[None]:
        return self._calls.expire_message(session_id, message_id, project=self.project, cause=cause)

    def get_prompt_messages(
        self,
        session_id: str,
        max_tokens: int = 3000,
        *,
        agent_role: str | None = None,
        user_input: str | None = None,
    ) -> Call[list[dict[str, str]]]:
        body = {
            "session_id": check_id("session_id", session_id),
            "max_tokens": max_tokens,
            "agent_role": agent_role or self.default_role,
            "user_input": user_input,
        }
        if self.memory_scope is not None:
            body["memory_scope"] = self.memory_scope
        return Call(
            "POST",
            self._path("prompt"),
            lambda r: [dict(m) for m in r["messages"]],
            body=body,
        )


def _sync(
    build: Callable[Concatenate[ManagerCalls, P], Call[T]],
) -> Callable[Concatenate[RemoteContextManager, P], T]:
    build = named_as(
        build, "RemoteContextManager"
    )  # a bad call's TypeError names RemoteContextManager

    @functools.wraps(build)
    def method(self: RemoteContextManager, /, *args: P.args, **kwargs: P.kwargs) -> T:
        return self._client._run(build(self._calls, *args, **kwargs))

    return method


def _async(
    build: Callable[Concatenate[ManagerCalls, P], Call[T]],
) -> Callable[Concatenate[AsyncRemoteContextManager, P], Coroutine[Any, Any, T]]:
    build = named_as(
        build, "AsyncRemoteContextManager"
    )  # a bad call's TypeError names AsyncRemoteContextManager

    @functools.wraps(build)
    async def method(self: AsyncRemoteContextManager, /, *args: P.args, **kwargs: P.kwargs) -> T:
        return await self._client._run(build(self._calls, *args, **kwargs))

    return method


class RemoteContextManager:
    """Seed 003's ContextManager on a ctxbase server (see the module doc)."""

    def __init__(self, client: Client, **options: Any) -> None:
        self._client = client
        self._calls = ManagerCalls(client._calls, options)
        self.project = self._calls.project
        self.extract_facts = self._calls.extract_facts
        self.default_role = self._calls.default_role

    create_session = _sync(ManagerCalls.create_session)
    session = _sync(ManagerCalls.session)
    session_status = _sync(ManagerCalls.session_status)
    suspend_session = _sync(ManagerCalls.suspend_session)
    resume_session = _sync(ManagerCalls.resume_session)
    expire_session = _sync(ManagerCalls.expire_session)
    archive_session = _sync(ManagerCalls.archive_session)
    task = _sync(ManagerCalls.task)
    current_task = _sync(ManagerCalls.current_task)
    set_task_status = _sync(ManagerCalls.set_task_status)
    message_status = _sync(ManagerCalls.message_status)
    switch_task = _sync(ManagerCalls.switch_task)
    set_state = _sync(ManagerCalls.set_state)
    get_state = _sync(ManagerCalls.get_state)
    state_history = _sync(ManagerCalls.state_history)
    rollback_state = _sync(ManagerCalls.rollback_state)
    add_message = _sync(ManagerCalls.add_message)
    expire_message = _sync(ManagerCalls.expire_message)
    get_prompt_messages = _sync(ManagerCalls.get_prompt_messages)


class AsyncRemoteContextManager:
    """`RemoteContextManager` for `connect_async`: the same methods, awaited."""

    def __init__(self, client: AsyncClient, **options: Any) -> None:
        self._client = client
        self._calls = ManagerCalls(client._calls, options)
        self.project = self._calls.project
        self.extract_facts = self._calls.extract_facts
        self.default_role = self._calls.default_role

    create_session = _async(ManagerCalls.create_session)
    session = _async(ManagerCalls.session)
    session_status = _async(ManagerCalls.session_status)
    suspend_session = _async(ManagerCalls.suspend_session)
    resume_session = _async(ManagerCalls.resume_session)
    expire_session = _async(ManagerCalls.expire_session)
    archive_session = _async(ManagerCalls.archive_session)
    task = _async(ManagerCalls.task)
    current_task = _async(ManagerCalls.current_task)
    set_task_status = _async(ManagerCalls.set_task_status)
    message_status = _async(ManagerCalls.message_status)
    switch_task = _async(ManagerCalls.switch_task)
    set_state = _async(ManagerCalls.set_state)
    get_state = _async(ManagerCalls.get_state)
    state_history = _async(ManagerCalls.state_history)
    rollback_state = _async(ManagerCalls.rollback_state)
    add_message = _async(ManagerCalls.add_message)
    expire_message = _async(ManagerCalls.expire_message)
    get_prompt_messages = _async(ManagerCalls.get_prompt_messages)
