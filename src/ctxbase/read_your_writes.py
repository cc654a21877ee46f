"""An id a capture just returned can be used at once.

`capture`, `capture_messages` and the other queued captures return their event ids before
the capture queue has written the events (capture/bus.py). A call that looks such an id up,
or the session the events go to (`feedback`, `expire_message`, `get_event`,
`causal_chain`, `get_session`, ...), would answer "not found" for a moment after.

A method marked `@settles_captures` catches that NotFoundError: when the capture queue
holds one of the ids the error names (an event still queued or being written, or a session
with such an event), the queue is written (`ContextBase._settle`, up to READ_WAIT_S) and the
call runs once more; otherwise the error stands as raised. A lookup that finds what it
looks for costs nothing more. The methods marked raise their NotFoundError before they
change anything, so running one again is safe.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Concatenate, ParamSpec, Protocol, TypeVar

from .errors import NotFoundError

__all__ = ["SettlesCaptures", "settles_captures"]

P = ParamSpec("P")
R = TypeVar("R")


class SettlesCaptures(Protocol):
    def _settle(self, ids: Sequence[str]) -> bool:
        """Write the queued captures when the queue holds one of `ids` (an event id, or a
        session with queued events); whether it did."""
        ...


S = TypeVar("S", bound=SettlesCaptures)


def settles_captures(method: Callable[Concatenate[S, P], R]) -> Callable[Concatenate[S, P], R]:
    """Run `method`; when it raises NotFoundError for an id the capture queue still holds,
    write the queue and run it again."""

    @functools.wraps(method)
    def run(self: S, /, *args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return method(self, *args, **kwargs)
        except NotFoundError as error:
            if not self._settle(error.ids):
                raise
        return method(self, *args, **kwargs)

    return run
