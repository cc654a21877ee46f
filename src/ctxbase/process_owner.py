"""A context base belongs to the process that opened it.

A base opened before `fork` (a `multiprocessing` worker on Linux, a preloading web server)
is copied into the child without its threads: the capture writer and the embedding worker
are not there, the database connections are the parent's, and a lock a parent thread held
at that moment stays held. Captures made in the child returned ids and were never stored.
Each opener notes its process; in another process every call is refused at once, before
any lock is taken, saying to open the base again there, and `close` lets go without
touching what the parent still uses.
"""

from __future__ import annotations

import os

__all__ = ["OpenedIn"]


class OpenedIn:
    """The process a store, capture bus or worker was opened in."""

    __slots__ = ("pid",)

    def __init__(self) -> None:
        self.pid = os.getpid()

    def forked(self) -> bool:
        """Whether this is another process (a fork of the one that opened it)."""
        return os.getpid() != self.pid

    def refusal(self, what: str) -> str:
        """Why a call in a forked process is refused, and what to do instead."""
        return (
            f"this {what} was opened in process {self.pid}, before a fork; process "
            f"{os.getpid()} must open its own (call ctxbase.open(...) in the child): its "
            "threads and connections stay with the parent, so writes here would be lost"
        )
