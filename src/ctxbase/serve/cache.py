"""A short-lived cache of assembled contexts.

Agents re-ask for the same context (same project, role, intent, session) many times in a
row; assembly is the slow part of a request. An entry is keyed by the request and the
project's index generation (which moves on every write of items or vectors), dropped when
this process writes to the project, and expires after a TTL so state changes made by another
process are seen within that time.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Hashable

__all__ = ["AssembleCache"]


class AssembleCache:
    def __init__(self, ttl_s: float, size: int) -> None:
        self.ttl_s = ttl_s
        self.size = size
        self._entries: OrderedDict[tuple[str, Hashable], tuple[float, bytes]] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def enabled(self) -> bool:
        return self.ttl_s > 0 and self.size > 0

    def get(self, project_id: str, key: Hashable) -> bytes | None:
        if not self.enabled:
            return None
        now = time.monotonic()
        with self._lock:
            entry = self._entries.get((project_id, key))
            if entry is None or entry[0] < now:
                self.misses += 1
                return None
            self._entries.move_to_end((project_id, key))
            self.hits += 1
            return entry[1]

    def put(self, project_id: str, key: Hashable, body: bytes) -> None:
        if not self.enabled:
            return
        with self._lock:
            self._entries[(project_id, key)] = (time.monotonic() + self.ttl_s, body)
            self._entries.move_to_end((project_id, key))
            while len(self._entries) > self.size:
                self._entries.popitem(last=False)

    def invalidate(self, project_id: str) -> None:
        with self._lock:
            for k in [k for k in self._entries if k[0] == project_id]:
                del self._entries[k]
