"""Which repository an ingest belongs to, and which listed paths are safe to read.

Entities of an ingested file are keyed by repository and path (`<repo>:<path>`), so two
repositories that both hold `README.md` keep their own entities. The repository's name is
given (`ingest(..., repo=...)`, `ctxbase ingest --repo`), or the last part of the git
remote `origin` (without `.git`), or the name of the folder stored paths are relative to
(the git top level, the parent of a Python package folder, or the folder ingested).
Package metadata (pyproject.toml, setup.py) is not read for it.

A repository is where it lives, not only its name: the store records, per project, the
folder each repository's paths are relative to and its git remote (`RepoPlace`, a state
record of scope `repository` keyed by the name). An ingest under a name another folder
holds would take that folder's files for its own deleted ones, so it is refused
(`RepositoryNameTakenError`, nothing written) unless both have the same git remote: then
it is the same repository, moved or checked out again, and the name follows it; a folder
without a remote that moved says so (`moved=True`, `--moved`). A name whose repository
holds no file any more is free, as is one forgotten (`forget(repo=...)`, which removes its
files and this record: repo_forget.py). Without a name given, an ingest takes the
name its folder (or remote) was ingested under before, so `--repo` is needed once.

A file is held by one repository: an ingest that lists files another recorded repository
holds (the same folder under another name, a folder inside an ingested one, or one that
contains one) would store them twice, so it is refused (`RepositoryOverlapError`, nothing
written) unless `allow_overlap` asks for both copies; that choice is recorded with the
place (`shares`), so later ingests of either repository of the pair need not repeat it.
A repository recorded before folders were (no place) is never counted: where its files
live is unknown.

Ingest never reads outside that folder: a listed path that is a symbolic link (to a file or a
folder, inside or outside the tree) is skipped with its reason, as is a name with `..`, an
absolute name or one whose resolved place is not under the folder.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from ..errors import RepositoryNameTakenError, RepositoryOverlapError, ValidationError
from ..model import Entity, StateFact
from ..store.base import Store
from ..store.repo_records import REPOSITORY_SCOPE

__all__ = [
    "REPOSITORY_SCOPE",
    "REPO_NAME_CHARS",
    "RepoPlace",
    "check_overlap",
    "check_repo_name",
    "choose_repo_name",
    "default_repo_name",
    "name_from_remote",
    "record_place",
    "recorded_places",
    "remote_identity",
    "unsafe_reason",
]

# REPOSITORY_SCOPE: the state records of where each ingested repository lives (scope_id '',
# key: the name; store/repo_records.py, which a forget and a copy from a backup rewrite).

# What a repository name may hold: no `/`, `\\`, `:` or `#` (they separate the repository
# from the path and the symbol in entity keys), no control characters.
REPO_NAME_CHARS = r"[^/\\:#\x00-\x1f\x7f]"
_REPO_NAME = re.compile(f"{REPO_NAME_CHARS}{{1,100}}")
_BAD_CHARS = re.compile(r"[/\\:#\x00-\x1f\x7f]+")


def check_repo_name(name: str, field: str = "repo") -> str:
    """`name` if it is a usable repository name, else ValidationError naming `field`."""
    if (
        not isinstance(name, str)
        or not _REPO_NAME.fullmatch(name)
        or name.strip() != name
        or name in (".", "..")
    ):
        raise ValidationError(
            field,
            "a repository name is 1-100 characters without / \\ : # or control characters, "
            f"and not . or .. (got {name!r})",
        )
    return name


def _cleaned(name: str) -> str | None:
    cleaned = _BAD_CHARS.sub("-", name).strip(" -")[:100]
    return cleaned if cleaned and cleaned not in (".", "..") else None


def name_from_remote(url: str) -> str | None:
    """`httpx` from `https://github.com/encode/httpx.git` or `git@github.com:encode/httpx`."""
    last = re.split(r"[/\\:]", url.strip().rstrip("/\\"))[-1]
    if last.endswith(".git"):
        last = last[: -len(".git")]
    return _cleaned(last)


def default_repo_name(base: Path, remote: str | None) -> str:
    """The remote's last path part, else the name of the folder paths are relative to."""
    if remote:
        named = name_from_remote(remote)
        if named:
            return named
    return _cleaned(base.name) or "root"


def remote_identity(url: str | None) -> str | None:
    """What names a remote whatever the URL's form, without credentials:
    `github.com/encode/httpx` for `https://user:token@github.com/encode/httpx.git`,
    `ssh://git@github.com:22/encode/httpx` and `git@github.com:encode/httpx`."""
    if not url or not url.strip():
        return None
    text = url.strip().rstrip("/")
    if text.endswith(".git"):
        text = text[: -len(".git")].rstrip("/")
    full = re.fullmatch(r"[A-Za-z][A-Za-z0-9+.-]*://(?:[^/]*@)?([^/:@]+)(?::\d*)?(/.*)?", text)
    if full:
        return f"{full.group(1).lower()}{full.group(2) or ''}"
    scp = re.fullmatch(r"(?:[^@/]+@)?([^/:@]+):(?!/)(.+)", text)
    if scp and len(scp.group(1)) > 1:  # not a Windows drive letter
        return f"{scp.group(1).lower()}/{scp.group(2).lstrip('/')}"
    return re.sub(r"(?<=//)[^/]*@", "", text)  # a local path (credentials left out anyway)


@dataclass(frozen=True)
class RepoPlace:
    """Where a repository lives: the folder its paths are relative to (absolute) and its
    git remote (`remote_identity`, None outside git or without an `origin`). `shares`
    names the repositories it was allowed to hold files of too (`allow_overlap`)."""

    root: str
    remote: str | None = None
    shares: tuple[str, ...] = ()

    def same_repository(self, other: RepoPlace) -> bool:
        """The same folder, or checkouts of the same remote."""
        return self.root == other.root or (self.remote is not None and self.remote == other.remote)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"root": self.root, "remote": self.remote}
        if self.shares:
            out["shares"] = list(self.shares)
        return out

    @classmethod
    def from_json(cls, value: Any) -> RepoPlace | None:
        if not isinstance(value, dict) or not isinstance(value.get("root"), str):
            return None
        remote = value.get("remote")
        shares = value.get("shares")
        names = tuple(n for n in shares if isinstance(n, str)) if isinstance(shares, list) else ()
        return cls(value["root"], remote if isinstance(remote, str) else None, names)


def recorded_places(store: Store, project_id: str) -> dict[str, RepoPlace]:
    """Where each repository of the project lives, by name (those ingested since it is
    recorded)."""
    out: dict[str, RepoPlace] = {}
    for fact in store.get_state(project_id, REPOSITORY_SCOPE, ""):
        place = RepoPlace.from_json(fact.value)
        if place is not None:
            out[fact.key] = place
    return out


def choose_repo_name(
    store: Store,
    project_id: str,
    place: RepoPlace,
    *,
    given: str | None,
    derived: str,
    files: Iterable[Entity],
    moved: bool = False,
) -> tuple[str, RepoPlace | None]:
    """The name an ingest of `place` writes under, and where that name was recorded before
    (None: nowhere). Writes nothing (see `record_place`).

    `given` is the name asked for, `derived` the default one (`default_repo_name`),
    `files` the project's file entities. Without `given`, the name the same folder (or
    remote) was ingested under before is taken when `derived` is not one of them and there
    is exactly one. A name recorded for a repository elsewhere (another folder, not the
    same remote) that still holds active files raises RepositoryNameTakenError, unless
    `moved` says this is that folder moved here. A name holding files but recorded nowhere
    (ingested before places were recorded) is free."""
    places = recorded_places(store, project_id)
    name = given
    if name is None:
        mine = [n for n, p in places.items() if p.same_repository(place)]
        name = mine[0] if len(mine) == 1 and derived not in mine else derived
    held = places.get(name)
    holds_files = any(f.active and f.properties.get("repo") == name for f in files)
    if held is not None and holds_files and not held.same_repository(place) and not moved:
        raise RepositoryNameTakenError(name, held.root, place.root)
    if moved and held is not None and held.root != place.root:
        _check_moved(name, held.root, place.root, files)
    if given is None and held is None and not moved:
        _check_not_moved_here(places, place, derived, files)
    return name, held


def _check_not_moved_here(
    places: dict[str, RepoPlace], place: RepoPlace, derived: str, files: Iterable[Entity]
) -> None:
    """A new name for a folder holding the files of a repository whose recorded folder is
    gone: that repository moved here, and ingesting it under a new name would store it
    twice (the old one pointing at nothing). Said before anything is written; an explicit
    --repo is the caller's choice and is not checked."""
    by_repo: dict[str, list[str]] = {}
    for f in files:
        owner, path = f.properties.get("repo"), f.properties.get("path")
        if f.active and isinstance(owner, str) and isinstance(path, str) and owner in places:
            by_repo.setdefault(owner, []).append(path)
    for old, paths in sorted(by_repo.items()):
        old_root = places[old].root
        if old_root == place.root or os.path.isdir(old_root):
            continue
        sample = paths[:200]
        here = sum(1 for path in sample if os.path.isfile(os.path.join(place.root, path)))
        if here and here * 5 >= len(sample) * 4:  # most of its files, at the same paths
            raise ValidationError(
                "moved",
                f"repository {old!r} was recorded at {old_root}, which is gone, and {here}"
                f" of its files are in {place.root}: if it moved here, pass --moved --repo"
                f" {old} (moved=True, repo={old!r}) to move its record; to store this folder"
                f" as another repository, pass --repo {derived} (nothing was changed)",
            )


def _check_moved(name: str, old_root: str, new_root: str, files: Iterable[Entity]) -> None:
    """`moved` is taken at its word only when the recorded folder no longer holds the
    repository's files: a move of a folder still in place would hide all of them."""
    paths = [
        str(f.properties.get("path"))
        for f in files
        if f.active and f.properties.get("repo") == name and f.properties.get("path")
    ]
    still = sum(1 for path in paths[:200] if os.path.isfile(os.path.join(old_root, path)))
    if still:
        raise ValidationError(
            "moved",
            f"repository {name!r} was recorded at {old_root}, which still holds {still} of"
            f" its files: it was not moved; ingest {new_root} under a name of its own"
            " (nothing was changed)",
        )


def check_overlap(
    store: Store,
    project_id: str,
    name: str,
    place: RepoPlace,
    held: RepoPlace | None,
    *,
    folder: str,
    rels: Iterable[str],
    files: Iterable[Entity],
    allow: bool = False,
) -> tuple[RepoPlace, dict[str, int]]:
    """The place to record for repository `name` (with the repositories it shares files
    with) and, by name, how many of the files this ingest lists (`rels`, relative to
    `place.root`; `folder` is the path ingested) other repositories hold too.

    A holder not accepted before (in either place's `shares`) raises
    RepositoryOverlapError, naming the one holding the most, unless `allow`. Writes
    nothing. Only active files of repositories with a recorded place count."""
    places = recorded_places(store, project_id)
    listed = {os.path.join(place.root, rel) for rel in rels}
    shared: dict[str, list[str]] = {}
    for entity in files:
        owner = entity.properties.get("repo")
        other = places.get(owner) if isinstance(owner, str) and owner != name else None
        if other is None or not entity.active:
            continue
        path = str(entity.properties.get("path"))
        if os.path.join(other.root, path) in listed:
            shared.setdefault(str(owner), []).append(path)
    own = set(held.shares if held is not None else ())
    accepted = own | {n for n in shared if name in places[n].shares}
    refused = sorted((n for n in shared if n not in accepted), key=lambda n: (-len(shared[n]), n))
    if refused and not allow:
        first = refused[0]
        other = places[first]
        raise RepositoryOverlapError(
            name,
            first,
            other.root,
            folder,
            len(shared[first]),
            sorted(shared[first])[0],
            same_root=other.root == place.root,
        )
    shares = tuple(sorted(own | set(refused)))
    recorded = RepoPlace(place.root, place.remote, shares)
    return recorded, {n: len(paths) for n, paths in sorted(shared.items())}


def record_place(store: Store, project_id: str, name: str, place: RepoPlace) -> None:
    """Record that repository `name` lives at `place` (its history keeps the former ones)."""
    fact = StateFact(
        project_id=project_id,
        scope=REPOSITORY_SCOPE,
        scope_id="",
        key=name,
        value=place.to_json(),
        cause="ingest",
    )
    store.set_state(fact)


def unsafe_reason(base: Path, rel: str) -> str | None:
    """Why the listed `rel` (relative to the resolved `base`) must not be read, or None.

    Symbolic links are never followed: one inside the tree would store its target twice
    (the target is ingested under its own path), one outside would store what is not part
    of the repository.
    """
    pure = PurePosixPath(rel)
    if (
        not rel
        or pure.is_absolute()
        or "\\" in rel
        or any(p in ("", ".", "..") for p in rel.split("/"))
    ):
        return "unsafe path name (absolute, backslash, empty part, . or ..)"
    full = base / rel
    current = base
    for part in pure.parts:
        current = current / part
        if current.is_symlink():
            try:
                target = Path(os.path.realpath(current))
            except (OSError, ValueError):
                return "symbolic link (not followed)"
            if target == base or base in target.parents:
                where = target.relative_to(base).as_posix()
                return f"symbolic link to {where} inside the repository (not followed)"
            return "symbolic link to outside the repository (not followed)"
    try:
        resolved = Path(os.path.realpath(full))
    except (OSError, ValueError):
        return "unresolvable path"
    if base not in resolved.parents:
        return "resolves outside the repository"
    return None
