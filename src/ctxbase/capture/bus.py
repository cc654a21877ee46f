"""The capture bus: `submit()` never blocks the agent; a background thread writes in batches.

- Order is kept within a session (first in, first written), so its seq and NEXT edges
  follow arrival, and an event is never written before the queued events it names as
  parents or references.
- A HIGH event (a user message, a tool result) is handled at once: it goes ahead of the
  queued NORMAL and LOW events of other sessions (behind the earlier HIGH ones, its own
  session's and those it names) and cuts the writer's linger short.
- Priorities decide what may be lost under backpressure: when the queue is full a LOW event
  (an intermediate thought) is dropped and counted; NORMAL and HIGH ones wait briefly for room
  and, failing that, are written by the caller itself: they never vanish silently. One that
  names a parent or reference still unwritten is queued past the limit instead, behind it.
- Bursts of LOW events of the same kind from the same agent within a short window are
  aggregated into one event while they still wait in the queue. Nothing of them is lost:
  the texts are joined, and each merged event's id, time, text, data, metadata and
  importance are kept in the stored event's `data["aggregated"]` (see `_merge`). Each
  submit still returns its own event's id: the queue maps a merged id to the event it went
  into until that is committed (`merged_into`), the store from then on (its aliases,
  `Store.event_aliases`), so the id names the stored event wherever an id is read. Events
  without text (their data is their content, and what search reads) are not aggregated,
  nor are those submitted with `aggregate=False`: an event whose id the caller chose (its
  `event_id`, or one derived from its idempotency key) stays its own event, so a retry
  after the burst is written finds that id stored and writes nothing.
- `flush()` returns once every event submitted before the call is committed to storage
  (`flush(project=...)`: once that project's are, for a wait or read of one project).
- An event the writer refuses (a session archived after it was queued, an idempotency key
  or event id already used for different content) is not retried: it is counted in
  `refused`, with the reason in `last_error`, and logged as a warning.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Annotated, Any, NamedTuple

from pydantic import BaseModel, ConfigDict, Field
from pydantic import ValidationError as PydanticValidationError

from ..background import background_thread
from ..errors import CtxbaseError, ValidationError
from ..model import Event, Priority
from ..process_owner import OpenedIn
from ..validation import is_blank

__all__ = [
    "BusConfig",
    "BusStats",
    "CaptureBus",
    "CaptureError",
    "WriteResult",
    "resolve_bus_config",
]

log = logging.getLogger(__name__)


class CaptureError(CtxbaseError):
    """Events could not be written; they stay queued and are retried."""

    code = "capture_failed"


class BusConfig(BaseModel):
    """Tuning of the capture bus. Strict: a count is an int, a time a number (an int or a
    float); a string, a bool or a fractional count is refused, not converted."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)

    max_queue: Annotated[int, Field(gt=0)] = 10_000
    batch_size: Annotated[int, Field(gt=0)] = 256
    # how long the writer waits for more events before writing a partial batch
    linger_s: Annotated[float, Field(ge=0)] = 0.02
    aggregate_window_s: Annotated[float, Field(ge=0)] = 0.5
    aggregate_max_chars: Annotated[int, Field(ge=0)] = 8_000
    high_priority_wait_s: Annotated[float, Field(ge=0)] = 2.0
    retry_backoff_s: Annotated[float, Field(ge=0)] = 0.2


def resolve_bus_config(spec: BusConfig | Mapping[str, Any] | None) -> BusConfig:
    """The bus config `open(bus_config=...)` names: a BusConfig, some of its fields as a
    mapping (the defaults for the rest), or None (the defaults). Anything else, an unknown
    key or a bad value is a ValidationError naming it (`bus_config.max_queue`)."""
    if spec is None:
        return BusConfig()
    if isinstance(spec, BusConfig):
        return spec
    if not isinstance(spec, Mapping):
        kind = type(spec).__name__
        raise ValidationError("bus_config", f"a BusConfig or a mapping of its fields, not {kind}")
    try:
        return BusConfig.model_validate(dict(spec))
    except PydanticValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err["loc"])
        if err["type"] == "extra_forbidden":
            valid = ", ".join(BusConfig.model_fields)
            message = f"unknown setting; valid ones are {valid}"
        else:
            message = f"{err['msg']} (got {err.get('input')!r})"
        raise ValidationError(f"bus_config.{where}" if where else "bus_config", message) from None


@dataclass
class BusStats:
    submitted: int = 0
    written: int = 0
    duplicates: int = 0
    dropped_low_priority: int = 0
    aggregated: int = 0
    written_by_caller: int = 0
    write_errors: int = 0
    refused: int = 0  # events the writer would not store (archived session, key conflict)
    queue_depth: int = 0
    last_error: str | None = None
    # the projects of the batch `last_error` came from: a server shows the error only to a
    # key that sees each of them (it names sessions and event ids)
    last_error_projects: list[str] = field(default_factory=list)


class WriteResult(NamedTuple):
    """What writing a batch did: events stored, events refused, and why they were."""

    written: int
    refused: int = 0
    reason: str | None = None


@dataclass
class _Slot:
    ticket: int
    event: Event
    priority: Priority
    agg_key: tuple[str, str, str, str] | None
    last_ts: float
    merged_ids: tuple[str, ...] = ()
    # the events merged into this one, as stored in its data["aggregated"] (the first one
    # included); empty while it stands alone
    parts: list[dict[str, Any]] = field(default_factory=list)
    parts_chars: int = 0  # their text, data and metadata, serialized


class CaptureBus:
    """An in-process queue with one background writer thread."""

    def __init__(
        self,
        write_batch: Callable[[Sequence[Event]], WriteResult],
        config: BusConfig | None = None,
        *,
        name: str = "ctxbase-capture",
    ) -> None:
        self._write_batch = write_batch
        self.config = config or BusConfig()
        self._queue: deque[_Slot] = deque()
        self._cond = threading.Condition()
        self._opened_in = OpenedIn()
        self._tickets = 0  # last ticket handed out
        self._done = 0  # every ticket <= this is written (or deliberately discarded)
        self._flush_upto = 0  # a flush waits for the tickets up to this: no lingering
        self._pending_done: set[int] = set()
        # ids of LOW events merged into a queued one -> that event's id, until it is
        # committed (then the store's aliases resolve them)
        self._merged: dict[str, str] = {}
        # ids queued or in the batch being written, with how many slots carry each: a
        # child captured right after its parent must find the parent here until it is
        # committed, including while the writer holds it outside the queue
        self._unwritten: dict[str, int] = {}
        self._stats = BusStats()
        self._closed = False
        self._writing = False
        self._in_flight: list[_Slot] = []  # the batch being written, out of the queue
        self._high_queued = 0  # HIGH events in the queue: the writer does not linger
        self._thread = background_thread(self._run, name=name)
        self._thread.start()

    # -- producer side ---------------------------------------------------------------------
    def submit(self, event: Event, priority: Priority, *, aggregate: bool = True) -> str | None:
        """Queue an event; returns its id, or None if dropped. A LOW event merged into a
        queued one keeps its id, which names that event once stored (see the module).
        `aggregate=False` keeps a LOW event out of bursts (neither merged into the queued
        one nor taking later ones): its id names it alone, as a retry expects."""
        if self._opened_in.forked():  # before the lock: a parent thread may have held it
            raise CaptureError(self._opened_in.refusal("context base"))
        now = time.monotonic()
        caller_writes = False
        with self._cond:
            if self._closed:
                raise CaptureError("the capture bus is closed")
            self._stats.submitted += 1
            if priority == Priority.LOW:
                if event.id in self._merged:  # a retry of an event already merged
                    self._stats.duplicates += 1
                    return event.id
                if aggregate and self._try_aggregate(event, now):
                    return event.id
            if len(self._queue) >= self.config.max_queue:
                if priority == Priority.LOW:
                    self._stats.dropped_low_priority += 1
                    return None
                deadline = now + self.config.high_priority_wait_s
                while len(self._queue) >= self.config.max_queue and not self._closed:
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        break
                    self._cond.wait(remaining)
                caller_writes = len(self._queue) >= self.config.max_queue and not any(
                    i in self._unwritten for i in (*event.parent_event_ids, *event.refers_to)
                )
            if not caller_writes:
                self._tickets += 1
                key = (
                    (event.project_id, event.session_id, event.agent_id, event.type)
                    if priority == Priority.LOW and aggregate
                    else None
                )
                slot = _Slot(self._tickets, event, priority, key, now)
                if priority == Priority.HIGH:
                    self._queue.insert(self._high_place(event), slot)
                    self._high_queued += 1
                else:
                    self._queue.append(slot)
                self._unwritten[event.id] = self._unwritten.get(event.id, 0) + 1
                self._stats.queue_depth = len(self._queue)
                self._cond.notify_all()
                return event.id
        # The queue stayed full: the caller writes this one itself rather than lose it.
        result = self._write_batch([event])
        with self._cond:
            self._stats.written_by_caller += 1
            self._count(result, [event])
        return event.id

    def _high_place(self, event: Event) -> int:
        """Where a HIGH event goes in the queue: right behind the last queued event it must
        follow (an earlier HIGH one, one of its session, one it names as parent or
        reference), ahead of the others. What stays ahead of it keeps its order, so every
        event still follows its session's earlier ones and its queued parents, and theirs."""
        named = {*event.parent_event_ids, *event.refers_to}
        for i in range(len(self._queue) - 1, -1, -1):
            queued = self._queue[i]
            if (
                queued.priority == Priority.HIGH
                or queued.event.id in named
                or (
                    queued.event.session_id == event.session_id
                    and queued.event.project_id == event.project_id
                )
            ):
                return i + 1
        return 0

    def _try_aggregate(self, event: Event, now: float) -> bool:
        """Merge `event` into the queue's last event when it continues its burst."""
        if not self._queue or is_blank(event.text):
            return False
        tail = self._queue[-1]
        if event.id == tail.event.id:  # a retry of the waiting event: the writer dedups it
            return False
        key = (event.project_id, event.session_id, event.agent_id, event.type)
        first = tail.event if not tail.parts else None
        if (
            tail.agg_key != key
            or now - tail.last_ts > self.config.aggregate_window_s
            or (first is not None and is_blank(first.text))
            or event.parent_event_ids != tail.event.parent_event_ids
            or event.refers_to != tail.event.refers_to
            or event.task_id != tail.event.task_id
            or event.agent_role != tail.event.agent_role
        ):
            return False
        parts = tail.parts or [_part(tail.event)]
        chars = tail.parts_chars or _part_chars(parts[0])
        part = _part(event)
        chars += _part_chars(part)
        if chars > self.config.aggregate_max_chars:
            return False
        tail.parts = [*parts, part]
        tail.parts_chars = chars
        tail.event = _merge(tail.event, tail.parts)
        tail.last_ts = now
        tail.merged_ids = (*tail.merged_ids, event.id)
        self._merged[event.id] = tail.event.id
        self._stats.aggregated += 1
        return True

    def pending(self, project_id: str, session_id: str) -> list[Event]:
        """The session's events queued or being written (not yet committed), in order."""
        with self._cond:
            slots = [*self._in_flight, *self._queue]
            return [
                s.event
                for s in slots
                if s.event.session_id == session_id and s.event.project_id == project_id
            ]

    def queued(self, event_id: str) -> Event | None:
        """The event queued or being written under `event_id`, else None: a second capture
        under one id (a retry, or a key reused) is compared with it before it is queued."""
        with self._cond:
            if event_id not in self._unwritten:
                return None
            for slot in (*self._in_flight, *self._queue):
                if slot.event.id == event_id:
                    return slot.event
        return None

    def merged_into(self, ids: Sequence[str]) -> dict[str, str]:
        """Those of `ids` merged into an event not yet committed: id -> that event's id."""
        with self._cond:
            return {i: self._merged[i] for i in ids if i in self._merged}

    def unwritten(self, ids: Sequence[str]) -> set[str]:
        """Those of `ids` that are queued or being written (not yet committed)."""
        with self._cond:
            return {i for i in ids if i in self._unwritten}

    def holds(self, ids: Sequence[str]) -> bool:
        """Whether any of `ids` is an event queued or being written (or merged into one), or
        a session (of any project) with such an event: a lookup of one that misses may just
        be early."""
        wanted = set(ids)
        with self._cond:
            if wanted & self._unwritten.keys() or wanted & self._merged.keys():
                return True
            return any(s.event.session_id in wanted for s in (*self._in_flight, *self._queue))

    def flush(self, timeout: float | None = None, *, project: str | None = None) -> None:
        """Block until every event submitted before this call is written; with `project`,
        only until that project's are (and those queued before them: order is kept), so a
        project with nothing queued returns at once."""
        if self._opened_in.forked():
            raise CaptureError(self._opened_in.refusal("context base"))
        with self._cond:
            if project is None:
                target = self._tickets
            else:
                slots = (*self._in_flight, *self._queue)
                target = max((s.ticket for s in slots if s.event.project_id == project), default=0)
                if target <= self._done:
                    return
            self._flush_upto = max(self._flush_upto, target)
            self._cond.notify_all()
            deadline = None if timeout is None else time.monotonic() + timeout
            while self._done < target:
                if not self._thread.is_alive():
                    raise CaptureError("the capture writer thread is not running")
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    raise CaptureError(
                        f"flush timed out with {target - self._done} events unwritten"
                        + (
                            f" (last error: {self._stats.last_error})"
                            if self._stats.last_error
                            else ""
                        )
                    )
                self._cond.wait(0.05 if remaining is None else min(remaining, 0.05))

    def stats(self) -> BusStats:
        with self._cond:
            self._stats.queue_depth = len(self._queue)
            copied = BusStats(**vars(self._stats))
            copied.last_error_projects = list(copied.last_error_projects)
            return copied

    def close(self, timeout: float | None = 30.0) -> None:
        """Flush, then stop the writer (in a forked process: nothing to stop; what was
        queued at the fork is the parent's to write)."""
        if self._closed:
            return
        if self._opened_in.forked():
            self._closed = True
            return
        try:
            self.flush(timeout)
        finally:
            with self._cond:
                self._closed = True
                self._cond.notify_all()
            self._thread.join(timeout)

    # -- writer side -----------------------------------------------------------------------
    def _run(self) -> None:
        cfg = self.config
        while True:
            with self._cond:
                while not self._queue and not self._closed:
                    self._cond.wait()
                if not self._queue and self._closed:
                    return
                # Linger briefly so bursts are written together (and LOW ones aggregate),
                # but never while a flush waits: flush() is the durability point, and a
                # shutdown (SIGTERM) must not wait out a long linger; nor while a HIGH
                # event waits: it is handled at once.
                until = time.monotonic() + cfg.linger_s
                while (
                    len(self._queue) < cfg.batch_size
                    and not self._closed
                    and self._flush_upto <= self._done
                    and not self._high_queued
                    and (left := until - time.monotonic()) > 0
                ):
                    self._cond.wait(left)
                batch = [
                    self._queue.popleft() for _ in range(min(cfg.batch_size, len(self._queue)))
                ]
                for slot in batch:
                    if slot.priority == Priority.HIGH:
                        self._high_queued -= 1
                self._in_flight = batch
                self._stats.queue_depth = len(self._queue)
                self._cond.notify_all()  # room for waiting producers
            self._write_with_retry(batch)

    def _write_with_retry(self, batch: list[_Slot]) -> None:
        events = [slot.event for slot in batch]
        attempt = 0
        while True:
            try:
                result = self._write_batch(events)
                break
            except Exception as exc:  # keep the events; storage may come back
                attempt += 1
                if attempt == 1:  # once per batch: a flush waiting on it is not silent
                    log.warning(
                        "capture: writing %d event(s) failed (%s: %s); retrying",
                        len(events),
                        type(exc).__name__,
                        exc,
                    )
                with self._cond:
                    self._stats.write_errors += 1
                    self._stats.last_error = f"{type(exc).__name__}: {exc}"
                    self._stats.last_error_projects = _projects(events)
                    if self._closed and attempt >= 3:
                        self._forget_unwritten(batch)
                        self._in_flight = []
                        return  # shutting down: flush() reports the loss via last_error
                time.sleep(min(self.config.retry_backoff_s * attempt, 2.0))
        with self._cond:
            self._forget_unwritten(batch)
            self._in_flight = []
            self._count(result, events)
            for slot in batch:
                self._pending_done.add(slot.ticket)
            while self._done + 1 in self._pending_done:
                self._done += 1
                self._pending_done.discard(self._done)
            self._cond.notify_all()

    def _count(self, result: WriteResult, events: Sequence[Event]) -> None:
        # caller holds self._cond
        self._stats.written += result.written
        self._stats.duplicates += len(events) - result.written - result.refused
        if result.refused:
            self._stats.refused += result.refused
            self._stats.last_error = result.reason
            self._stats.last_error_projects = _projects(events)
            log.warning("capture: %d event(s) refused: %s", result.refused, result.reason)

    def _forget_unwritten(self, batch: Sequence[_Slot]) -> None:
        # caller holds self._cond; the batch is committed (or given up): the store answers
        # for its ids, merged ones included, from now on
        for slot in batch:
            left = self._unwritten.get(slot.event.id, 0) - 1
            if left > 0:
                self._unwritten[slot.event.id] = left
            else:
                self._unwritten.pop(slot.event.id, None)
            for merged_id in slot.merged_ids:
                self._merged.pop(merged_id, None)


def _part(event: Event) -> dict[str, Any]:
    """What an aggregated event keeps of one event merged into it."""
    part: dict[str, Any] = {"id": event.id, "ts": event.ts, "text": event.text}
    if event.data is not None:
        part["data"] = event.data
    if event.metadata:
        part["metadata"] = event.metadata
    part["importance"] = event.importance
    return part


def _part_chars(part: dict[str, Any]) -> int:
    extra = {k: part[k] for k in ("data", "metadata") if k in part}
    size = len(part["text"] or "")
    return size + (len(json.dumps(extra, ensure_ascii=False, default=str)) if extra else 0)


def _merge(first: Event, parts: list[dict[str, Any]]) -> Event:
    """The event a burst is stored as: the first event's id and time, the texts joined, the
    highest importance, each event whole in `data["aggregated"]`, and at the top of
    `metadata` the keys every event has with the same value, beside `aggregated_count`."""
    metas = [p.get("metadata", {}) for p in parts]
    common = {k: v for k, v in metas[0].items() if all(k in m and m[k] == v for m in metas[1:])}
    return first.model_copy(
        update={
            "text": "\n".join(p["text"] for p in parts),
            "data": {"aggregated": parts},
            "metadata": {**common, "aggregated_count": len(parts)},
            "importance": max(float(p["importance"]) for p in parts),
        }
    )


def _projects(events: Sequence[Event]) -> list[str]:
    return sorted({e.project_id for e in events})
