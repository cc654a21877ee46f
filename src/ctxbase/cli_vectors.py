"""The CLI's waits for vectors: what an ingest says is searchable, and the bar a command
shows while the backlog is embedded (`ingest --wait-embeddings`, `search` embedding first)."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from .errors import EmbedderUnavailableError

if TYPE_CHECKING:
    from .progress import Progress

__all__ = ["QUIET_WAIT_S", "vectors_line", "wait_for_vectors"]


def vectors_line(cb: Any, *, waiting: bool) -> str:
    """What is searchable right after an ingest: keyword and graph at once, by meaning
    only the items that already have their vector."""
    from .embedding_wait import pending_vectors

    total = int(cb.store.count_items(cb.project))
    left = pending_vectors(cb.store, cb.embedder.name, cb.project)
    line = f"searchable by keyword and graph now; vectors {max(0, total - left)}/{total}"
    if left and not waiting:
        line += (
            " (the rest are made in the background by the next command or server using this"
            " database; --wait-embeddings waits for them)"
        )
    return line


def wait_for_vectors(
    cb: Any, progress: Progress, timeout: float | None = None, why: str = ""
) -> int:
    """Wait for the background embedder to give every unit of the project its vector,
    with a bar of vectors done out of the backlog found first, for at most `timeout`
    seconds (None: until done); returns how many were made.

    With `why` (a search embedding the backlog first) nothing is shown for the first
    `QUIET_WAIT_S`: a small backlog or an embedder that fails at once says nothing here
    (the search reports the failure); a longer wait says why, then shows the bar, and a
    failure ends the bar without a line of its own."""
    from .embedding_wait import pending_vectors

    name, project = cb.embedder.name, cb.project

    def pending() -> int:
        return pending_vectors(cb.store, name, project)

    total = pending()
    deadline = None if timeout is None else time.monotonic() + timeout
    if why:
        if total == 0 or cb.wait_for_embeddings(
            min(QUIET_WAIT_S, timeout or QUIET_WAIT_S), warn=False
        ):
            return total
        if deadline is not None and time.monotonic() >= deadline:
            return max(0, total - pending())
        progress.note(f"embedding {total} item(s) that have no vector yet ({why})")
    with progress.bar("embedding", total=total, unit="vector") as bar:
        try:
            while not cb.wait_for_embeddings(0.5, warn=False):
                left = pending()
                bar.update_to(max(0, total - left))
                if deadline is not None and time.monotonic() >= deadline:
                    bar.close(finished=False)
                    return max(0, total - left)
        except EmbedderUnavailableError:
            if why:  # the search after this reports it, in one line
                bar.close(finished=False, say=False)
            raise
        bar.update_to(total)
    return total


# How long a search waits for the backlog before saying that it waits.
QUIET_WAIT_S = 1.0
