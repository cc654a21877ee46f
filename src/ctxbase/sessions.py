"""Sessions and tasks of `ContextBase`, with their lifecycle (seed 003).

Every write goes through `assemble.lifecycle.save_session` / `save_task`: unknown statuses
and illegal moves are refused, archived records are read-only, and the lifecycle's own
metadata (status log, current task, archive summary) survives a caller's update. Sessions
idle longer than the base's `session_idle_timeout_s` expire when read (`get_session`,
`list_sessions`) or swept (`expire_idle_sessions`). The explicit moves (suspend, resume,
expire, archive, switch task, retract a message) are the `ContextManager`'s, offered here
so the REST service and the SDK have them too.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from .assemble.lifecycle import (
    LIFECYCLE_METADATA,
    Status,
    check_status,
    expire_idle,
    save_session,
    save_task,
)
from .errors import NotFoundError, ValidationError
from .forgetting import retention_seconds
from .known_projects import check_known_project
from .model import SessionInfo, TaskInfo, check_id
from .read_your_writes import settles_captures
from .store.base import Store
from .validation import check_json, check_text

if TYPE_CHECKING:
    from .assemble.compaction import Progress
    from .assemble.compaction_report import CompactionReport
    from .assemble.manager import ContextManager
    from .components import Components

__all__ = ["SessionMethods"]


def _caller_metadata(metadata: Mapping[str, Any] | None) -> dict[str, Any]:
    out = dict(metadata or {})
    for key in LIFECYCLE_METADATA:
        if key in out:
            raise ValidationError(f"metadata.{key}", "is kept by the lifecycle; it cannot be set")
    return out


class SessionMethods:
    """Mixed into `ContextBase`: it supplies `store`, `project`, `_pid` and `_settle`
    (a session or message captured a moment ago is found: read_your_writes)."""

    store: Store
    project: str
    components: Components
    session_idle_timeout_s: float | None

    def _pid(self, project: str | None) -> str:
        raise NotImplementedError

    def _settle(self, ids: Sequence[str]) -> bool:
        raise NotImplementedError

    def flush(self, timeout: float | None = None) -> None:
        raise NotImplementedError

    def context_manager(self, **options: Any) -> ContextManager:
        raise NotImplementedError

    def _manager(self, project: str | None) -> ContextManager:
        return self.context_manager(project=self._pid(project), extract_facts=False)

    def _last_activity(self, project_id: str, session_ids: Sequence[str]) -> dict[str, float]:
        from .store.shared import SharedReads

        if isinstance(self.store, SharedReads):  # both built-in backends: one lookup
            last = self.store.last_events_of_sessions(project_id, session_ids)
            return {sid: e.ts for sid, e in last.items()}
        out: dict[str, float] = {}
        for sid in session_ids:
            events = self.store.list_events(project_id, sid, last_n=1)
            if events:
                out[sid] = events[-1].ts
        return out

    def _fresh(
        self,
        infos: list[SessionInfo],
        *,
        now: float | None = None,
        idle_timeout_s: float | None = None,
    ) -> list[SessionInfo]:
        """The sessions with the idle rule applied (expired ones written as expired)."""
        timeout = self.session_idle_timeout_s if idle_timeout_s is None else idle_timeout_s
        if timeout is None or not infos:
            return infos
        pid = infos[0].project_id
        at = time.time() if now is None else now
        done = (Status.EXPIRED, Status.ARCHIVED)
        live = [i.session_id for i in infos if i.status not in done]
        last = self._last_activity(pid, live)
        return [
            expire_idle(self.store, i, timeout, now=at, last_activity=last.get(i.session_id))
            for i in infos
        ]

    # -- records ----------------------------------------------------------------------------
    def create_session(
        self,
        session_id: str,
        *,
        project: str | None = None,
        title: str | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> SessionInfo:
        """Create a session (active), or update the title and metadata of a live one.

        The status, status log, current task and archive summary are the lifecycle's:
        an update keeps them, and an archived or expired session is refused
        (ConflictError)."""
        pid = self._pid(project)
        check_id("session_id", session_id)
        check_text("title", title)
        check_json("metadata", dict(metadata or {}))
        given = _caller_metadata(metadata)
        existing = self.store.get_session(pid, session_id)
        if existing is None:
            info = SessionInfo(
                project_id=pid,
                session_id=session_id,
                status=Status.ACTIVE.value,
                title=title,
                metadata=given,
            )
            return save_session(self.store, info, cause="create_session")
        existing = self._fresh([existing])[0]
        kept = {k: existing.metadata[k] for k in LIFECYCLE_METADATA if k in existing.metadata}
        update = {"title": title, "metadata": {**given, **kept}}
        return save_session(self.store, existing.model_copy(update=update), cause="update")

    @settles_captures
    def get_session(self, session_id: str, *, project: str | None = None) -> SessionInfo:
        info = self.store.get_session(self._pid(project), check_id("session_id", session_id))
        if info is None:
            raise NotFoundError("session", session_id)
        return self._with_hidden(info.project_id, self._fresh([info]), [session_id])[0]

    def list_sessions(
        self, *, project: str | None = None, new_project: bool = False
    ) -> list[SessionInfo]:
        """The project's sessions. Another project than the base's own that holds no data
        is a typo: UnknownProjectError (known_projects), unless `new_project`."""
        pid = check_known_project(self.store, self.project, self._pid(project), new_project)
        return self._with_hidden(pid, self._fresh(self.store.list_sessions(pid)))

    def _with_hidden(
        self, pid: str, sessions: list[SessionInfo], ids: Sequence[str] | None = None
    ) -> list[SessionInfo]:
        """The sessions with how many of their events are hidden: a session `forget --soft`
        hid whole still reads as active by its status, and an agent must tell it apart."""
        hidden = self.store.hidden_event_counts(pid, ids) if sessions else {}
        return [
            s.model_copy(update={"hidden_events": hidden[s.session_id]})
            if s.session_id in hidden
            else s
            for s in sessions
        ]

    def upsert_task(self, task: TaskInfo) -> TaskInfo:
        """Create or update a task. A status not given keeps the task's own (a new task
        starts as created); a given one must be a legal move from it."""
        check_id("task_id", task.task_id)
        check_id("session_id", task.session_id)
        if task.parent_task_id is not None:
            check_id("parent_task_id", task.parent_task_id)
        check_text("title", task.title)
        check_json("metadata", task.metadata)
        check_status(task.status)
        existing = self.store.get_task(task.project_id, task.task_id)
        metadata = dict(task.metadata)
        if "status_log" in metadata:
            raise ValidationError("metadata.status_log", "is kept by the lifecycle")
        update: dict[str, Any] = {}
        if existing is not None:
            if "status" not in task.model_fields_set:
                update["status"] = existing.status
            if "status_log" in existing.metadata:
                metadata["status_log"] = existing.metadata["status_log"]
        update["metadata"] = metadata
        return save_task(self.store, task.model_copy(update=update), cause="upsert_task")

    # -- explicit moves ---------------------------------------------------------------------
    def get_task(self, task_id: str, *, project: str | None = None) -> TaskInfo:
        """One task (NotFoundError when the project has none with this id)."""
        task = self.store.get_task(self._pid(project), check_id("task_id", task_id))
        if task is None:
            raise NotFoundError("task", task_id)
        return task

    def list_tasks(
        self,
        session_id: str | None = None,
        *,
        project: str | None = None,
        new_project: bool = False,
    ) -> list[TaskInfo]:
        """The project's tasks, or one session's (another project than the base's own
        must hold data, as for list_sessions)."""
        if session_id is not None:
            check_id("session_id", session_id)
        pid = check_known_project(self.store, self.project, self._pid(project), new_project)
        return self.store.list_tasks(pid, session_id)

    @settles_captures
    def suspend_session(
        self, session_id: str, *, project: str | None = None, cause: str = "suspend"
    ) -> SessionInfo:
        return self._manager(project).suspend_session(session_id, cause=cause)

    @settles_captures
    def resume_session(
        self, session_id: str, *, project: str | None = None, cause: str = "resume"
    ) -> SessionInfo:
        return self._manager(project).resume_session(session_id, cause=cause)

    @settles_captures
    def expire_session(
        self, session_id: str, *, project: str | None = None, cause: str = "expired"
    ) -> SessionInfo:
        return self._manager(project).expire_session(session_id, cause=cause)

    def archive_session(
        self, session_id: str, *, project: str | None = None, cause: str = "archive"
    ) -> SessionInfo:
        """Archive the session and its tasks; the extractive summary of its messages is
        kept in `metadata["archive_summary"]`. The archive is read-only."""
        manager = self._manager(project)
        manager.archive_session(session_id, cause=cause)
        return manager.session(session_id)

    @settles_captures
    def switch_task(
        self,
        session_id: str,
        goal: str = "",
        *,
        task_id: str | None = None,
        parent_task_id: str | None = None,
        background: str | None = None,
        project: str | None = None,
    ) -> TaskInfo:
        """Suspend the current task and make another current (a new one for `goal`, or the
        task `task_id` resumed); returns the current task."""
        manager = self._manager(project)
        tid = manager.switch_task(
            session_id,
            goal,
            task_id=task_id,
            parent_task_id=parent_task_id,
            background=background,
        )
        return manager.task(tid)

    @settles_captures
    def expire_message(
        self,
        session_id: str,
        message_id: str,
        *,
        project: str | None = None,
        cause: str = "retracted",
    ) -> None:
        """Retract a message: it never appears in an assembled prompt again."""
        self._manager(project).expire_message(session_id, message_id, cause=cause)

    def expire_idle_sessions(
        self,
        *,
        project: str | None = None,
        idle_timeout_s: float | None = None,
        now: float | None = None,
    ) -> list[str]:
        """Expire every session idle longer than `idle_timeout_s` (default: the base's
        `session_idle_timeout_s`); returns the ids expired by this sweep."""
        if idle_timeout_s is None and self.session_idle_timeout_s is None:
            raise ValidationError(
                "idle_timeout_s", "no idle timeout given or configured (session_idle_timeout_s)"
            )
        if idle_timeout_s is not None and not idle_timeout_s > 0:  # NaN too
            raise ValidationError(
                "idle_timeout_s", f"must be a number of seconds above 0 (got {idle_timeout_s})"
            )
        infos = self.store.list_sessions(self._pid(project))
        before = {i.session_id: i.status for i in infos}
        after = self._fresh(infos, now=now, idle_timeout_s=idle_timeout_s)
        return [
            i.session_id
            for i in after
            if i.status == Status.EXPIRED and before[i.session_id] != Status.EXPIRED
        ]

    # -- retention ----------------------------------------------------------------------------
    def compact_archived(
        self,
        older_than: float | timedelta | str,
        *,
        project: str | None = None,
        all_projects: bool = False,
        now: float | None = None,
        progress: Progress | None = None,
    ) -> CompactionReport:
        """Compact the sessions archived more than `older_than` ago (seconds, a timedelta
        or "30d"), in this project, another, or all of them: each gets one
        `session_summary` event (extractive: its tasks, requirements, decisions and key
        turns, a few hundred tokens) and its raw turns are hidden as `soft_delete` hides
        them (`restore` brings one back), while what was anchored from them stays. Running
        again does nothing more. `progress(done, total, session_id)` follows the sessions
        of each project. See assemble/compaction.py."""
        from .assemble.compaction import compact_archived
        from .assemble.compaction_report import CompactionReport

        seconds = retention_seconds(older_than)
        pids = self.store.list_projects() if all_projects else [self._pid(project)]
        self.flush()  # turns captured before the call are compacted with the others
        total = CompactionReport()
        for pid in pids:
            total.add(
                compact_archived(self.components, seconds, project=pid, now=now, progress=progress),
                project=pid if all_projects else None,
            )
        return total
