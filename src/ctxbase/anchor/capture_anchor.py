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

if TYPE_CHECKING:
    from ..model import Event

__all__ = ["AnchorConfig", "AnchorStats", "AnchorWorker"]

log = logging.getLogger(__name__)

# Events with nothing to anchor: never queued.
SKIP_TYPES = frozenset({"embedding", "session_start", "session_end"})


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
    pending: int = 0
    last_error: str | None = None
    llm: LLMExtractStats | None = None  # the LLM extractor's counts, when one is configured


class AnchorWorker:
    """One background thread anchoring stored events in the order they were written."""

    def __init__(self, cb: ComponentsSource, config: AnchorConfig) -> None:
        self._cb = components_of(cb)
        self.config = config
        self._queue: deque[Event] = deque()
        self._cond = threading.Condition()
        self._busy = False
        self._closed = False
        self._stats = AnchorStats()
        self._thread: threading.Thread | None = None
        self._extractor = LLMExtractor(config.llm) if config.llm is not None else None

    def submit(self, events: Sequence[Event]) -> None:
        todo = [e for e in events if (e.text or "").strip() and e.type not in SKIP_TYPES]
        if not todo:
            return
        with self._cond:
            if self._closed:
                return
            self._queue.extend(todo)
            if self._thread is None:
                self._thread = background_thread(self._run, name="ctxbase-anchor")
                self._thread.start()
            self._cond.notify_all()

    def wait_idle(self, timeout: float | None = None) -> bool:
        """Block until every submitted event is anchored; False on timeout."""
        import time

        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            while self._queue or self._busy:
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    return False
                self._cond.wait(0.05 if remaining is None else min(remaining, 0.05))
        return True

    def stats(self) -> AnchorStats:
        with self._cond:
            return AnchorStats(
                self._stats.anchored,
                self._stats.errors,
                len(self._queue),
                self._stats.last_error,
                None if self._extractor is None else self._extractor.stats(),
            )

    def stop(self, timeout: float | None = 30.0) -> None:
        """Anchor what is queued (up to `timeout`), then stop."""
        self.wait_idle(timeout)
        with self._cond:
            self._closed = True
            self._queue.clear()
            self._cond.notify_all()
        if self._thread is not None:
            self._thread.join(timeout)
        if self._extractor is not None:
            self._extractor.close()

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._queue and not self._closed:
                    self._cond.wait()
                if self._closed:
                    return
                n = min(self.config.batch_size, len(self._queue))
                batch = [self._queue.popleft() for _ in range(n)]
                self._busy = True
            try:
                from .capture_rules import anchor_events

                anchor_events(self._cb, batch, self.config, extractor=self._extractor)
                ok, error = len(batch), None
            except Exception as exc:  # anchoring is best effort; capture is already stored
                log.warning("anchoring %d events failed: %s", len(batch), exc)
                ok, error = 0, f"{type(exc).__name__}: {exc}"
            with self._cond:
                self._busy = False
                self._stats.anchored += ok
                if error is not None:
                    self._stats.errors += 1
                    self._stats.last_error = error
                self._cond.notify_all()
