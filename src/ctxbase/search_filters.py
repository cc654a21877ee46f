"""What `ContextBase.search` adds around the searcher's filters: the check that an empty
answer is not a mistyped repository name (UnknownReposError naming the project's
repositories, as `ctxbase search --repo` exits 3)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .errors import UnknownReposError
from .store.base import ItemFilter, Store

if TYPE_CHECKING:
    from .retrieve.search import SearchResponse

__all__ = ["check_searched_repos"]


def check_searched_repos(
    store: Store, project_id: str, filters: ItemFilter | None, response: SearchResponse
) -> None:
    """An empty answer under repository names the project does not hold is a typo:
    UnknownReposError naming them and the project's repositories. Only an empty answer is
    checked (listing the repositories reads every item of the project)."""
    if filters is None or not filters.repos or response.results:
        return
    known = store.list_repos(project_id)
    unknown = [r for r in filters.repos if r not in known]
    if unknown:
        raise UnknownReposError(unknown, project_id, known)
