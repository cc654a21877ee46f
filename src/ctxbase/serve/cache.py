"""A short-lived cache of assembled contexts, computed once per key at a time.

Agents re-ask for the same context (same project, role, intent, session) many times in a
row; assembly is the slow part of a request. An entry is keyed by the request and the
project's index generation (which moves on every write of items or vectors), dropped when
this process writes to the project, and expires after a TTL so state changes made by another
process are seen within that time. Concurrent misses on one key wait for the one assembly
in flight instead of all assembling the same thing.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field

__all__ = ["AssembleCache", "Cached"]


@dataclass(frozen=True, slots=True)
class Cached:
    context_id: str
    body: bytes


@dataclass
class _Flight:
    done: threading.Event = field(default_factory=threading.Event)
    result: Cached | None = None


class AssembleCache:
    def __init__(self, ttl_s: float, size: int) -> None:
        self.ttl_s = ttl_s
        self.size = size
        self._entries: OrderedDict[tuple[str, Hashable], tuple[float, Cached]] = OrderedDict()
        self._flights: dict[tuple[str, Hashable], _Flight] = {}
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def enabled(self) -> bool:
        return self.ttl_s > 0 and self.size > 0

    def get(self, project_id: str, key: Hashable) -> Cached | None:
        if not self.enabled:
            return None
        now = time.monotonic()
        with self._lock:
            entry = self._entries.get((project_id, key))
            if entry is None or entry[0] < now:
                return None
            self._entries.move_to_end((project_id, key))
            return entry[1]

    def lookup(self, project_id: str, key: Hashable) -> Cached | None:
        """`get`, counted as a hit when found (a miss is counted by `get_or_compute`)."""
        found = self.get(project_id, key)
        if found is not None:
            self.hits += 1
        return found

    def put(self, project_id: str, key: Hashable, value: Cached) -> None:
        if not self.enabled:
            return
        with self._lock:
            self._entries[(project_id, key)] = (time.monotonic() + self.ttl_s, value)
            self._entries.move_to_end((project_id, key))
            while len(self._entries) > self.size:
                self._entries.popitem(last=False)

    def get_or_compute(
        self, project_id: str, key: Hashable, compute: Callable[[], Cached]
    ) -> tuple[Cached, bool]:
        """The cached value (hit=True) or a freshly computed one, at most one at a time."""
        if not self.enabled:
            return compute(), False
        found = self.get(project_id, key)
        if found is not None:
            self.hits += 1
            return found, True
        k = (project_id, key)
        with self._lock:
            flight = self._flights.get(k)
            owner = flight is None
            if flight is None:
                flight = self._flights[k] = _Flight()
        if not owner:
            flight.done.wait(60)
            if flight.result is not None:
                self.hits += 1
                return flight.result, True
            return compute(), False  # the first attempt failed: get this caller's own error
        self.misses += 1
        try:
            value = compute()
            self.put(project_id, key, value)
            flight.result = value
            return value, False
        finally:
            with self._lock:
                self._flights.pop(k, None)
            flight.done.set()

    def invalidate(self, project_id: str) -> None:
        with self._lock:
            for k in [k for k in self._entries if k[0] == project_id]:
                del self._entries[k]
