"""Which files of a folder to ingest: `git ls-files` in a repository, else a .gitignore walk.

Outside a repository each folder's .gitignore applies below it, matched by pathspec's
GitIgnoreSpec (git's own rules: negation, `**`, anchoring, directory-only patterns), and the
last matching rule wins, as in git.
Tool and dependency folders (.git, node_modules, __pycache__, virtual environments, caches)
are always skipped.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pathspec

__all__ = [
    "ALWAYS_SKIPPED_DIRS",
    "GitInfo",
    "IgnoreRule",
    "compile_gitignore",
    "git_info",
    "is_ignored",
    "list_files",
    "walk_files",
]

ALWAYS_SKIPPED_DIRS = frozenset(
    {
        ".git",
        ".hg",
        ".svn",
        "node_modules",
        "__pycache__",
        ".venv",
        "venv",
        ".tox",
        ".nox",
        ".mypy_cache",
        ".pytest_cache",
        ".ruff_cache",
        ".eggs",
        ".idea",
        ".vscode",
    }
)
_GIT_TIMEOUT_S = 60


@dataclass(frozen=True)
class IgnoreRule:
    """The patterns of one .gitignore file, in folder `base` of the walk root."""

    base: str  # "" at the top
    spec: pathspec.GitIgnoreSpec


def compile_gitignore(text: str, base: str = "") -> list[IgnoreRule]:
    """The rules of one .gitignore file located in folder `base`.

    Matching is pathspec's GitIgnoreSpec (git's wildmatch rules, negation, `**`, anchoring,
    directory-only patterns) rather than our own translation: the edge cases are git's."""
    return [IgnoreRule(base, pathspec.GitIgnoreSpec.from_lines(text.splitlines()))]


def is_ignored(rules: list[IgnoreRule], rel_path: str, is_dir: bool) -> bool:
    """Whether the last rule matching `rel_path` (relative to the walk root) ignores it;
    deeper .gitignore files come later and so win, as in git."""
    ignored = False
    for rule in rules:
        if rule.base:
            if not rel_path.startswith(rule.base + "/"):
                continue
            sub = rel_path[len(rule.base) + 1 :]
        else:
            sub = rel_path
        # a trailing slash marks a directory: patterns like `build/` match only those
        verdict = rule.spec.check_file(sub + "/" if is_dir else sub).include
        if verdict is not None:
            ignored = verdict
    return ignored


def _skipped_dir(directory: Path, name: str) -> bool:
    if name in ALWAYS_SKIPPED_DIRS or name.endswith(".egg-info"):
        return True
    return (directory / name / "pyvenv.cfg").is_file()  # a virtual environment by any name


def walk_files(root: Path) -> list[str]:
    """Files under `root` (relative posix paths, sorted) not ignored by any .gitignore.

    Links to folders are listed, not entered, so that an ingest reports them as skipped."""
    found: list[str] = []
    rules: list[IgnoreRule] = []
    for current, dirs, files in os.walk(root):
        here = Path(current)
        rel_dir = here.relative_to(root).as_posix()
        rel_dir = "" if rel_dir == "." else rel_dir
        ignore_file = here / ".gitignore"
        if ignore_file.is_file():
            with contextlib.suppress(OSError):  # an unreadable .gitignore ignores nothing
                rules.extend(compile_gitignore(ignore_file.read_text("utf-8", "replace"), rel_dir))
        kept_dirs = []
        for name in sorted(dirs):
            rel = f"{rel_dir}/{name}" if rel_dir else name
            if _skipped_dir(here, name) or is_ignored(rules, rel, True):
                continue
            if (here / name).is_symlink():
                found.append(rel)  # not entered (cycles, folders outside the tree): reported
                continue
            kept_dirs.append(name)
        dirs[:] = kept_dirs
        for name in files:
            rel = f"{rel_dir}/{name}" if rel_dir else name
            if not is_ignored(rules, rel, False):
                found.append(rel)
    return sorted(found)


@dataclass(frozen=True)
class GitInfo:
    toplevel: Path
    commit: str | None
    remote: str | None = None  # the URL of the remote `origin`, if any


def _git(args: list[str], cwd: Path) -> str | None:
    try:
        done = subprocess.run(
            ["git", *args],
            cwd=cwd,
            capture_output=True,
            timeout=_GIT_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None  # no git here: the caller walks the folder instead
    if done.returncode != 0:
        return None
    return done.stdout.decode("utf-8", "surrogateescape")


def git_info(folder: Path) -> GitInfo | None:
    """The repository holding `folder` and its HEAD commit, or None outside a repository."""
    top = _git(["rev-parse", "--show-toplevel"], folder)
    if not top or not top.strip():
        return None
    head = _git(["rev-parse", "HEAD"], folder)  # None in a repository without commits
    remote = _git(["config", "--get", "remote.origin.url"], folder)
    return GitInfo(
        Path(top.strip()),
        head.strip() if head and head.strip() else None,
        remote.strip() if remote and remote.strip() else None,
    )


def list_files(root: Path) -> tuple[list[str], GitInfo | None, dict[str, str]]:
    """Files to ingest under `root`, relative to it, the repository info if any, and the
    files git lists that are left out all the same: those in a tool or dependency folder
    (path -> the folder). A walk outside a repository does not enter such folders."""
    info = git_info(root)
    if info is not None:
        listed = _git(["ls-files", "-co", "--exclude-standard", "-z"], root)
        if listed is not None:
            files: set[str] = set()
            held_back: dict[str, str] = {}
            for rel in listed.split("\0"):
                if not rel:
                    continue
                parts = rel.split("/")
                tool = next(
                    (p for p in parts[:-1] if p in ALWAYS_SKIPPED_DIRS or p.endswith(".egg-info")),
                    None,
                )
                present = (root / rel).is_file() or (root / rel).is_symlink()
                if tool is not None:
                    if present:  # committed on purpose, maybe: named, not dropped unsaid
                        held_back[rel] = tool
                    continue
                # Tracked but deleted files are listed too; links are kept, to be reported.
                if present:
                    files.add(rel)
            return sorted(files), info, dict(sorted(held_back.items()))
    return walk_files(root), info, {}
