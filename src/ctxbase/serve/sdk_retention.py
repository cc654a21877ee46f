"""The remote SDK's retention request (`RetentionCalls`, mixed into sdk_calls.Calls): the
signature of ContextBase.compact_archived, one project at a time."""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING, Any

from ..assemble.compaction_report import CompactionReport
from ..errors import ValidationError
from ..forgetting import retention_seconds

if TYPE_CHECKING:
    from .sdk_calls import Call

__all__ = ["RetentionCalls"]


def _report(answer: Any) -> CompactionReport:
    return CompactionReport(**answer)


class RetentionCalls:
    """Supplies `compact_archived` to `Calls`."""

    def _path(self, project: str | None, *parts: str) -> str:
        raise NotImplementedError

    def compact_archived(
        self,
        older_than: float | timedelta | str,
        *,
        project: str | None = None,
        all_projects: bool = False,
        now: float | None = None,
    ) -> Call[CompactionReport]:
        """Compact the project's sessions archived more than `older_than` ago."""
        from .sdk_calls import Call

        if all_projects:
            raise every_project_refused(
                "compact-archived --older-than 30d --all-projects", "--archive-retention 30d"
            )
        if now is not None:
            raise ValidationError("now", "the server compacts by its own clock")
        body = {"older_than": retention_seconds(older_than)}  # bad input fails here
        path = self._path(project, "sessions", "compact-archived")
        return Call("POST", path, _report, body=body)


def every_project_refused(command: str, serve_option: str) -> ValidationError:
    """A remote call for every project at once: a request names one project; the operator's
    commands on the server do them all."""
    return ValidationError(
        "all_projects",
        f"a request names one project: call once per project, or on the server run "
        f"`ctxbase {command}` (or `ctxbase serve {serve_option}`) for every project",
    )
