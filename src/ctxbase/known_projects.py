"""A read of a project the database holds no data of is a typo, not an empty project.

`list_sessions(project="shpo")` answered [] as if the project were empty, and a mistyped
name passed for one with nothing in it. The base's own project is no typo (it answers
empty before anything was captured into it); another one must hold data:
`UnknownProjectError` names those that do, as search, assembly, REST and the command line
say it. `new_project=True` allows one on purpose."""

from __future__ import annotations

from .errors import NEW_PROJECT_HINT, UnknownProjectError
from .store.base import Store

__all__ = ["check_known_project"]


def check_known_project(store: Store, own: str, pid: str, new_project: bool = False) -> str:
    """`pid`, when it is `own`, a project with data or `new_project` says it may be a new
    one (nothing read then); else UnknownProjectError."""
    if pid != own and not new_project:
        known = store.list_projects()
        if pid not in known:
            raise UnknownProjectError(pid, known, start=NEW_PROJECT_HINT)
    return pid
