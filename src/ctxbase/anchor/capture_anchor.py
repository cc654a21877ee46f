"""Anchoring on capture: every stored message is anchored by a background thread.

Capture stays fast (no parsing or model on the caller's thread): the writer hands the
events it stored to `AnchorWorker`, which anchors them in order, off the caller's thread:

- code and SQL blocks: `anchor_message` (entities keyed by the event and the block; its
  edges' sources `ctxbase:message_code`, `ctxbase:calls`, `ctxbase:sql_table`...); a
  function named `test_<name>` VALIDATES the code called `<name>` (`ctxbase:test_name`);
  an answer to an assembled context links the context entities it used: GENERATES, and
  VALIDATES for a test of context code (`ctxbase:context_used`, evidence recorded);
- requirement and decision sentences -> `requirement` / `decision` entities the event
  GENERATES (`ctxbase:requirement`, `ctxbase:decision`);
- "符合 X 规范" / "per the X spec" -> the requirement of that sentence FOLLOWS, or else the
  event REFERENCES, the known document whose title matches best (`ctxbase:follows_spec`,
  `ctxbase:spec_reference`); a requirement also FOLLOWS a document it names by title or
  path, GENERATES its session's code and REFERENCES what else it names
  (`ctxbase:cites_document`, `ctxbase:session_code`, `ctxbase:mentions`, weave.py);
- file paths, table names, API routes and @people -> the event MENTIONS the known entity
  (a file, a table) or a `mention` entity shared by every event that names the same thing
  (`ctxbase:file_path`, `ctxbase:table_name`, `ctxbase:api_route`, `ctxbase:person_handle`),
  so retrieval can hop event -> entity -> event;
- "参考刚才的合规指南修改 SQL": the named document REFERENCES the SQL (or code) this
  session's latest turn with such a block produced (`ctxbase:spec_applies_to`), so the
  code is found as "the code the guide governs";
- names of known entities in prose -> REFERENCES (`ctxbase:mentions`); an edge two rules
  find is written once, with the more confident rule's source, on a tie not `mentions`'
  (weave.preferred);
- with `AnchorConfig.llm` (or CTXBASE_EXTRACT_BASE_URL / CTXBASE_EXTRACT_MODEL), what a chat
  model finds in the prose is added after the rules' edges (`ctxbase:llm`, see
  llm_extract.py); when the model fails, the rules' edges are all there is.

`ContextBase(anchoring=False)` (or an `AnchorConfig`) turns it off or narrows it;
`cb.flush()` returns once what was captured before it is anchored too.

Anchoring survives the process: the events it will anchor are recorded in the project's
backlog in the transaction that stores them (`Store.write_events(backlog=...)`), and each
batch's ids leave it once the batch is anchored. Closing waits for this base's captures (up
to `stop`'s timeout), then says how many it left; a process killed after the write leaves
them too. The next base opened on the project takes the backlog up (`resume`), oldest
first; `flush()` waits for it. Anchoring an event twice (a crash between a batch and its
removal, or two processes taking up one backlog) writes the same entities and edges again.

This module holds the settings and the worker; the rules are in capture_rules.py, loaded
when the first batch is anchored (the code parsers with the first code block), so opening
a base that only reads loads none of them.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict, Field

from ..background import background_thread
from ..components import ComponentsSource, components_of
from .llm_extract import LLMExtractConfig, LLMExtractor, LLMExtractStats
from .weave import SymbolIndexCache

if TYPE_CHECKING:
    from ..model import Event

__all__ = ["AnchorConfig", "AnchorStats", "AnchorWorker", "wanted"]

log = logging.getLogger(__name__)

# Events with nothing to anchor: never queued.
SKIP_TYPES = frozenset({"embedding", "session_start", "session_end"})

# Anchored events leave the backlog with the capture writer's next write
# (`take_anchored`); without one, in writes of this many, when a flush or close waits, or
# once the worker has been idle this long: never a commit per batch, which would wait for
# the capture writer's. After a crash, what was anchored and not yet dropped is anchored
# again (the same entities and edges).
DROP_EVERY = 1024
DROP_IDLE_S = 2.0


class AnchorConfig(BaseModel):
    """What capture anchoring extracts from stored events (all on by default)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    enabled: bool = True
    code_blocks: bool = True
    statements: bool = True
    spec_references: bool = True
    mentions: bool = True
    # edges below this confidence are not written
    min_confidence: float = Field(default=0.6, ge=0.0, le=1.0)
    batch_size: int = Field(default=64, ge=1)
    # a chat model adding entities and relations to the rules' (off: None)
    llm: LLMExtractConfig | None = None

    @classmethod
    def from_env(cls, enabled: bool = True) -> AnchorConfig:
        """The default settings, with the LLM extractor the environment configures, if any."""
        return cls(enabled=enabled, llm=LLMExtractConfig.from_env() if enabled else None)


@dataclass
class AnchorStats:
    anchored: int = 0
    errors: int = 0
    pending: int = 0  # queued here: this base's captures and the backlog taken up
    last_error: str | None = None
    llm: LLMExtractStats | None = None  # the LLM extractor's counts, when one is configured
    resumed: int = 0  # backlog of earlier bases (or processes) taken up when this one opened
    left: int = 0  # not anchored when this base closed: in the backlog for the next open


def wanted(event: Event) -> bool:
    """Whether capture anchoring anchors this stored event (what it records in the backlog)."""
    return bool((event.text or "").strip()) and event.type not in SKIP_TYPES


class AnchorWorker:
    """One background thread anchoring stored events in the order they were written (the
    backlog taken up at open before this base's own captures)."""

    def __init__(self, cb: ComponentsSource, config: AnchorConfig) -> None:
        self._cb = components_of(cb)
        self.config = config
        self._queue: deque[Event] = deque()
        # ids from the project's backlog (`resume`): anchored before the queue, oldest first
        self._backlog: deque[str] = deque()
        self._cond = threading.Condition()
        self._busy = 0  # events of the batch being anchored
        self._done: list[tuple[str, str]] = []  # (project, id) anchored, still in the backlog
        self._drop_asked = False  # a flush or close waits for `_done` to be dropped
        self._dropping = False
        self._stopping = False  # closing: the backlog taken up is left for the next open
        self._closed = False
        self._stats = AnchorStats()
        self._thread: threading.Thread | None = None
        self._extractor = LLMExtractor(config.llm) if config.llm is not None else None
        self._indexes = SymbolIndexCache()  # the thread's own: read again when entities change

    def submit(self, events: Sequence[Event]) -> None:
        todo = [e for e in events if wanted(e)]
        if not todo:
            return
        with self._cond:
            if self._closed:
                return
            self._queue.extend(todo)
            self._start()

    def resume(self) -> int:
        """Take up the project's backlog (what earlier bases stored and did not anchor);
        returns how many events it holds. One read when it is empty."""
        ids = self._cb.store.anchor_backlog(self._cb.project)
        if ids:
            with self._cond:
                if self._closed:
                    return 0
                self._backlog.extend(ids)
                self._stats.resumed += len(ids)
                self._start()
            log.info("anchoring %d stored events an earlier process left", len(ids))
        return len(ids)

    def _start(self) -> None:  # under self._cond
        if self._thread is None:
            self._thread = background_thread(self._run, name="ctxbase-anchor")
            self._thread.start()
        self._cond.notify_all()

    def _has_work(self) -> bool:  # under self._cond
        return bool(self._queue) or (bool(self._backlog) and not self._stopping)

    def wait_idle(self, timeout: float | None = None) -> bool:
        """Block until every submitted event is anchored and out of the backlog; False on
        timeout."""
        import time

        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            while True:
                if self._done and not self._drop_asked:  # the worker drops them when idle
                    self._drop_asked = True
                    self._cond.notify_all()
                if not (self._has_work() or self._busy or self._dropping or self._done):
                    return True
                if self._closed and not self._busy:  # the thread is gone: nothing will change
                    return not self._has_work()
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    return False
                self._cond.wait(0.05 if remaining is None else min(remaining, 0.05))

    def stats(self) -> AnchorStats:
        with self._cond:
            return AnchorStats(
                self._stats.anchored,
                self._stats.errors,
                len(self._queue) + len(self._backlog),
                self._stats.last_error,
                None if self._extractor is None else self._extractor.stats(),
                self._stats.resumed,
                self._stats.left,
            )

    def stop(self, timeout: float | None = 30.0) -> None:
        """Anchor this base's captures (up to `timeout`), then stop. What is left (those,
        the backlog taken up and not reached) stays in the store's backlog for the next
        base opened on its project: counted in `stats().left` and logged."""
        with self._cond:
            if self._closed:
                return
            self._stopping = True  # the backlog is durable: closing does not wait for it
        self.wait_idle(timeout)
        with self._cond:
            self._closed = True
            left = len(self._queue) + len(self._backlog) + self._busy
            self._stats.left = left
            self._queue.clear()
            self._backlog.clear()
            self._cond.notify_all()
        if left:
            log.warning(
                "%d stored events are not anchored yet; the next base opened on their "
                "project anchors them",
                left,
            )
        if self._thread is not None:
            self._thread.join(timeout)
            if not self._thread.is_alive():  # a batch finished after the wait: drop it too
                self._drop_done()
        if self._extractor is not None:
            self._extractor.close()

    def _run(self) -> None:
        import time

        while True:
            with self._cond:
                idle_since = time.monotonic()
                while not self._has_work() and not self._closed:
                    idle = time.monotonic() - idle_since
                    if self._done and (self._drop_asked or idle >= DROP_IDLE_S):
                        break
                    self._cond.wait(DROP_IDLE_S - idle if self._done else None)
                if self._closed:
                    return
                ids: list[str] = []
                batch: list[Event] = []
                if self._backlog and not self._stopping:
                    n = min(self.config.batch_size, len(self._backlog))
                    ids = [self._backlog.popleft() for _ in range(n)]
                elif self._queue:
                    n = min(self.config.batch_size, len(self._queue))
                    batch = [self._queue.popleft() for _ in range(n)]
                else:  # idle (or a flush waits): what it anchored leaves the backlog
                    n = 0
                    self._dropping = True
                self._busy = n
            if n:
                ok, error, done = self._anchor(batch, ids)
                with self._cond:
                    self._done.extend(done)
                    drop = len(self._done) >= DROP_EVERY or self._stopping
            else:
                ok, error, drop = 0, None, True
            if drop:  # still busy: a wait for an idle worker waits for this write too
                self._drop_done()
            with self._cond:
                self._busy = 0
                self._dropping = False
                self._stats.anchored += ok
                if error is not None:
                    self._stats.errors += 1
                    self._stats.last_error = error
                self._cond.notify_all()

    def _anchor(
        self, batch: list[Event], ids: list[str]
    ) -> tuple[int, str | None, list[tuple[str, str]]]:
        """Anchor a batch of this base's captures, or of backlog ids (read here: an event
        forgotten or hidden since is not anchored). Returns how many were anchored, the
        error, and the (project, id) pairs to drop from the backlog: a batch that failed
        too (logged, counted), since it would fail again."""
        project = self._cb.project
        done = [(project, i) for i in ids] + [(e.project_id, e.id) for e in batch]
        try:
            if ids:
                found = {e.id: e for e in self._cb.store.get_events(project, ids)}
                batch = [found[i] for i in ids if i in found]
            from .capture_rules import anchor_events

            anchor_events(
                self._cb, batch, self.config, extractor=self._extractor, indexes=self._indexes
            )
            return len(batch), None, done
        except Exception as exc:  # anchoring is best effort; capture is already stored
            log.warning("anchoring %d events failed: %s", len(done), exc)
            return 0, f"{type(exc).__name__}: {exc}", done

    def take_anchored(self) -> list[tuple[str, str]]:
        """The (project, id) pairs anchored and still in the backlog, handed to the capture
        writer, whose next write drops them in its transaction (no commit of their own).
        A write that fails leaves them there: anchored again by the next open."""
        with self._cond:
            done, self._done = self._done, []
            return done

    def _drop_done(self) -> None:
        """Drop what was anchored from the backlog in a write of its own (see DROP_EVERY)."""
        with self._cond:
            done, self._done = self._done, []
            self._drop_asked = False
        by_project: dict[str, list[str]] = {}
        for pid, event_id in done:
            by_project.setdefault(pid, []).append(event_id)
        try:
            for pid, ids in by_project.items():
                self._cb.store.drop_anchor_backlog(pid, ids)
        except Exception as exc:  # left in the backlog: the next open anchors them again
            # a store closed under the base first (at exit) cannot take them: said quietly,
            # as nothing is lost (anchoring them again makes the same entities)
            closed = getattr(self._cb.store, "closed", False)
            (log.debug if closed else log.warning)("anchored events stay in the backlog: %s", exc)
