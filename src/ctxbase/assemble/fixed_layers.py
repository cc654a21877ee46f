"""The fixed layers' items (seed 003): the state layer's facts, one line each, and the
task layer's goal and background. They are packed before memory and history take what is
left; the budget's pool then gives their unused room to the state's facts first
(budget.REDISTRIBUTION_ORDER)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ..model import StateFact, TaskInfo
from .budget import BudgetItem
from .state import Scope, render_fact

__all__ = ["state_items", "task_items"]


def state_items(
    scopes: Sequence[tuple[Scope, str, float]],
    facts: Mapping[tuple[str, str], Mapping[str, StateFact]],
) -> list[BudgetItem]:
    """The state layer: each scope's facts, newest first; a key a narrower scope already
    gave is left out (other tasks' facts are listed as theirs)."""
    items: list[BudgetItem] = []
    seen: set[str] = set()
    for scope, scope_id, weight in scopes:
        held = facts.get((scope, scope_id), {})
        for key, fact in sorted(held.items(), key=lambda kv: -kv[1].updated_at):
            if scope != "task" or weight == 1.0:
                if key in seen:
                    continue  # the narrower scope already said it
                seen.add(key)
            line = "- " + render_fact(key, fact.value)
            if weight == 0.4:
                line += f" (task {scope_id})"
            items.append(
                BudgetItem(f"state:{scope}:{scope_id}:{key}", line, weight, source=f"state:{scope}")
            )
    return items


def task_items(task: TaskInfo | None, others: Sequence[TaskInfo]) -> list[BudgetItem]:
    """The task layer: the current task's goal and background, and (global view) the
    session's other tasks."""
    items: list[BudgetItem] = []
    if task is not None:
        text = f"- goal: {task.metadata.get('goal') or task.title}"
        if task.metadata.get("background"):
            text += f"\n- background: {task.metadata['background']}"
        items.append(BudgetItem(f"task:{task.task_id}", text, 1.0, source="task"))
    for other in others:
        if task is None or other.task_id != task.task_id:
            items.append(
                BudgetItem(
                    f"task:{other.task_id}",
                    f"- {other.status} task: {other.title}",
                    0.3,
                    source="task",
                )
            )
    return items
