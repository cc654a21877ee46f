"""Waiting for the background embedder: with a bar if asked, and a warning on timeout.

`ContextBase.wait_for_embeddings` waits here. A wait that runs out says so (logger
`ctxbase.embedding_wait`, WARNING: shown on stderr even when logging is not
configured) with how many items of the project still have no vector and the pace so far,
instead of only returning False: a caller that ignores the result still learns that the
embedding is not done. With `progress`, the vectors made out of the backlog are shown on
stderr as `ctxbase ingest --wait-embeddings` shows them (progress.py).

The remote SDK's wait is a series of short server-side waits (`POST /v1/embeddings/wait`,
each answering the project's backlog); `RemoteWait` keeps its clock, bar and warning, so a
remote wait shows and says the same as an embedded one.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Collection
from typing import TYPE_CHECKING, Any

from .progress import Progress
from .validation import check_timeout

if TYPE_CHECKING:
    from .progress import Bar
    from .retrieve.embedding_worker import EmbeddingWorker
    from .store.base import Store

__all__ = ["BACKLOG_CAP", "RemoteWait", "pending_vectors", "wait_for_vectors"]

log = logging.getLogger(__name__)

# Counting the backlog stops here; a larger one is reported as this many.
BACKLOG_CAP = 10_000_000

# How often a wait with a bar looks at the backlog.
_POLL_S = 0.5

# The longest server-side wait of a remote wait (well under the client's HTTP timeout);
# with a bar, the server is asked this often.
_REMOTE_STEP_S = 10.0
_REMOTE_BAR_STEP_S = 1.0


def pending_vectors(
    store: Store, model: str, project: str | None, replacing: Collection[str] | None = None
) -> int:
    """Items of `project` (None: of every project) with no vector for `model` (counted up
    to BACKLOG_CAP); with `replacing`, as the worker embeds them (`count_pending`)."""
    from .retrieve.embedding_worker import count_pending

    return count_pending(store, model, project, replacing, BACKLOG_CAP)


def wait_for_vectors(
    store: Store,
    worker: EmbeddingWorker,
    project: str | None,
    timeout: float | None,
    *,
    progress: bool = False,
    warn: bool = True,
    started: float | None = None,
) -> bool:
    """Wait until the worker leaves no item of `project` without a vector (the worker
    serves projects in turn: another project's backlog is not waited for; None: no item of
    any project); False when
    `timeout` (seconds, None: no limit) passes first, after logging how much is left (unless
    not `warn`). `started`: when the caller's wait began (time.monotonic()), for the log."""
    model = worker.embedder.name
    now = time.monotonic()
    started = now if started is None else started
    deadline = None if timeout is None else now + max(0.0, timeout)
    replacing = worker.replacing()  # the projects whose vectors it may replace
    total = pending_vectors(store, model, project, replacing)  # the backlog: pace and bar
    if progress and total:
        with Progress().bar("embedding", total=total, unit="vector") as bar:
            while True:
                left = None if deadline is None else deadline - time.monotonic()
                step = _POLL_S if left is None else max(0.0, min(_POLL_S, left))
                if worker.wait_idle(step, project):
                    bar.update_to(total)
                    return True
                remaining = pending_vectors(store, model, project, replacing)
                bar.update_to(max(0, total - remaining))
                if deadline is not None and time.monotonic() >= deadline:
                    bar.close(finished=False)
                    break
    elif worker.wait_idle(
        None if deadline is None else max(0.0, deadline - time.monotonic()), project
    ):
        return True
    remaining = pending_vectors(store, model, project, replacing)
    if remaining == 0:  # done as the time ran out: every item has its vector
        return True
    if warn:
        _warn_timeout(model, project, time.monotonic() - started, total, remaining)
    return False


def _warn_timeout(model: str, project: str | None, elapsed: float, total: int, left: int) -> None:
    pace = ""
    if total > left and elapsed > 0:
        rate = (total - left) / elapsed
        pace = f"; {rate:.1f} vectors/s so far, about {left / rate:.0f} s more"
    log.warning(
        "wait_for_embeddings: timed out after %.0f s with %d item(s) of %s still "
        "without a %s vector%s; they are embedded in the background (keyword and graph "
        "search find them meanwhile)",
        elapsed,
        left,
        "every project" if project is None else f"project {project!r}",
        model,
        pace,
    )


class RemoteWait:
    """The client side of a remote `wait_for_embeddings`: how long each server-side wait
    may take (`step`), and what its answer means (`answer`): done, timed out (after the
    same warning as an embedded wait, unless not `warn`), or ask again."""

    def __init__(self, timeout: float | None, *, progress: bool = False, warn: bool = True):
        timeout = check_timeout("timeout", timeout)  # before asking the server anything
        self.started = time.monotonic()
        self.deadline = None if timeout is None else self.started + max(0.0, timeout)
        self.progress = progress
        self.warn = warn
        self.total: int | None = None  # the backlog first answered: the bar and the pace
        self._bar: Bar | None = None
        self._asked = False

    def step(self) -> float:
        """Seconds the next server-side wait may take (the first, with a bar, is 0: it only
        counts the backlog)."""
        if self.progress and not self._asked:
            return 0.0
        step = _REMOTE_BAR_STEP_S if self.progress else _REMOTE_STEP_S
        if self.deadline is None:
            return step
        return max(0.0, min(step, self.deadline - time.monotonic()))

    def answer(self, raw: dict[str, Any]) -> bool | None:
        """True when the server is done, False when the time is up (warned), None: ask
        again. `raw`: the answer (idle; pending_vectors, project and model when the server
        says them)."""
        first, self._asked = not self._asked, True
        left = raw.get("pending_vectors")
        if first and isinstance(left, int):
            self.total = left
            if self.progress and left:
                self._bar = Progress().bar("embedding", total=left, unit="vector")
        if raw.get("idle") or left == 0:
            if self._bar is not None:
                self._bar.update_to(self._bar.total or 0)
                self._bar.close()
            return True
        if self._bar is not None and isinstance(left, int):
            self._bar.update_to(max(0, (self.total or 0) - left))
        if self.deadline is None or time.monotonic() < self.deadline:
            return None
        if self._bar is not None:
            self._bar.close(finished=False)
        if self.warn:
            elapsed = time.monotonic() - self.started
            if isinstance(left, int):
                named = raw.get("project")  # none: the wait was for every project
                project = None if named is None else str(named)
                _warn_timeout(str(raw.get("model")), project, elapsed, self.total or left, left)
            else:  # a server that does not count its backlog
                log.warning("wait_for_embeddings: timed out after %.0f s", elapsed)
        return False
