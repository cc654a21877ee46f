"""What `ContextBase.search` adds around the searcher's filters: the `session_id=` and
`repos=` conveniences (merged into an ItemFilter, as the `search_memory` tool and
`assemble_context` take them) and the check that an empty answer is not a mistyped
repository name (UnknownReposError naming the project's repositories, as `ctxbase search
--repo` exits 3)."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import TYPE_CHECKING

from .errors import UnknownReposError, ValidationError
from .store.base import ItemFilter, Store

if TYPE_CHECKING:
    from .retrieve.search import SearchResponse

__all__ = ["check_searched_repos", "merged_filters"]


def _names(field: str, value: str | Sequence[str]) -> tuple[str, ...]:
    names = (value,) if isinstance(value, str) else tuple(value)
    if not names or not all(isinstance(n, str) and n for n in names):
        raise ValidationError(
            field, f"must name at least one, as non-empty strings (got {value!r})"
        )
    return names


def merged_filters(
    filters: ItemFilter | None,
    *,
    session_id: str | None = None,
    repos: str | Sequence[str] | None = None,
) -> ItemFilter | None:
    """`filters` with `session_id` and `repos` added; the same field given both ways with
    different values is a ValidationError (which one was meant cannot be told)."""
    if session_id is None and repos is None:
        return filters
    base = filters if filters is not None else ItemFilter()
    session_ids, repo_names = base.session_ids, base.repos
    if session_id is not None:
        sessions = _names("session_id", session_id)
        if len(sessions) != 1:
            raise ValidationError(
                "session_id", "one session id (filters.session_ids takes several)"
            )
        if base.session_ids is not None and tuple(base.session_ids) != sessions:
            raise ValidationError(
                "session_id",
                f"{session_id!r} and filters.session_ids={list(base.session_ids)!r} disagree: "
                "give one of them",
            )
        session_ids = sessions
    if repos is not None:
        names = _names("repos", repos)
        if base.repos is not None and set(base.repos) != set(names):
            raise ValidationError(
                "repos",
                f"{list(names)!r} and filters.repos={list(base.repos)!r} disagree: "
                "give one of them",
            )
        repo_names = names
    return dataclasses.replace(base, session_ids=session_ids, repos=repo_names)


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
