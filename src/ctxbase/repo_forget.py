"""What a hard forget of ingested repositories covers (`ContextBase.forget(repo=...)`,
`ctxbase forget --repo NAME`).

A repository is every entity an ingest wrote under its name (`properties["repo"]`, and the
`repo` of their search units): its files (each holding the file's content hash, so an
ingest after the forget reads every file again, as new), their code, document and text
units with their chunks, the earlier versions kept of them and the copies knowledge-base
tags keep (`<id>@v<n>`), active or soft-deleted. The store forgets them as it forgets named
entities (rows, search units, vectors, edges to and from them, records keyed by their ids,
traces redacted), and in the same transaction the state records that hold the
repository's names and ids, each without its history:

- where the repository lives (repository.py's `RepoPlace`), so its name and folder are
  free again, and the name in other repositories' `shares` (their overlap consent);
- each knowledge-base tag that covers it: rewritten without its repository and entities,
  or removed when it covered that repository alone; the pinned view goes with it and is
  pinned again afterwards when its tag remains (kb_versions.py).

Hiding a repository (a soft forget) is not offered: its next ingest would bring its files
back and another folder could take its name meanwhile, so a hidden repository would
neither stay hidden nor come back as it was.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .anchor.repository import REPOSITORY_SCOPE, check_repo_name, recorded_places
from .errors import UnknownReposError, ValidationError
from .retrieve.kb_view import KB_PIN_KEY, KB_PIN_SCOPE, KB_TAG_SCOPE
from .store.base import Store

__all__ = [
    "RepoForget",
    "plan_repo_forget",
    "repo_names",
]

StateKey = tuple[str, str, str]


def repo_names(repo: str | None, repos: Sequence[str] | None) -> list[str]:
    """The repository names a forget was given (`repo` and `repos`), checked, in order."""
    if isinstance(repos, str):
        raise ValidationError("repos", f"must be a list of repository names (got {repos!r})")
    names = ([] if repo is None else [repo]) + list(repos or ())
    return [check_repo_name(n, "repo") for n in dict.fromkeys(names)]


@dataclass
class RepoForget:
    """What forgetting `names` covers: their entities, the state records to rewrite
    (None: to remove; see Store.forget's `replace_state`) and the tag to pin again after
    the forget (its pinned view is rewritten by pinning it)."""

    names: list[str]
    entity_ids: list[str] = field(default_factory=list)
    replace_state: dict[StateKey, Any] = field(default_factory=dict)
    repin: str | None = None


def plan_repo_forget(store: Store, project_id: str, names: Sequence[str]) -> RepoForget:
    """What forgetting the repositories `names` of the project covers; UnknownReposError,
    before anything is done, when one of them is neither ingested nor recorded."""
    found = store.repo_entity_ids(project_id, names)
    places = recorded_places(store, project_id)
    unknown = [n for n in names if n not in found and n not in places]
    if unknown:
        known = sorted(set(store.list_repos(project_id)) | set(places))
        raise UnknownReposError(unknown, project_id, known)
    plan = RepoForget(list(names))
    plan.entity_ids = list(dict.fromkeys(i for n in names for i in found.get(n, ())))
    going = set(names)
    for name, place in places.items():
        key = (REPOSITORY_SCOPE, "", name)
        if name in going:
            plan.replace_state[key] = None
        elif going & set(place.shares):
            shares = [s for s in place.shares if s not in going]
            plan.replace_state[key] = {**place.to_json(), "shares": shares}
            if not shares:
                del plan.replace_state[key]["shares"]
    _plan_tags(store, project_id, plan, set(plan.entity_ids))
    return plan


def _plan_tags(store: Store, project_id: str, plan: RepoForget, ids: set[str]) -> None:
    """Tags that cover a forgotten repository or entity: rewritten without them, removed
    when nothing else is left; the pinned view with its tag."""
    going = set(plan.names)
    touched: set[str] = set()
    for fact in store.get_state(project_id, KB_TAG_SCOPE, ""):
        value = fact.value
        if not isinstance(value, Mapping):
            continue
        repos = [str(r) for r in value.get("repos") or ()]
        entities = dict(value.get("entities") or {})
        if not (going & set(repos)) and not (ids & set(entities)):
            continue
        touched.add(fact.key)
        left = [r for r in repos if r not in going]
        kept = {i: v for i, v in entities.items() if i not in ids}
        rewritten = {**value, "repos": left, "entities": kept} if left else None
        plan.replace_state[(KB_TAG_SCOPE, "", fact.key)] = rewritten
    pins = store.get_state(project_id, KB_PIN_SCOPE, "", KB_PIN_KEY)
    pinned = pins[0].value if pins else None
    tag = pinned.get("tag") if isinstance(pinned, Mapping) else None
    if isinstance(tag, str) and tag in touched:
        plan.replace_state[(KB_PIN_SCOPE, "", KB_PIN_KEY)] = None
        if plan.replace_state[(KB_TAG_SCOPE, "", tag)] is not None:
            plan.repin = tag
