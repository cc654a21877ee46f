"""A task's first turn: the role's baseline loads although the task has no history.

Seed 000 has `project_scope_fallback` load the project's documents and its latest code "保证
新任务不脱离项目基线" (so a new task does not lose the project's baseline). Its usual triggers
judge the intent: an intent that points back ("参考之前的写法", "the one from earlier") leaves
it to `referenced_code_first`, and one that matches nothing in the project gets no
baseline. A task that has no turn yet has nothing to point back at and nothing of its own
to match, so neither test says anything about it: when the policy lists
`project_scope_fallback`, a new task's assembly runs it, whatever the intent, and the trace
says why.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..model import Event
from ..store.base import Store
from .policy import PolicySelection
from .policy_strategies import ProjectScopeFallback

__all__ = ["new_task", "with_task_baseline"]

# list_events' window of the session: a task none of whose events is in a full window is
# looked up (one read); in a shorter one its absence is the answer.
_WINDOW = 500


def new_task(
    store: Store,
    project_id: str,
    session_id: str | None,
    task_id: str | None,
    events: Sequence[Event],
    input_event: str | None,
) -> bool:
    """Whether `task_id` has no turn yet: no event of it in the session (`events`, its
    newest) but the latest input `input_event`, the task's first question."""
    if task_id is None:
        return False
    if any(e.task_id == task_id and e.id != input_event for e in events):
        return False
    if session_id is not None and len(events) < _WINDOW:
        return True
    earlier = store.list_events(project_id, session_id, task_id=task_id, last_n=2)
    return all(e.id == input_event for e in earlier)


def with_task_baseline(selection: PolicySelection, task_id: str) -> PolicySelection:
    """The selection with the policy's `project_scope_fallback` run for the new task
    `task_id`, when the policy lists it enabled (already triggered: only the reason)."""
    listed = selection.policy.strategy("project_scope_fallback")
    if not isinstance(listed, ProjectScopeFallback) or not listed.enabled:
        return selection
    reason = (
        f"project_scope_fallback: task {task_id!r} has no history yet: the role's baseline "
        f"(the project's documents and requirements, its latest code; depth "
        f"{listed.fallback_depth}) loads whatever the intent says"
    )
    triggered = selection.strategies
    if all(s.name != listed.name for s in triggered):
        triggered = (*triggered, listed)
    return PolicySelection(
        selection.policy,
        triggered,
        (*selection.reasons, reason),
        selection.role_note,
        selection.source,
    )
