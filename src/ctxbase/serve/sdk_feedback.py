"""The remote SDK's feedback requests (`FeedbackCalls`, mixed into sdk_calls.Calls): the
signatures of ContextBase.feedback, get_feedback and feedback_history."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from ..memory_feedback import Feedback, check_label
from ..model import check_id

if TYPE_CHECKING:
    from .sdk_calls import Call

__all__ = ["FeedbackCalls"]


class FeedbackCalls:
    """Supplies `feedback`, `get_feedback` and `feedback_history` to `Calls`."""

    identity: str

    def _path(self, project: str | None, *parts: str) -> str:
        raise NotImplementedError

    def feedback(
        self,
        node_id: str,
        label: str | None = None,
        *,
        confidence: float | None = None,
        context_id: str | None = None,
        note: str | None = None,
        by: str | None = None,
        project: str | None = None,
    ) -> Call[Feedback]:
        from .sdk_calls import Call

        body: dict[str, Any] = {
            "node_id": check_id("node_id", node_id),
            "label": check_label(label),  # refused here, as embedded, not sent as null
            "confidence": confidence,
            "context_id": context_id,
            "note": note,
            "by": by or self.identity,
        }
        return Call("POST", self._path(project, "feedback"), Feedback.model_validate, body=body)

    def _read(self, node_id: str, project: str | None) -> str:
        return self._path(project, "feedback", quote(check_id("node_id", node_id), safe=""))

    def get_feedback(self, node_id: str, *, project: str | None = None) -> Call[Feedback | None]:
        from .sdk_calls import Call

        def parse(raw: Any) -> Feedback | None:
            return None if raw["current"] is None else Feedback.model_validate(raw["current"])

        return Call("GET", self._read(node_id, project), parse)

    def feedback_history(self, node_id: str, *, project: str | None = None) -> Call[list[Feedback]]:
        from .sdk_calls import Call

        def parse(raw: Any) -> list[Feedback]:
            return [Feedback.model_validate(f) for f in raw["history"]]

        return Call("GET", self._read(node_id, project), parse)
