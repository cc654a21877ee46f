"""The refresh rule the in-memory indexes share (vectors, keyword postings): a snapshot is
current while the store's index generation has not moved; after a move, the rows stored
since are appended when that is right, else the snapshot is read again."""

from __future__ import annotations

import ctypes
import threading
from collections.abc import Callable, Container, Iterable, Iterator
from contextlib import contextmanager
from functools import cache
from typing import Protocol, TypeVar

import numpy as np
import numpy.typing as npt

__all__ = [
    "LARGE_RELOAD",
    "Snapshot",
    "appendable",
    "current",
    "generation",
    "grown",
    "one_generation",
    "return_freed_memory",
]

# Rows from which a reload hands the memory its transient objects used back to the system.
LARGE_RELOAD = 20_000


class Snapshot(Protocol):
    @property
    def generation(self) -> int: ...  # the store's index generation it was read at
    @property
    def removals(self) -> int: ...  # the store's removal count when read
    @property
    def n(self) -> int: ...  # rows it holds (its buffers may hold later appends)


S = TypeVar("S", bound=Snapshot)
K = TypeVar("K")
G = TypeVar("G", bound=np.generic)


class GenerationSource(Protocol):
    def index_generation(self, project_id: str) -> int: ...


# The generations read inside the calling thread's one_generation block, by (store, project).
_held = threading.local()


@contextmanager
def one_generation() -> Iterator[None]:
    """Inside the block (or a function it decorates), `generation` asks each store for a
    project's index generation once on this thread: a search consults several indexes,
    and each asked the store (a round trip each on PostgreSQL). Blocks nest (an inner one
    joins the outer); other threads keep their own readings."""
    if getattr(_held, "gens", None) is not None:
        yield
        return
    _held.gens = {}
    try:
        yield
    finally:
        _held.gens = None


def generation(store: GenerationSource, project_id: str) -> int:
    """`store.index_generation(project_id)`, read once per one_generation block."""
    gens: dict[tuple[int, str], int] | None = getattr(_held, "gens", None)
    if gens is None:
        return store.index_generation(project_id)
    key = (id(store), project_id)  # the store outlives the block that holds its reading
    if key not in gens:
        gens[key] = store.index_generation(project_id)
    return gens[key]


def grown(old: npt.NDArray[G], size: int, used: int) -> npt.NDArray[G]:
    """`old` with room for `size` rows: a new buffer (older snapshots keep reading the old
    one, whose first `used` rows are copied), or `old` when it is big enough."""
    if size <= old.shape[0]:
        return old
    new = np.zeros((max(2 * old.shape[0], size), *old.shape[1:]), dtype=old.dtype)
    new[:used] = old[:used]
    return new


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
            if loaded.n >= LARGE_RELOAD:
                return_freed_memory()
        cache[key] = loaded
        return loaded


def return_freed_memory() -> bool:
    """Ask the C allocator to hand freed heap memory back to the system; False where it
    cannot (not glibc). A reload reads every row as a small object before packing them into
    arrays, and glibc kept that memory resident afterwards: at 1M vectors the process held
    gigabytes it no longer used (at 100k: 427 MB after a load, 270 MB after this)."""
    trim = _malloc_trim()
    if trim is None:
        return False
    trim(0)
    return True


@cache
def _malloc_trim() -> Callable[[int], int] | None:
    """glibc's malloc_trim among the process's own symbols, looked up once (a reload calls
    it under the index lock; finding the library by name runs ldconfig)."""
    try:
        trim: Callable[[int], int] | None = getattr(ctypes.CDLL(None), "malloc_trim", None)
    except (OSError, TypeError):  # no process-wide symbol table (Windows)
        return None
    return trim


def appendable(
    cached: Snapshot, removals: int, held: int, new_ids: Iterable[str], ids: Container[str]
) -> bool:
    """Whether rows stored since `cached` can be appended to it: nothing removed, hidden or
    restored since (the store's `removals` count and the `held` row count of its buffers are
    those of the snapshot) and no row replaced (an id in `ids` would keep its old entry)."""
    if removals != cached.removals or held != cached.n:
        return False
    return not any(i in ids for i in new_ids)
