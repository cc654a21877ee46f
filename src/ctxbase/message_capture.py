"""`ContextBase.capture_messages`: a chat message list captured as events, what was sent
before left out (message_lists.py aligns the list with the session's last messages)."""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from typing import Any

from .archived_sessions import ArchivedSessions
from .capture.bus import CaptureBus
from .capture.events import check_idempotency_key
from .capture.hooks import plan_message_events
from .message_lists import align_list, call_metadata
from .model import Event, check_id, event_priority
from .store.base import Store
from .validation import MessageShape, check_message_shape

__all__ = ["MessageListMethods"]


class MessageListMethods:
    """Mixed into `ContextBase`: it supplies `store`, `agent_id`, `_bus`, `_archived`,
    `_message_locks`, `_pid`, `_build` and `record_events`."""

    store: Store
    agent_id: str | None
    _bus: CaptureBus
    _archived: ArchivedSessions
    _message_locks: list[threading.Lock]

    def _pid(self, project: str | None) -> str:
        raise NotImplementedError

    def _build(self, project: str | None, kwargs: Mapping[str, Any]) -> Event:
        raise NotImplementedError

    def record_events(self, events: Sequence[Event]) -> list[Event]:
        raise NotImplementedError

    def capture_messages(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        session_id: str,
        project: str | None = None,
        user_id: str = "user",
        assistant_id: str | None = None,
        assistant_role: str | None = None,
        task_id: str | None = None,
        sync: bool = False,
        idempotency_key: str | None = None,
        shape: MessageShape = "auto",
    ) -> list[str]:
        """Capture a chat message list (OpenAI's shape, or Anthropic's content parts);
        returns the event ids, one or more per message (those of messages stored before
        included).

        User turns are `user_id`'s (or the message's `name`); assistant turns and their tool
        calls are `assistant_id`'s, else the `agent_id` this base was opened with, else
        "assistant". Each tool call is a `tool_invocation` caused by its assistant message,
        and each tool result a `tool_result` caused by the invocation it answers; an
        assistant message made only of tool calls reads as them (`run_sql(sql="...")`).

        The list may be the whole history each turn, a window of the last messages
        (possibly after the system prompt), or only the new messages: the longest run of
        its first messages equal to the session's last stored messages (kind, text, data, in
        order; queued ones count) was sent before, and so were leading system messages
        equal to the session's first ones when more messages follow; the rest is new, even
        when identical to earlier messages. Hidden messages count as sent, and so do
        hard-forgotten ones of a history re-sent whole (their tombstones keep them out).
        So a list re-sent unchanged adds nothing, except a list of one message, which is
        always new: a one-message call is retried safely only with `idempotency_key` (the
        same key for the retry of the same call, a new one for each call; the remote SDK
        sends one itself). The messages a keyed call adds carry the key in
        `metadata["capture_call"]`; a call whose key is found among the session's last
        messages is a retry, which adds nothing: one that would add messages (other ones,
        or more) reuses the key for another request and is a ConflictError naming the key,
        nothing written or queued, as for `record`. ConflictError when the session is
        archived.

        `shape` says what the list is instead of leaving it to that guess ("auto", logged
        at INFO when a list of two or more messages adds nothing): "new", only new messages,
        each stored even when equal to the last ones (a user's "yes" / "ok" said twice is
        kept twice; retried safely only with `idempotency_key`); "history", the session's
        messages from its first one: those the session holds were sent before, the rest is
        new, and a list that does not start as the session does is a ConflictError.
        """
        pid = self._pid(project)
        check_id("session_id", session_id)
        check_message_shape(shape)
        if idempotency_key is not None:
            check_idempotency_key(idempotency_key)
        self._archived.check(pid, session_id)
        planned = plan_message_events(
            messages,
            user_id=user_id,
            assistant_id=assistant_id or self.agent_id or "assistant",
            assistant_role=assistant_role,
        )
        if not planned:
            return []
        with self._message_locks[hash((pid, session_id)) % len(self._message_locks)]:
            aligned = align_list(
                self.store,
                self._bus,
                pid,
                session_id,
                planned,
                messages=len(messages),
                idempotency_key=idempotency_key,
                shape=shape,
            )
            events = [
                self._build(
                    pid,
                    {
                        "type": planned[i].type,
                        "session_id": session_id,
                        "text": planned[i].text,
                        "data": planned[i].data,
                        "agent_id": planned[i].agent_id,
                        "agent_role": planned[i].agent_role,
                        "task_id": task_id,
                        "parent_event_ids": parents,
                        "metadata": call_metadata(planned[i].metadata, idempotency_key),
                        "idempotency_key": key,
                        "allow_blank": True,  # an empty message is still a turn
                    },
                )
                for i, key, parents in aligned.new
            ]
            if sync:
                self.record_events(events)
            else:
                keyed = [key is not None for _, key, _ in aligned.new]
                for e, own_id in zip(events, keyed, strict=True):
                    self._bus.submit(e, event_priority(e.type), aggregate=not own_id)
        return aligned.ids
