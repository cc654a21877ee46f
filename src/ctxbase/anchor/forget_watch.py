"""An ingest and a forget of its repository at once: the forget wins, and the ingest says so.

`forget(repo="big")` (or `ctxbase forget --repo big`, from another process) while an
ingest of `big` runs must not end with `big` stored again, nor partly: the user was told
it is forgotten. A forget leaves a tombstone of the repository's name with its time
(`Store.forgotten_times`, kind "repo"). The ingest reads it once it knows the name
(`ForgetWatch.start`), and then:

- each of its write transactions (`writing()`) first takes the project's write lock
  (`Store.hold_project`) and reads the tombstone again: one newer than at the start
  means the repository was forgotten since, and the transaction is rolled back with
  RepositoryForgottenError, so nothing is written after the forget;
- the forget takes, in its own transaction, every entity the repository holds then, not
  only those it listed before (store/forget_steps.py), so what the ingest committed
  before it goes with it;
- the ingest reads the tombstone between batches and at its end too (`check()`), so one
  with nothing to write (every file unchanged) does not report success either.

A tombstone found at the start that is newer than the ingest's own start time was left by
a forget that ran while the ingest read the store (its list of stored files may predate
it): the ingest stops as well. One older than that was left before: the ingest is a new
one and holds the repository again (repo_forget.py). The times are the forgetting and the
ingesting processes' clocks, the same one on one machine.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from ..errors import RepositoryForgottenError
from ..store.base import Store

__all__ = ["ForgetWatch"]


@dataclass
class ForgetWatch:
    """Watches the tombstone of the repository `repo` an ingest writes; `files_done` of
    `files_total` say how far it got, for the error."""

    store: Store
    project_id: str
    repo: str
    seen: float | None  # the tombstone's time when the ingest started (None: none)
    files_total: int = 0
    files_done: int = 0

    @classmethod
    def start(
        cls, store: Store, project_id: str, repo: str, started_at: float, files_total: int
    ) -> ForgetWatch:
        """Read the tombstone; RepositoryForgottenError when a forget left it after
        `started_at` (a unix time: the ingest's start)."""
        seen = store.forgotten_times(project_id, [repo], "repo").get(repo)
        watch = cls(store, project_id, repo, seen, files_total)
        if seen is not None and seen >= started_at:
            raise watch._error(seen)
        return watch

    def check(self) -> None:
        """RepositoryForgottenError when the repository was forgotten since the start."""
        times = self.store.forgotten_times(self.project_id, [self.repo], "repo")
        if self.repo in times and times[self.repo] != self.seen:
            raise self._error(times[self.repo])

    @contextmanager
    def writing(self) -> Iterator[None]:
        """A write transaction of the ingest that is refused (rolled back) once the
        repository was forgotten since the start."""
        with self.store.transaction():
            self.store.hold_project(self.project_id)
            self.check()
            yield

    def _error(self, at: float | None) -> RepositoryForgottenError:
        return RepositoryForgottenError(self.repo, at, self.files_done, self.files_total)
