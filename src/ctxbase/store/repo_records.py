"""The state records that name ingested repositories, and what a forget of repositories
makes of them.

A repository forget (repo_forget.py) rewrites them in the forget's transaction, and a copy
from a backup (copy_filter.py) writes them as that forget left them when the destination
forgot the repository; both use `without_repos`, here in the store layer, so the rule is
one:

- where a repository lives (scope "repository", key its name: anchor/repository.py's
  `RepoPlace`): removed; another repository's record whose `shares` (its overlap consent)
  names it: rewritten without it;
- each knowledge-base tag (scope "kb_tag", key the tag: anchor/kb_versions.py) that covers
  the repository or any of its entities: rewritten without them, or removed when it
  covered those repositories alone;
- the pinned view (scope "kb_pin", key "pin") of a tag so touched: removed, and when the
  tag remains a forget pins it again (`RepoRecords.repin`); a copy, which cannot pin,
  writes the view without the repositories and their entities (`RepoRecords.pinned`).

Each record named is removed with its whole history and, when it remains, written again
as a first version (Store.forget's `replace_state`).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "INGEST_WEAVE_SCOPE",
    "KB_PIN_KEY",
    "KB_PIN_SCOPE",
    "KB_TAG_SCOPE",
    "REPOSITORY_SCOPE",
    "RepoRecords",
    "StateKey",
    "named_repos",
    "without_repos",
]

# Where each repository of a project lives: scope id "", key the repository's name.
REPOSITORY_SCOPE = "repository"
# Knowledge-base tags (key: the tag) and the pinned view of one (key KB_PIN_KEY).
KB_TAG_SCOPE = "kb_tag"
# An ingest's record that its edges are not woven yet (anchor/ingest_weave.py), by repository:
# forgetting the repository removes it with its history.
INGEST_WEAVE_SCOPE = "ingest_weave"
KB_PIN_SCOPE = "kb_pin"
KB_PIN_KEY = "pin"

StateKey = tuple[str, str, str]  # (scope, scope_id, key)


@dataclass
class RepoRecords:
    """The records a forget of repositories covers: (scope, scope_id, key) -> the value to
    write again, or None to remove; the pinned tag, rewritten, to pin again, and its
    pinned view without the repositories (what pinning it again gives, but for the
    count of `missing` entities, kept as it was)."""

    replace: dict[StateKey, Any] = field(default_factory=dict)
    repin: str | None = None
    pinned: dict[str, Any] | None = None

    def for_copy(self) -> dict[StateKey, Any]:
        """`replace` as a copy writes it: a copy cannot pin, so a pinned view whose tag
        remains is written without the repositories, not removed."""
        if self.pinned is None:
            return self.replace
        return {**self.replace, (KB_PIN_SCOPE, "", KB_PIN_KEY): self.pinned}


def named_repos(places: Iterable[str], tags: Iterable[Any]) -> set[str]:
    """The repositories a project's records name: where each lives (`places`, their names)
    and the knowledge-base tags' (`tags`, their values)."""
    names = set(places)
    for value in tags:
        if isinstance(value, Mapping):
            names.update(str(r) for r in value.get("repos") or ())
    return names


def without_repos(
    places: Mapping[str, Any],
    tags: Mapping[str, Any],
    pinned: Any,
    repos: Collection[str],
    entity_ids: Collection[str],
) -> RepoRecords:
    """What forgetting the repositories `repos`, whose entities are `entity_ids`, makes of
    a project's place records (name -> value), tags (name -> value) and pinned view
    (its value, or None)."""
    going, ids = set(repos), set(entity_ids)
    out = RepoRecords()
    for name in sorted(going):  # an ingest's unwoven record goes with its repository
        out.replace[(INGEST_WEAVE_SCOPE, "", name)] = None
    for name, place in places.items():
        key = (REPOSITORY_SCOPE, "", name)
        if name in going:
            out.replace[key] = None
            continue
        shares = place.get("shares") if isinstance(place, Mapping) else None
        if isinstance(shares, list) and going & set(shares):
            left = [s for s in shares if s not in going]
            rewritten = {k: v for k, v in place.items() if k != "shares"}
            out.replace[key] = {**rewritten, "shares": left} if left else rewritten
    touched: set[str] = set()
    for name, value in tags.items():
        if not isinstance(value, Mapping):
            continue
        covered = [str(r) for r in value.get("repos") or ()]
        entities = dict(value.get("entities") or {})
        if not (going & set(covered)) and not (ids & set(entities)):
            continue
        touched.add(name)
        left = [r for r in covered if r not in going]
        kept = {i: v for i, v in entities.items() if i not in ids}
        out.replace[(KB_TAG_SCOPE, "", name)] = (
            {**value, "repos": left, "entities": kept} if left else None
        )
    tag = pinned.get("tag") if isinstance(pinned, Mapping) else None
    if isinstance(tag, str) and tag in touched:
        out.replace[(KB_PIN_SCOPE, "", KB_PIN_KEY)] = None
        if out.replace[(KB_TAG_SCOPE, "", tag)] is not None:
            out.repin = tag
            assert isinstance(pinned, Mapping)
            out.pinned = {
                **pinned,
                **{
                    part: [i for i in pinned.get(part) or () if i not in ids]
                    for part in ("hidden", "shown")
                },
                "repos": [r for r in pinned.get("repos") or () if r not in going],
            }
    return out
