"""Which repository an ingest belongs to, and which listed paths are safe to read.

Entities of an ingested file are keyed by repository and path (`<repo>:<path>`), so two
repositories that both hold `README.md` keep their own entities. The repository's name is
given (`ingest(..., repo=...)`, `ctxbase ingest --repo`), or the last part of the git
remote `origin` (without `.git`), or the name of the folder stored paths are relative to
(the git top level, the parent of a Python package folder, or the folder ingested).
Package metadata (pyproject.toml, setup.py) is not read for it.

Ingest never reads outside that folder: a listed path that is a symbolic link (to a file or a
folder, inside or outside the tree) is skipped with its reason, as is a name with `..`, an
absolute name or one whose resolved place is not under the folder.
"""

from __future__ import annotations

import os
import re
from pathlib import Path, PurePosixPath

from ..errors import ValidationError

__all__ = [
    "REPO_NAME_CHARS",
    "check_repo_name",
    "default_repo_name",
    "name_from_remote",
    "unsafe_reason",
]

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
