"""A short-lived cache of assembled contexts, computed once per key at a time.

Agents re-ask for the same context (same project, role, intent, session) many times in a
row; assembly is the slow part of a request. An entry is keyed by the request and the
project's index generation (which moves on every write of items or vectors), dropped when
this process writes to the project, and goes stale after a TTL so state changes made by
another process are seen. A stale entry is still served for one more TTL while a single
background refresh recomputes it: under load, an expiry then costs one assembly off the
request path instead of a wave of requests waiting for it. Concurrent misses on one key
wait for the one assembly in flight instead of all assembling the same thing.
"""

from __future__ import annotations

import logging
import queue
import random
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field

from ..background import background_thread
from .logs import LOGGER_NAME

__all__ = ["AssembleCache", "Cached"]

log = logging.getLogger(LOGGER_NAME)


@dataclass(frozen=True, slots=True)
class Cached:
    context_id: str
    body: bytes


@dataclass
class _Flight:
    done: threading.Event = field(default_factory=threading.Event)
    result: Cached | None = None


_Refresh = tuple[tuple[str, Hashable], _Flight, Callable[[], Cached], int]


class AssembleCache:
    """Entries are fresh for 75-100% of `ttl_s`, then stale (served while refreshed) until
    `ttl_s` after that."""

    def __init__(
        self, ttl_s: float, size: int, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.ttl_s = ttl_s
        self.size = size
        # Replaceable so tests move time forward instead of sleeping past a TTL.
        self.clock = clock
        self._entries: OrderedDict[tuple[str, Hashable], tuple[float, Cached]] = OrderedDict()
        self._flights: dict[tuple[str, Hashable], _Flight] = {}
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0
        self.refreshes = 0
        # moves on every invalidation: an assembly that started before a write must not
        # land in the cache after it
        self._epochs: dict[str, int] = {}
        self._refresh_queue: queue.SimpleQueue[_Refresh] = queue.SimpleQueue()
        self._refresher: threading.Thread | None = None

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def enabled(self) -> bool:
        return self.ttl_s > 0 and self.size > 0

    def get(self, project_id: str, key: Hashable) -> Cached | None:
        """A fresh entry only (no refresh, not counted)."""
        found = self._entry(project_id, key)
        return None if found is None or not found[1] else found[0]

    def _entry(self, project_id: str, key: Hashable) -> tuple[Cached, bool] | None:
        """The entry and whether it is fresh; None when missing or past its stale period."""
        if not self.enabled:
            return None
        now = self.clock()
        with self._lock:
            entry = self._entries.get((project_id, key))
            if entry is None or entry[0] + self.ttl_s < now:
                return None
            self._entries.move_to_end((project_id, key))
            return entry[1], entry[0] >= now

    def lookup(
        self, project_id: str, key: Hashable, refresh: Callable[[], Cached]
    ) -> Cached | None:
        """A fresh entry, or a stale one while `refresh` recomputes it in a background
        thread (one refresh per key at a time); None on a miss. Hits are not counted here:
        the caller counts what it serves (`count_hit`)."""
        found = self._entry(project_id, key)
        if found is None:
            return None
        value, fresh = found
        if not fresh:
            self._start_refresh(project_id, key, refresh)
        return value

    def count_hit(self) -> None:
        self.hits += 1

    def epoch(self, project_id: str) -> int:
        return self._epochs.get(project_id, 0)

    def put(self, project_id: str, key: Hashable, value: Cached, epoch: int | None = None) -> None:
        """Store `value`; skipped when `epoch` (read before computing it) is out of date."""
        if not self.enabled:
            return
        with self._lock:
            if epoch is not None and epoch != self._epochs.get(project_id, 0):
                return
            # Entries computed together (a burst of first requests) would otherwise go stale
            # together; a random share of the TTL spreads their refreshes out.
            fresh_for = self.ttl_s * random.uniform(0.75, 1.0)
            self._entries[(project_id, key)] = (self.clock() + fresh_for, value)
            self._entries.move_to_end((project_id, key))
            while len(self._entries) > self.size:
                self._entries.popitem(last=False)

    def _claim(self, k: tuple[str, Hashable]) -> tuple[_Flight, bool]:
        """The flight for `k` and whether this caller owns it (must compute and land it)."""
        with self._lock:
            flight = self._flights.get(k)
            if flight is not None:
                return flight, False
            flight = self._flights[k] = _Flight()
            return flight, True

    def _land(self, k: tuple[str, Hashable], flight: _Flight) -> None:
        with self._lock:
            self._flights.pop(k, None)
        flight.done.set()

    def _start_refresh(self, project_id: str, key: Hashable, refresh: Callable[[], Cached]) -> None:
        k = (project_id, key)
        flight, owner = self._claim(k)
        if not owner:
            return
        self._refresh_queue.put((k, flight, refresh, self.epoch(project_id)))
        with self._lock:
            if self._refresher is None:
                self._refresher = background_thread(
                    self._refresh_loop, name="ctxbase-assemble-refresh"
                )
                self._refresher.start()

    def _refresh_loop(self) -> None:
        # One thread for every refresh: the event loop shares the interpreter with at most
        # one background assembly at a time.
        while True:
            k, flight, refresh, epoch = self._refresh_queue.get()
            try:
                value = refresh()
            except Exception as exc:  # the next request computes it itself and gets the error
                log.warning("background refresh of a cached assembly failed: %s", exc)
                with self._lock:
                    self._entries.pop(k, None)
            else:
                self.refreshes += 1
                self.put(k[0], k[1], value, epoch)
                flight.result = value
            finally:
                self._land(k, flight)

    def get_or_compute(
        self, project_id: str, key: Hashable, compute: Callable[[], Cached]
    ) -> tuple[Cached, bool]:
        """The cached value (hit=True, possibly stale while refreshed) or a freshly
        computed one, at most one computation per key at a time."""
        if not self.enabled:
            return compute(), False
        found = self.lookup(project_id, key, compute)
        if found is not None:
            self.hits += 1
            return found, True
        k = (project_id, key)
        flight, owner = self._claim(k)
        if not owner:
            flight.done.wait(60)
            if flight.result is not None:
                self.hits += 1
                return flight.result, True
            return compute(), False  # the first attempt failed: get this caller's own error
        self.misses += 1
        epoch = self.epoch(project_id)
        try:
            value = compute()
            self.put(project_id, key, value, epoch)
            flight.result = value
            return value, False
        finally:
            self._land(k, flight)

    def invalidate(self, project_id: str) -> int:
        """Drop the project's entries (and keep assemblies in flight from landing); returns
        how many were dropped."""
        with self._lock:
            self._epochs[project_id] = self._epochs.get(project_id, 0) + 1
            keys = [k for k in self._entries if k[0] == project_id]
            for k in keys:
                del self._entries[k]
            return len(keys)
