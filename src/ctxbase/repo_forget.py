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

The rule for those records is store/repo_records.py's, which a copy from a backup follows too.

The forget leaves a tombstone of each repository's name (kind "repo"): a copy from a
backup taken before it leaves out those records and entities (store/copy_filter.py), and
forgetting the name again is "already forgotten", not "not found". It blocks no ingest: a
repository ingested again under the name is held again, and forgotten like any other. An
ingest running when it is forgotten stops, with nothing of it kept: the store's forget
takes the repository's entities in its own transaction (also those written after this
plan listed them), and the ingest writes nothing after the tombstone
(anchor/forget_watch.py).

Hiding a repository (a soft forget) is not offered: its next ingest would bring its files
back and another folder could take its name meanwhile, so a hidden repository would
neither stay hidden nor come back as it was.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from .anchor.repository import check_repo_name
from .errors import UnknownReposError, ValidationError
from .store.base import Store
from .store.repo_records import (
    KB_PIN_KEY,
    KB_PIN_SCOPE,
    KB_TAG_SCOPE,
    REPOSITORY_SCOPE,
    StateKey,
    without_repos,
)

__all__ = [
    "RepoForget",
    "plan_repo_forget",
    "repo_names",
]


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
    the forget (its pinned view is rewritten by pinning it). `already_forgotten`: names
    the project neither holds nor records but forgot before (their tombstones): nothing is
    left to do for them."""

    names: list[str]
    entity_ids: list[str] = field(default_factory=list)
    replace_state: dict[StateKey, Any] = field(default_factory=dict)
    repin: str | None = None
    already_forgotten: list[str] = field(default_factory=list)


def plan_repo_forget(store: Store, project_id: str, names: Sequence[str]) -> RepoForget:
    """What forgetting the repositories `names` of the project covers; UnknownReposError,
    before anything is done, when one of them is neither ingested nor recorded nor forgotten
    before. A name forgotten before and ingested again since is held: it is forgotten
    again."""
    found = store.repo_entity_ids(project_id, names)
    places = {f.key: f.value for f in store.get_state(project_id, REPOSITORY_SCOPE, "")}
    missing = [n for n in names if n not in found and n not in places]
    gone = store.forgotten_ids(project_id, missing, ("repo",)) if missing else set()
    unknown = [n for n in missing if n not in gone]
    if unknown:
        known = sorted(set(store.list_repos(project_id)) | set(places))
        raise UnknownReposError(unknown, project_id, known)
    plan = RepoForget([n for n in names if n not in gone])
    plan.already_forgotten = [n for n in names if n in gone]
    if not plan.names:
        return plan
    plan.entity_ids = list(dict.fromkeys(i for n in plan.names for i in found.get(n, ())))
    tags = {f.key: f.value for f in store.get_state(project_id, KB_TAG_SCOPE, "")}
    pins = store.get_state(project_id, KB_PIN_SCOPE, "", KB_PIN_KEY)
    records = without_repos(
        places, tags, pins[0].value if pins else None, plan.names, plan.entity_ids
    )
    plan.replace_state, plan.repin = records.replace, records.repin
    return plan
