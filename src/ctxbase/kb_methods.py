"""Knowledge-base versions of `ContextBase`: tag the ingested repositories, pin a tag, unpin.

The same calls as the remote SDK's, over `anchor.kb_versions` (which the REST routes call
too), imported on first use.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .anchor.kb_versions import KnowledgeTag, PinReport
    from .components import Components

__all__ = ["KnowledgeMethods"]


class KnowledgeMethods:
    """Mixed into `ContextBase` (a `ComponentsSource`: the kb functions take it)."""

    components: Components

    def tag_knowledge(
        self,
        name: str,
        *,
        repos: Sequence[str] | None = None,
        project: str | None = None,
    ) -> KnowledgeTag:
        """Record the ingested repositories' current versions as `name` (`repos`: only
        those); `pin_knowledge(name)` later makes searches see them as they are now."""
        from .anchor.kb_versions import tag_knowledge

        return tag_knowledge(self.components, name, repos=repos, project=project)

    def knowledge_tags(self, *, project: str | None = None) -> list[KnowledgeTag]:
        """The recorded versions, oldest first, the pinned one marked."""
        from .anchor.kb_versions import knowledge_tags

        return knowledge_tags(self.components, project=project)

    def pin_knowledge(self, name: str, *, project: str | None = None) -> PinReport:
        """Searches and assemblies see the knowledge base as of tag `name` (a view: the
        newer ingest is kept); stored, so it holds after reopening, until unpinned."""
        from .anchor.kb_versions import pin_knowledge

        return pin_knowledge(self.components, name, project=project)

    def unpin_knowledge(self, *, project: str | None = None) -> str | None:
        """Back to the latest versions; the tag that was pinned, or None."""
        from .anchor.kb_versions import unpin_knowledge

        return unpin_knowledge(self.components, project=project)
