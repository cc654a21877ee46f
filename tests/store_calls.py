"""A counting proxy over a store: which Store methods a piece of work calls, how often."""

from __future__ import annotations

import threading
from collections import Counter
from typing import Any

from ctxbase.store.base import Store

__all__ = ["StoreCalls"]


class StoreCalls:
    """Counts the public `Store` methods called on one store, by name: each method of the
    instance is shadowed by a counting wrapper (the store stays a Store for isinstance).
    `counts`: outermost calls only (a store method calling another is one call);
    `every`: nested calls too."""

    def __init__(self, store: Store) -> None:
        self.counts: Counter[str] = Counter()
        self.every: Counter[str] = Counter()
        self._depth = threading.local()
        for name in dir(Store):
            if not name.startswith("_") and callable(getattr(store, name, None)):
                setattr(store, name, self._wrapped(name, getattr(store, name)))

    def _wrapped(self, name: str, method: Any) -> Any:
        def call(*args: Any, **kwargs: Any) -> Any:
            depth = getattr(self._depth, "n", 0)
            if depth == 0:
                self.counts[name] += 1
            self.every[name] += 1
            self._depth.n = depth + 1
            try:
                return method(*args, **kwargs)
            finally:
                self._depth.n = depth

        return call

    def total(self) -> int:
        return sum(self.counts.values())

    def reset(self) -> None:
        self.counts.clear()
        self.every.clear()
