"""What `ContextBase.search` adds around the searcher's filters: `filters` given as a
mapping of ItemFilter fields (as REST takes them), the `session_id=` and `repos=`
conveniences (merged into an ItemFilter, as the `search_memory` tool and
`assemble_context` take them) and the checks that every repository and session named is
one the project holds (UnknownReposError naming the project's repositories, as `ctxbase
search --repo` exits 3; NotFoundError naming the session, as `get_session` and the
`search_memory` tool say): a mistyped name beside a real one would otherwise search only
the real one, and say nothing. A type no item can have is a ValidationError listing the
known types, for the same reason."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Collection, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from .errors import NotFoundError, UnknownReposError, ValidationError
from .model import id_arg
from .retrieve.config import FILTER_LIST_FIELDS
from .store.base import ItemFilter, Store
from .store.repo_records import REPOSITORY_SCOPE

if TYPE_CHECKING:
    from .retrieve.search import SearchResponse

__all__ = [
    "as_item_filter",
    "check_repos_held",
    "check_searched",
    "check_searched_repos",
    "check_searched_sessions",
    "check_searched_types",
    "merged_filters",
]

# The fields a mapping may give, by the kind of value each takes (`view`, a pinned
# knowledge-base version, is not one: it is named by kb_version).
_LISTS = FILTER_LIST_FIELDS
_INTS = ("line_from", "line_to")
_FLOATS = ("since", "until")
_FIELDS = (*_LISTS, "path_prefix", *_INTS, *_FLOATS, "latest_only")
# a field's singular, and "path", name the field (a hint, never accepted as the field)
_HINTS = {**{f[:-1]: f for f in _LISTS}, "path": "path_prefix", "session": "session_ids"}


def as_item_filter(filters: Any) -> ItemFilter | None:
    """`filters` as an ItemFilter: None, an ItemFilter, or a mapping of its fields
    ({"session_ids": ["s1"], "since": 1.7e9}; a list field takes one string as a list of
    one). An unknown key, or a value of the wrong type, is a ValidationError naming it."""
    if filters is None or isinstance(filters, ItemFilter):
        return filters
    if not isinstance(filters, Mapping):
        raise ValidationError(
            "filters",
            f"pass an ItemFilter or a mapping of its fields (got {type(filters).__name__})",
        )
    unknown = [k for k in filters if k not in _FIELDS]
    if unknown:
        from .assemble.policy_issues import closest

        named = []
        for key in unknown:
            hint = _HINTS.get(str(key)) or closest(str(key), _FIELDS)
            named.append(f"{key!r}" + (f" (did you mean {hint!r}?)" if hint else ""))
        raise ValidationError(
            "filters",
            f"unknown field(s) {', '.join(named)}; ItemFilter fields: {', '.join(_FIELDS)}",
        )
    values: dict[str, Any] = {}
    for key, value in filters.items():
        field = f"filters.{key}"
        if value is None:
            if key == "latest_only":
                raise ValidationError(field, "must be true or false")
            continue
        if key in _LISTS:
            values[key] = _names(field, value)
        elif key == "path_prefix":
            if not isinstance(value, str):
                raise ValidationError(field, f"must be a string (got {value!r})")
            values[key] = value
        elif key in _INTS:
            if isinstance(value, bool) or not isinstance(value, int):
                raise ValidationError(field, f"must be an integer (got {value!r})")
            values[key] = value
        elif key in _FLOATS:
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise ValidationError(field, f"must be a number (got {value!r})")
            if not math.isfinite(value):
                raise ValidationError(field, f"must be finite (got {value!r})")
            values[key] = float(value)
        elif not isinstance(value, bool):  # latest_only
            raise ValidationError(field, f"must be true or false (got {value!r})")
        else:
            values[key] = value
    return ItemFilter(**values)


def _names(field: str, value: str | Sequence[str]) -> tuple[str, ...]:
    if isinstance(getattr(value, "id", None), str):
        id_arg(field, value)  # a SessionInfo where its id goes: say so
    if not isinstance(value, str | list | tuple | set | frozenset):
        raise ValidationError(field, f"must be a string or a list of strings (got {value!r})")
    names = (value,) if isinstance(value, str) else tuple(value)
    for i, name in enumerate(names):
        if isinstance(getattr(name, "id", None), str):
            id_arg(f"{field}[{i}]", name)
    if not names or not all(isinstance(n, str) and n for n in names):
        raise ValidationError(
            field, f"must name at least one, as non-empty strings (got {value!r})"
        )
    return names


def merged_filters(
    filters: ItemFilter | Mapping[str, Any] | None,
    *,
    session_id: str | None = None,
    repos: str | Sequence[str] | None = None,
) -> ItemFilter | None:
    """`filters` (an ItemFilter or a mapping of its fields, see `as_item_filter`) with
    `session_id` and `repos` added; the same field given both ways with different values is
    a ValidationError (which one was meant cannot be told)."""
    filters = as_item_filter(filters)
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


def check_searched(
    store: Store, project_id: str, filters: ItemFilter | None, response: SearchResponse
) -> None:
    """The repositories, sessions and types the filters name are all real (see each)."""
    check_searched_repos(store, project_id, filters, response)
    check_searched_sessions(store, project_id, filters, response)
    check_searched_agents(store, project_id, filters, response)
    check_searched_types(store, project_id, filters, response)


def check_searched_repos(
    store: Store, project_id: str, filters: ItemFilter | None, response: SearchResponse
) -> None:
    """Every repository named must be one the project holds: UnknownReposError naming the
    others and the project's repositories, whatever was found under the rest. A name some
    candidate of the search came from is held (nothing read); see `check_repos_held`."""
    if filters is None or not filters.repos:
        return
    seen = {c.item.repo for c in (*response.results, *response.considered)}
    check_repos_held(store, project_id, filters.repos, seen)


def check_repos_held(
    store: Store, project_id: str, names: Sequence[str], seen: Collection[str | None] = ()
) -> None:
    """UnknownReposError for the `names` the project holds no repository of (a typo is not
    an empty answer). Names in `seen` (what an answer came from) are held; the others
    are looked up in the records of where each ingested repository lives (one read by
    key), and only a name in neither lists the repositories the items name (a read of
    every item of the project: a typo, or a repository ingested before its place was
    recorded). A repository forgotten whole (its tombstone) is no typo: nothing is left
    of it to answer."""
    unseen = [r for r in dict.fromkeys(names) if r not in seen]
    if not unseen:
        return
    places = {f.key for f in store.get_state(project_id, REPOSITORY_SCOPE, "")}
    unseen = [r for r in unseen if r not in places]
    if not unseen:
        return
    held = store.list_repos(project_id)
    unknown = [r for r in unseen if r not in held]
    if unknown:  # one forgotten whole before holds nothing now: an empty answer is true
        unknown = [
            r for r in unknown if r not in store.forgotten_ids(project_id, unknown, ("repo",))
        ]
    if unknown:
        raise UnknownReposError(unknown, project_id, sorted(set(held) | places))


def check_searched_sessions(
    store: Store, project_id: str, filters: ItemFilter | None, response: SearchResponse
) -> None:
    """Every session id named must be one the project holds: NotFoundError naming the
    others (`ids` lists every one), as `get_session` says for one, whatever was found in
    the rest. A session some candidate of the search belongs to is held; each other one is
    read by its key."""
    if filters is None or not filters.session_ids:
        return
    seen = {c.item.session_id for c in (*response.results, *response.considered)}
    unseen = [s for s in dict.fromkeys(filters.session_ids) if s not in seen]
    unknown = [s for s in unseen if store.get_session(project_id, s) is None]
    if len(unknown) == 1:
        raise NotFoundError("session", unknown[0])
    if unknown:
        named = ", ".join(repr(s) for s in unknown)
        raise NotFoundError(
            "session", unknown[0], ids=unknown, message=f"sessions {named} not found"
        )


def check_searched_agents(
    store: Store, project_id: str, filters: ItemFilter | None, response: SearchResponse
) -> None:
    """Every agent id (and role) named must be one some shown item of the project was
    recorded by: NotFoundError naming the others, as for a session, not an empty answer
    for a typo. An agent some candidate of the search came from is known (nothing read);
    each other one is looked up among the project's items (one item suffices)."""
    if filters is None:
        return
    for kind, field, names in (
        ("agent", "agent_id", filters.agent_ids),
        ("agent role", "agent_role", filters.agent_roles),
    ):
        if not names:
            continue
        seen = {getattr(c.item, field) for c in (*response.results, *response.considered)}
        unknown = [
            a
            for a in dict.fromkeys(names)
            if a not in seen and not store.filter_item_ids(project_id, _only(field, a), limit=1)
        ]
        if unknown:
            named = ", ".join(repr(a) for a in unknown)
            raise NotFoundError(
                kind,
                unknown[0],
                ids=unknown,
                message=f"no shown item of project {project_id!r} was recorded by {kind} {named}",
            )


def _only(field: str, name: str) -> ItemFilter:
    return ItemFilter(agent_ids=(name,)) if field == "agent_id" else ItemFilter(agent_roles=(name,))


def check_searched_types(
    store: Store, project_id: str, filters: ItemFilter | None, response: SearchResponse
) -> None:
    """Every type named must be one an item can have: an event type, an entity type this
    process knows (built in or registered) or one the project's entities have. Another one
    (a typo, a made-up name) is a ValidationError listing the known types, never an empty
    answer. A type some candidate of the search has is known (nothing read)."""
    if filters is None or not filters.types:
        return
    seen = {c.item.type for c in (*response.results, *response.considered)}
    unseen = [t for t in dict.fromkeys(filters.types) if t not in seen]
    if not unseen:
        return
    from .anchor.entities import entity_types
    from .model import event_type_names

    known = set(event_type_names()) | set(entity_types())
    unknown = [t for t in unseen if t not in known]
    if unknown:
        known |= set(store.entity_type_counts(project_id))
        unknown = [t for t in unknown if t not in known]
    if unknown:
        which = "types" if len(unknown) > 1 else "type"
        raise ValidationError(
            "filters.types",
            f"unknown {which} {', '.join(map(repr, unknown))}; known types: "
            f"{', '.join(sorted(known))}",
        )
