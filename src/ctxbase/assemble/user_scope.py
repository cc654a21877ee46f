"""Opt-in user-scoped memory (`memory_scope: user`): no 串台 between the users of one
project.

By default memory is shared within a project, across its sessions and users (seed 000's
pm, dev and qa sessions read each other's turns). Under the user scope an assembly's
memory draws only on the asking user's own sessions and on knowledge of no session
(ingested code and documents, entities recorded without one); the history is the
session's own either way, and the state layer shows the same facts (the task's, the
session's, the user's own and the project's: never another session's).

A session's user is the `user_id` it was created with (`ContextManager.create_session`),
else the agent of its user messages (`capture_messages` and the LangChain and LlamaIndex
histories name user turns by their `user_id`). Everything in a session is its user's:
the assistant's turns, tool calls and results, and what anchoring made of them (their
`session_id`). A session whose user is not known (no user recorded, no user message) is
nobody's: it stays out, as other users' sessions do.

The sessions recorded as other users' are left out of every search by the filter all
backends share (`ItemFilter.exclude_session_ids`); the rest (edges, references, sessions
with no user recorded, read once each) are checked as they reach the memory layer.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Literal

from ..errors import ValidationError
from ..model import Event, SessionInfo
from ..store.base import ItemFilter, Store

__all__ = [
    "MEMORY_SCOPES",
    "MemoryScope",
    "UserScope",
    "scope_for",
    "session_user",
    "user_scope",
]

MemoryScope = Literal["project", "user"]
MEMORY_SCOPES: tuple[MemoryScope, ...] = ("project", "user")


def session_user(session: SessionInfo | None) -> str | None:
    """The user a session was created for, when recorded."""
    user = None if session is None else session.metadata.get("user_id")
    return user if isinstance(user, str) and user else None


def _asker(events: Sequence[Event]) -> str | None:
    """The agent of the session's newest user message."""
    return next((e.agent_id for e in reversed(events) if e.type == "user_message"), None)


class UserScope:
    """Which sessions an assembly's memory may draw on under the user scope."""

    def __init__(
        self,
        store: Store,
        pid: str,
        user_id: str | None,
        session_id: str | None,
        recorded: dict[str, str | None],
    ) -> None:
        self.store, self.pid = store, pid
        self.user_id, self.session_id = user_id, session_id
        # session -> its user (None: not known); sessions not listed are read when met
        self._users = dict(recorded)
        if session_id is not None and user_id is not None:
            self._users[session_id] = user_id
        self.others = tuple(
            sorted(s for s, u in recorded.items() if u is not None and u != user_id)
        )

    def filter(self, flt: ItemFilter | None) -> ItemFilter | None:
        """`flt` that also leaves out the sessions recorded as other users'."""
        if not self.others:
            return flt
        base = flt if flt is not None else ItemFilter()
        out = tuple(dict.fromkeys([*(base.exclude_session_ids or ()), *self.others]))
        return dataclasses.replace(base, exclude_session_ids=out)

    def user_of(self, session_id: str) -> str | None:
        if session_id not in self._users:  # no user recorded: the agent of its user turns
            first = self.store.event_page(self.pid, session_id, types=["user_message"], limit=1)
            self._users[session_id] = first[0].agent_id if first else None
        return self._users[session_id]

    def refuses(self, session_id: str | None) -> str | None:
        """Why memory of `session_id` stays out (the trace's detail), or None: knowledge of
        no session, the assembly's own session and the user's other sessions come in."""
        if session_id is None or session_id == self.session_id:
            return None
        user = self.user_of(session_id)
        if user is not None and user == self.user_id:
            return None
        whose = "of no known user" if user is None else "of another user"
        return f"session {session_id!r} is {whose} (memory_scope user)"

    def describe(self) -> str:
        """The trace's note."""
        who = "no user known" if self.user_id is None else f"user {self.user_id!r}"
        return (
            f"memory_scope user ({who}): memory from this user's sessions and knowledge of no "
            f"session only; {len(self.others)} sessions of other users left out of searches"
        )


def user_scope(
    store: Store,
    pid: str,
    session: SessionInfo | None,
    session_id: str | None,
    events: Sequence[Event],
    user_id: str | None = None,
) -> UserScope:
    """The scope of an assembly for `user_id`, else the session's user (recorded, else
    the agent of its newest user message in `events`). One read: the project's sessions."""
    asker = user_id or session_user(session) or _asker(events)
    recorded = {s.session_id: session_user(s) for s in store.list_sessions(pid)}
    # a session with no user recorded is looked up when met (`user_of`)
    return UserScope(
        store, pid, asker, session_id, {s: u for s, u in recorded.items() if u is not None}
    )


def scope_for(
    name: str | None,
    default: MemoryScope,
    store: Store,
    pid: str,
    session: SessionInfo | None,
    session_id: str | None,
    events: Sequence[Event],
    user_id: str | None = None,
) -> tuple[MemoryScope, UserScope | None]:
    """The memory scope an assembly runs under (`name`, else the policy's `default`) and,
    for the user scope, the sessions its memory may draw on."""
    if name is None:
        name = default
    if name not in MEMORY_SCOPES:
        raise ValidationError("memory_scope", f"must be one of {', '.join(MEMORY_SCOPES)}")
    if user_id is not None and (not isinstance(user_id, str) or not user_id):
        raise ValidationError("user_id", f"must be a non-empty string (got {user_id!r})")
    if name == "project":
        return "project", None
    return "user", user_scope(store, pid, session, session_id, events, user_id)
