"""The SDK's requests for knowledge-base versions (serve/routes_kb.py), with the
signatures of ContextBase's methods; `Calls` (sdk_calls.py) takes them in."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ..anchor.kb_versions import KnowledgeTag, PinReport

if TYPE_CHECKING:
    from .sdk_calls import Call

__all__ = ["KnowledgeCalls"]


def _tag(raw: Mapping[str, Any]) -> KnowledgeTag:
    return KnowledgeTag(
        str(raw["name"]),
        tuple(raw["repos"]),
        int(raw["entities"]),
        float(raw["created_at"]),
        bool(raw.get("pinned", False)),
    )


def _pin(raw: Mapping[str, Any]) -> PinReport:
    return PinReport(
        str(raw["tag"]), tuple(raw["repos"]), int(raw["hidden"]), int(raw["shown"]),
        int(raw["missing"]), raw.get("replaced"), int(raw.get("soft_deleted", 0)),
    )  # fmt: skip


class KnowledgeCalls:
    """Mixed into `Calls`: `_path` builds a project's path."""

    def _path(self, project: str | None, *parts: str) -> str:
        raise NotImplementedError  # Calls' own

    def tag_knowledge(
        self,
        name: str,
        *,
        repos: Sequence[str] | None = None,
        project: str | None = None,
    ) -> Call[KnowledgeTag]:
        from .sdk_calls import Call

        body = {"name": name, "repos": None if repos is None else list(repos)}
        return Call("POST", self._path(project, "kb", "versions"), _tag, body=body)

    def knowledge_tags(self, *, project: str | None = None) -> Call[list[KnowledgeTag]]:
        from .sdk_calls import Call

        return Call("GET", self._path(project, "kb", "versions"), lambda r: [_tag(t) for t in r])

    def pin_knowledge(self, name: str, *, project: str | None = None) -> Call[PinReport]:
        from .sdk_calls import Call

        return Call("PUT", self._path(project, "kb", "pin"), _pin, body={"tag": name})

    def unpin_knowledge(self, *, project: str | None = None) -> Call[str | None]:
        from .sdk_calls import Call

        return Call("DELETE", self._path(project, "kb", "pin"), lambda r: r["unpinned"])
