"""`ContextManager`: seed 003's four layers (session, task, state, message) behind one API.

Business code never touches message arrays: it creates sessions, switches tasks, records
messages and facts, and asks for the prompt. Every status change is an explicit call checked
by `lifecycle.transition`; each session and task keeps a log of its changes (when, from, to,
why) in its metadata, and message statuses are versioned state records (see state.py).
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from datetime import date
from typing import TYPE_CHECKING, Any

from ..components import ComponentsSource, components_of
from ..errors import ConflictError, NotFoundError, ValidationError
from ..model import SessionInfo, StateFact, TaskInfo, check_id, keyed_event_id
from ..store.base import StateChange
from ..validation import check_fact_key, check_text
from .budget import compress_extractive
from .echoes import echo_ids
from .facts import FactExtractor, asks_to_remember
from .lifecycle import (
    ContextKind,
    Status,
    check_status,
    expire_idle,
    save_session,
    save_task,
    transition,
)
from .state import (
    CURRENT_TASK_KEY,
    LLMConfig,
    Scope,
    default_extractor,
    expire_message_record,
    extract_into_state,
    fact_history,
    get_scope_facts,
    message_statuses,
    retract_message_facts,
    rollback_fact,
    set_fact,
)
from .tokens import get_token_counter
from .user_scope import MEMORY_SCOPES, MemoryScope
from .withheld import messages_out

if TYPE_CHECKING:
    from .assembler import Assembler

__all__ = ["MESSAGE_EVENT_TYPES", "ROLE_EVENT_TYPES", "ContextManager"]

log = logging.getLogger("ctxbase.assemble")

ROLE_EVENT_TYPES: dict[str, str] = {
    "user": "user_message",
    "assistant": "assistant_message",
    "tool": "tool_result",
    "system": "system",
}
MESSAGE_EVENT_TYPES: tuple[str, ...] = tuple(ROLE_EVENT_TYPES.values())
_ARCHIVE_SUMMARY_TOKENS = 300


class ContextManager:
    """Sessions, tasks, state and messages of one project, with explicit lifecycles."""

    def __init__(
        self,
        cb: ComponentsSource,
        *,
        project: str | None = None,
        assembler: Assembler | None = None,
        extractor: FactExtractor | None = None,
        llm: LLMConfig | None = None,
        extract_facts: bool = True,
        default_role: str = "assistant",
        idle_timeout_s: float | None = None,
        clock: Callable[[], float] = time.time,
        memory_scope: MemoryScope | None = None,
    ) -> None:
        """`memory_scope` "user" keeps each prompt's memory to its session's user's own
        sessions and knowledge of no session (user_scope.py); None: the policy's, whose
        default "project" shares memory across the project's sessions and users."""
        cb = components_of(cb)
        self.cb = cb
        self.project = cb.project if project is None else check_id("project", project)
        self._assembler = assembler
        self._llm = llm
        self.extractor = extractor if extractor is not None else default_extractor(llm)
        self.extract_facts = extract_facts
        self.default_role = default_role
        # Sessions idle longer than this expire when next touched (None: the base's setting).
        self.idle_timeout_s = (
            cb.session_idle_timeout_s if idle_timeout_s is None else idle_timeout_s
        )
        self.clock = clock
        if memory_scope is not None and memory_scope not in MEMORY_SCOPES:
            raise ValidationError("memory_scope", f"must be one of {', '.join(MEMORY_SCOPES)}")
        self.memory_scope = memory_scope

    @property
    def assembler(self) -> Assembler:
        if self._assembler is None:
            from .assembler import Assembler

            self._assembler = Assembler(self.cb, llm=self._llm)
        return self._assembler

    # -- sessions --------------------------------------------------------------------------
    def create_session(
        self, user_id: str = "user", *, session_id: str | None = None, title: str | None = None
    ) -> str:
        """Create a session (created -> active) and return its id."""
        if not isinstance(user_id, str) or not user_id.strip():
            raise ValidationError(
                "user_id", f"must be a non-empty string, the session's user (got {user_id!r})"
            )
        check_text("user_id", user_id)
        sid = check_id("session_id", session_id or f"s_{uuid.uuid4().hex[:16]}")
        if self.cb.store.get_session(self.project, sid) is not None:
            raise ConflictError(f"session {sid!r} already exists")
        save_session(
            self.cb.store,
            SessionInfo(
                project_id=self.project,
                session_id=sid,
                status=Status.ACTIVE.value,
                title=title,
                metadata={"user_id": user_id, CURRENT_TASK_KEY: None},
            ),
            cause="create_session",
            now=self.clock(),
        )
        return sid

    def session(self, session_id: str) -> SessionInfo:
        """The session, expired first when it has been idle past `idle_timeout_s`."""
        info = self.cb.store.get_session(self.project, check_id("session_id", session_id))
        if info is None:
            raise NotFoundError("session", session_id)
        if self.idle_timeout_s is not None:
            last = self.cb.store.list_events(self.project, session_id, last_n=1)
            info = expire_idle(
                self.cb.store,
                info,
                self.idle_timeout_s,
                now=self.clock(),
                last_activity=last[-1].ts if last else None,
            )
        return info

    def session_status(self, session_id: str) -> Status:
        return Status(self.session(session_id).status)

    def _move_session(
        self,
        session_id: str,
        target: Status,
        cause: str,
        metadata: Mapping[str, Any] | None = None,
    ) -> SessionInfo:
        info = self.session(session_id)
        transition(info.status, target, ContextKind.SESSION)  # the lifecycle's own error
        update: dict[str, Any] = {"status": target.value}
        if metadata is not None:
            update["metadata"] = {**info.metadata, **metadata}
        updated = save_session(
            self.cb.store, info.model_copy(update=update), cause=cause, now=self.clock()
        )
        log.debug("session %s %s -> %s (%s)", session_id, info.status, target.value, cause)
        return updated

    def suspend_session(self, session_id: str, *, cause: str = "suspend") -> SessionInfo:
        return self._move_session(session_id, Status.SUSPENDED, cause)

    def resume_session(self, session_id: str, *, cause: str = "resume") -> SessionInfo:
        return self._move_session(session_id, Status.ACTIVE, cause)

    def expire_session(self, session_id: str, *, cause: str = "expired") -> SessionInfo:
        return self._move_session(session_id, Status.EXPIRED, cause)

    def archive_session(self, session_id: str, *, cause: str = "archive") -> str:
        """Archive the session and its tasks; returns an extractive summary of its messages.

        The summary is kept in the session's metadata ("archive_summary") for audits; the
        archive is final, so every later write to the session is refused.
        """
        info = self.session(session_id)
        transition(info.status, Status.ARCHIVED, ContextKind.SESSION)  # fail before any write
        events = self.cb.store.list_events(
            self.project, session_id, types=["user_message", "assistant_message"]
        )
        hidden = message_statuses(self.cb, session_id, project=self.project)
        repeats = echo_ids(events, hidden)  # replies repeating a retracted message go too
        texts = [e.text or "" for e in events if e.id not in hidden and e.id not in repeats]
        summary = compress_extractive(texts, _ARCHIVE_SUMMARY_TOKENS, get_token_counter())
        for task in self.cb.store.list_tasks(self.project, session_id):
            if task.status != Status.ARCHIVED:
                self._move_task(task, Status.ARCHIVED, cause)
        self._move_session(session_id, Status.ARCHIVED, cause, {"archive_summary": summary})
        return summary

    def _writable(self, session_id: str) -> SessionInfo:
        info = self.session(session_id)
        if info.status in (Status.ARCHIVED, Status.EXPIRED):
            hint = "it takes no writes"
            if info.status == Status.EXPIRED:
                hint = "it takes no writes until a message or resume_session re-activates it"
            raise ConflictError(f"session {session_id!r} is {info.status}; {hint}")
        return info

    def _capturable(self, session_id: str) -> SessionInfo:
        """A message may go into a live or expired session (the capture re-activates an
        expired one), never into an archived one."""
        info = self.session(session_id)
        if info.status == Status.ARCHIVED:
            raise ConflictError(f"session {session_id!r} is archived; it takes no writes")
        return info

    # -- tasks -----------------------------------------------------------------------------
    def current_task(self, session_id: str) -> TaskInfo | None:
        task_id = self.session(session_id).metadata.get(CURRENT_TASK_KEY)
        return None if not task_id else self.cb.store.get_task(self.project, str(task_id))

    def task(self, task_id: str) -> TaskInfo:
        found = self.cb.store.get_task(self.project, check_id("task_id", task_id))
        if found is None:
            raise NotFoundError("task", task_id)
        return found

    def _move_task(self, task: TaskInfo, target: Status, cause: str) -> TaskInfo:
        transition(task.status, target, ContextKind.TASK)
        updated = save_task(
            self.cb.store,
            task.model_copy(update={"status": target.value}),
            cause=cause,
            now=self.clock(),
        )
        log.debug("task %s %s -> %s (%s)", task.task_id, task.status, target.value, cause)
        return updated

    def set_task_status(self, task_id: str, status: Status | str, *, cause: str = "") -> None:
        """Move a task explicitly (e.g. to expired when its goal is abandoned)."""
        target = check_status(status)
        self._move_task(self.task(task_id), target, cause or f"set {target.value}")

    def switch_task(
        self,
        session_id: str,
        goal: str,
        *,
        task_id: str | None = None,
        parent_task_id: str | None = None,
        background: str | None = None,
    ) -> str:
        """Suspend the current task and make another current: the suspended task `task_id`
        resumed, else the session's suspended task of the same `goal` resumed (switching
        back to "plan A" returns to it, its state with it), else a new one for `goal`.
        Messages and state are then scoped to it."""
        info = self._writable(session_id)
        current = self.current_task(session_id)
        if task_id is None and goal and goal.strip():
            if current is not None and current.title == goal:
                return current.task_id  # the current task already
            same = [
                t
                for t in self.cb.store.list_tasks(self.project, session_id)
                if t.title == goal and t.status == Status.SUSPENDED
            ]
            if same:
                task_id = max(same, key=lambda t: t.updated_at).task_id
        if task_id is not None and current is not None and current.task_id == task_id:
            return task_id
        target = self.cb.store.get_task(self.project, task_id) if task_id else None
        if target is not None and target.session_id != session_id:
            raise ConflictError(f"task {task_id!r} belongs to session {target.session_id!r}")
        if current is not None and current.status == Status.ACTIVE:
            self._move_task(current, Status.SUSPENDED, f"switch to {task_id or goal!r}")
        if target is not None:
            target = self._move_task(target, Status.ACTIVE, "resumed by switch_task")
        else:
            if not goal or not goal.strip():
                raise ValidationError("goal", "a new task needs a goal")
            tid = check_id("task_id", task_id or f"t_{uuid.uuid4().hex[:16]}")
            metadata: dict[str, Any] = {"goal": goal}
            if background:
                metadata["background"] = background
            created = TaskInfo(
                project_id=self.project,
                task_id=tid,
                session_id=session_id,
                parent_task_id=parent_task_id,
                title=goal,
                metadata=metadata,
            )
            created = save_task(self.cb.store, created, cause="switch_task", now=self.clock())
            target = self._move_task(created, Status.ACTIVE, "switch_task")
        meta = {**info.metadata, CURRENT_TASK_KEY: target.task_id}
        save_session(
            self.cb.store,
            info.model_copy(update={"metadata": meta}),
            cause="switch_task",
            now=self.clock(),
        )
        return target.task_id

    # -- state -----------------------------------------------------------------------------
    def _scope_id(self, session_id: str, scope: Scope) -> str:
        if scope == "project":
            return self.project
        if scope == "session":
            return session_id
        if scope == "user":
            user_id = self._user_id(session_id)
            if user_id is None:
                raise ValidationError("scope", f"session {session_id!r} names no user")
            return user_id
        task = self.current_task(session_id)
        # Without a task the session holds task-scoped facts: nothing is lost.
        return task.task_id if task is not None else session_id

    def _effective_scope(self, session_id: str, scope: Scope) -> Scope:
        if scope == "task" and self.current_task(session_id) is None:
            return "session"
        return scope

    def set_state(
        self,
        session_id: str,
        key: str,
        value: Any,
        *,
        scope: Scope = "task",
        cause: str | None = None,
        ttl: float | None = None,
    ) -> StateFact:
        """Record a confirmed fact in the current task (or the session / project). With a
        `ttl` (seconds) it expires unless set again within it: "temp_code" with ttl=1800
        leaves the prompt after 30 minutes without an update."""
        self._writable(session_id)
        eff = self._effective_scope(session_id, scope)
        return set_fact(
            self.cb,
            key,
            value,
            scope=eff,
            scope_id=self._scope_id(session_id, eff),
            cause=cause or "set_state",
            project=self.project,
            ttl=ttl,
        )

    def get_state(self, session_id: str, key: str, *, scope: Scope | None = None) -> Any:
        """A fact's value: the task's, else the session's, else the session user's own (the
        preferences extracted from their messages), else the project's (or one scope), as
        the assembled prompt shows them."""
        check_fact_key(key)  # as set_state checks it: "" is a mistake, not an unset fact
        everywhere: Sequence[Scope] = ("task", "session", "user", "project")
        scopes = everywhere if scope is None else (scope,)
        task = self.current_task(session_id)
        pairs: list[tuple[str, str]] = []
        for sc in scopes:  # as _effective_scope and _scope_id place them, the task read once
            if sc == "project":
                pairs.append(("project", self.project))
            elif sc == "user":
                user_id = self._user_id(session_id)
                if user_id is not None:
                    pairs.append(("user", user_id))
            elif sc == "task" and task is not None:
                pairs.append(("task", task.task_id))
            else:  # without a task the session holds task-scoped facts
                pairs.append(("session", session_id))
        facts = get_scope_facts(self.cb, pairs, project=self.project)  # every scope in one read
        for pair in pairs:
            if key in facts[pair]:
                return facts[pair][key].value
        return None

    def _user_id(self, session_id: str) -> str | None:
        """The user the session was created for (the scope of their own facts), if any."""
        owner = self.cb.store.get_session(self.project, session_id)
        user_id = owner.metadata.get("user_id") if owner is not None else None
        return user_id if isinstance(user_id, str) and user_id else None

    def state_history(
        self, session_id: str, key: str | None = None, *, scope: Scope = "task"
    ) -> list[StateChange]:
        eff = self._effective_scope(session_id, scope)
        return fact_history(
            self.cb, key, scope=eff, scope_id=self._scope_id(session_id, eff), project=self.project
        )

    def rollback_state(
        self, session_id: str, key: str, to_version: int, *, scope: Scope = "task"
    ) -> StateFact | None:
        """Restore the value a fact had at `to_version` (recorded as a new version)."""
        self._writable(session_id)
        eff = self._effective_scope(session_id, scope)
        return rollback_fact(
            self.cb,
            key,
            to_version,
            scope=eff,
            scope_id=self._scope_id(session_id, eff),
            project=self.project,
        )

    # -- messages --------------------------------------------------------------------------
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
    ) -> str:
        """Record a message as an event of the current (or given) task; returns its id.

        A user message starts a new turn: per-turn tool results of earlier turns expire
        (explicitly, with that cause), and facts it states are extracted into the state, with
        relative dates resolved against the message's time (`today` overrides it). A message
        that asks to be kept ("记一下…") is important. A message into an expired session
        re-activates it (the user came back); an archived one refuses it (ConflictError).
        With an `idempotency_key` (the remote manager sends one per call), a retry of a
        call that stored its message returns that message's id and does nothing again.
        """
        info = self._capturable(session_id)
        if idempotency_key is not None:
            done = keyed_event_id(self.project, session_id, idempotency_key)
            if self.cb.store.get_events(self.project, [done], include_inactive=True):
                return done  # a retry: stored, its facts extracted, once
        event_type = ROLE_EVENT_TYPES.get(role)
        if event_type is None:
            raise ValidationError("role", f"must be one of {', '.join(ROLE_EVENT_TYPES)}")
        checked = check_text("content", content)  # bytes as UTF-8; anything else refused
        if checked is None:
            raise ValidationError("content", "is missing")
        content = checked
        if task_id is None:
            task = self.current_task(session_id)
            task_id = task.task_id if task is not None else None
        elif self.task(task_id).session_id != session_id:  # NotFoundError when there is none
            raise ValidationError("task_id", f"task {task_id!r} is not of session {session_id!r}")
        meta = dict(metadata or {})
        if per_turn:
            meta["per_turn"] = True
        # "记一下截止日期是月底": the user asks for it to be kept, so it survives compression.
        important = important or (role == "user" and asks_to_remember(content))
        if important:
            meta["important"] = True
        last = self.cb.store.list_events(self.project, session_id, last_n=1)
        # A user's message is by the user the session was created for (as capture_messages
        # names a user turn), so a timeline by agent tells the users of sessions apart.
        owner = _as_agent_id(info.metadata.get("user_id")) if role == "user" else None
        by = {"agent_id": owner} if owner is not None else {}
        # A user message expires the per-turn tool results of earlier turns as the base
        # stores it (per_turn.py), as on every other write path.
        event = self.cb.record(
            event_type,
            session_id=session_id,
            project=self.project,
            text=content,
            **by,
            task_id=task_id,
            agent_role=agent_role,
            # A message answers the one before it (as capture_messages threads a chat).
            parent_event_ids=[last[-1].id] if last else [],
            refers_to=list(refers_to),
            importance=0.9 if important else 0.5,
            metadata=meta,
            ts=self.clock(),
            idempotency_key=idempotency_key,
        )
        if role == "user" and self.extract_facts:
            scope: Scope = "task" if task_id else "session"
            extract_into_state(
                self.cb,
                content,
                scope=scope,
                scope_id=task_id or session_id,
                user_id=self._user_id(session_id),
                event_id=event.id,
                extractor=self.extractor,
                # Relative dates ("下周三", "end of next month") count from the message's time.
                today=today if today is not None else date.fromtimestamp(event.ts),
                project=self.project,
            )
        return event.id

    def expire_message(self, session_id: str, message_id: str, *, cause: str = "retracted") -> None:
        """Retract a message: it never appears in an assembled prompt again, and the facts
        extracted from it go back to what they were before it (the task's or session's, and
        the user's own), unless a later message changed them again."""
        self.session(session_id)
        found = self.cb.store.get_events(self.project, [message_id], include_inactive=True)
        if not found or found[0].session_id != session_id:
            raise self._missing_message(message_id, forgotten=not found)
        expire_message_record(self.cb, session_id, [message_id], cause=cause, project=self.project)
        task_id = found[0].task_id
        own: tuple[Scope, str] = ("task", task_id) if task_id else ("session", session_id)
        scopes = [own]
        user_id = self._user_id(session_id)
        if user_id is not None:
            scopes.append(("user", user_id))
        statuses = message_statuses(self.cb, session_id, project=self.project)
        retract_message_facts(
            self.cb,
            message_id,
            scopes=scopes,
            retracted=[m for m, st in statuses.items() if st != Status.ACTIVE],
            # nor back to a value a hidden or wrong-rated message stated
            still_out=lambda ids: messages_out(self.cb, ids, project=self.project),
            cause=cause,
            project=self.project,
        )

    def message_status(self, session_id: str, message_id: str) -> Status:
        """A message's status in the session: active unless moved. NotFoundError for an
        unknown session, and for an id that is no message of this session (a typo, or
        another session's), which must not read as a live message."""
        self.session(session_id)
        recorded = message_statuses(self.cb, session_id, project=self.project).get(message_id)
        if recorded is not None:
            return recorded
        found = self.cb.store.get_events(self.project, [message_id], include_inactive=True)
        if not found or found[0].session_id != session_id:
            raise self._missing_message(message_id, forgotten=not found)
        return Status.ACTIVE

    def _missing_message(self, message_id: str, *, forgotten: bool) -> NotFoundError:
        """NotFoundError for an id that is no message of the session; one hard-forgotten
        says so (as `get_event` does), so a retraction of it does not read as a typo."""
        if forgotten and self.cb.store.forgotten_ids(self.project, [message_id]):
            return NotFoundError.forgotten("message", message_id)
        return NotFoundError("message", message_id)

    def get_prompt_messages(
        self,
        session_id: str,
        max_tokens: int = 3000,
        *,
        agent_role: str | None = None,
        user_input: str | None = None,
    ) -> list[dict[str, str]]:
        """The assembled prompt for the session's current task (see `Assembler.assemble`).

        The latest input is `user_input`, or else the newest user message of the task while
        it is unanswered; a task with no user message yet (just switched to) takes its goal.
        With none of these (a new session) it is a ValidationError. The history is in time
        order: when the task's newest user message was answered, it keeps its place before
        its answer and the prompt ends with the history (pass `user_input` to ask something
        new).
        """
        info = self.session(session_id)
        if info.status == Status.ARCHIVED:
            raise ConflictError(f"session {session_id!r} is archived")
        task = self.current_task(session_id)
        intent = user_input
        if intent is None:
            users = self.cb.store.list_events(
                self.project,
                session_id,
                types=["user_message"],
                task_id=task.task_id if task else None,
            )
            hidden = message_statuses(self.cb, session_id, project=self.project)
            live = [u for u in users if u.id not in hidden]
            if not live and not users and task is not None and task.title.strip():
                # a task's first turn (just switched to): its goal is what to work on
                intent = task.title
            elif not live:
                why = (
                    f"the current task {task.task_id!r} has no user message yet"
                    if task is not None
                    else "the session has no user message yet"
                )
                why += "; pass user_input"
                if users:  # there are some, all retracted or hidden: say so
                    st = hidden[users[-1].id]
                    word = "retracted" if st == Status.EXPIRED else str(st)
                    why = (
                        f"the session's user messages ({len(users)}) are {word}, the last"
                        f" {users[-1].id}; pass user_input to ask something new"
                    )
                raise ValidationError("user_input", why)
            else:
                intent = live[-1].text or ""
        ctx = self.assembler.assemble(
            project_id=self.project,
            session_id=session_id,
            agent_role=agent_role or self.default_role,
            user_intent=intent,
            max_tokens=max_tokens,
            task_id=task.task_id if task else None,
            intent_from_history=user_input is None,
            memory_scope=self.memory_scope,
        )
        return [dict(m) for m in ctx.messages]


def _as_agent_id(user_id: object) -> str | None:
    """A session's user id as the agent id of the user's messages, when it is a valid id
    (a user id is free text: one that is not an id leaves the default)."""
    if not isinstance(user_id, str):
        return None
    try:
        return check_id("agent_id", user_id)
    except ValidationError:
        return None
