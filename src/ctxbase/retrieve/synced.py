"""The refresh rule the in-memory indexes share (vectors, keyword postings): a snapshot is
current while the store's index generation has not moved; after a move, the rows stored
since are appended when that is right, else the snapshot is read again."""

from __future__ import annotations

import threading
from collections.abc import Callable, Container, Iterable
from typing import Protocol, TypeVar

__all__ = ["Snapshot", "appendable", "current"]


class Snapshot(Protocol):
    @property
    def generation(self) -> int: ...  # the store's index generation it was read at
    @property
    def removals(self) -> int: ...  # the store's removal count when read
    @property
    def n(self) -> int: ...  # rows it holds (its buffers may hold later appends)


S = TypeVar("S", bound=Snapshot)
K = TypeVar("K")


def current(
    lock: threading.Lock,
    cache: dict[K, S],
    key: K,
    generation: int,
    appended: Callable[[S], S | None],
    reloaded: Callable[[], S],
) -> S:
    """The cached snapshot at `generation`: kept, `appended` to (None: not possible), or
    `reloaded`; stored back under `key`."""
    with lock:
        cached = cache.get(key)
        if cached is not None and cached.generation == generation:
            return cached
        loaded = appended(cached) if cached is not None else None
        if loaded is None:
            loaded = reloaded()
        cache[key] = loaded
        return loaded


def appendable(
    cached: Snapshot, removals: int, held: int, new_ids: Iterable[str], ids: Container[str]
) -> bool:
    """Whether rows stored since `cached` can be appended to it: nothing removed, hidden or
    restored since (the store's `removals` count and the `held` row count of its buffers are
    those of the snapshot) and no row replaced (an id in `ids` would keep its old entry)."""
    if removals != cached.removals or held != cached.n:
        return False
    return not any(i in ids for i in new_ids)
