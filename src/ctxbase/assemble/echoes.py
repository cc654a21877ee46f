"""Echoes of retracted messages: an assistant turn that repeats what a retracted user
message said.

`expire_message` retracts a user message ("the deadline is Friday"): it leaves every prompt.
The assistant's answer ("OK, deadline Friday noted.") is the assistant's own turn and
stays, yet it says the retracted statement again. The rule is conservative, so general
assistant turns are never touched: an assistant message echoes a retracted user message
when it answers it, being the first assistant message after it in the session (no user or
assistant message between) or naming it as a parent, and it repeats it: it holds at least
`MIN_SHARED` of the retracted message's index terms (stop words aside, stemmed) and at
least `MIN_SHARE` of them.

What is done with an echo keeps the conversation's order: in the history it stays where it
was, its text marked `ECHO_MARK` (a note in the trace names it and the message it
answers); as a memory item (another session's turn) it is left out, the trace saying
"answers retracted" and which message. Reads: none for the history (the session's events
and statuses are read already); for memory only when a candidate assistant message is in a
session with a retracted message, one read of those messages and, per such pair, one read
of the turns between them (at most `MAX_PAIRS`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING

from ..model import Event
from ..retrieve.tokenize import index_terms
from .lifecycle import Status

if TYPE_CHECKING:
    from ..store.base import Store

__all__ = [
    "ECHO_MARK",
    "MAX_PAIRS",
    "MIN_SHARE",
    "MIN_SHARED",
    "echoes",
    "history_echoes",
    "mark_echoes",
    "memory_echoes",
]

ECHO_MARK = "[answers a retracted message]"
MIN_SHARED = 2
MIN_SHARE = 0.6
MAX_PAIRS = 20
_TURNS = ("user_message", "assistant_message")


def echoes(retracted: str, answer: str) -> bool:
    """Whether `answer` repeats `retracted` (see the module doc)."""
    said = set(index_terms(retracted))
    if len(said) < MIN_SHARED:
        return False
    shared = said & set(index_terms(answer))
    return len(shared) >= MIN_SHARED and len(shared) >= MIN_SHARE * len(said)


def history_echoes(events: Sequence[Event], retracted: Iterable[str]) -> dict[str, str]:
    """Assistant message id -> the retracted user message (among `events`, one session's
    in order) that it answers and repeats."""
    gone = set(retracted)
    if not gone:
        return {}
    by_id = {e.id: e for e in events}
    out: dict[str, str] = {}
    waiting: Event | None = None  # the retracted user message no assistant turn answered yet
    for e in events:
        if e.type == "user_message":
            waiting = e if e.id in gone else None
            continue
        if e.type != "assistant_message":
            continue
        asked = [by_id[p] for p in e.parent_event_ids if p in gone and p in by_id]
        if waiting is not None:
            asked.insert(0, waiting)
        waiting = None
        for u in asked:
            if u.type == "user_message" and echoes(u.text or "", e.text or ""):
                out[e.id] = u.id
                break
    return out


def mark_echoes(
    hist: Sequence[Event], events: Sequence[Event], statuses: Mapping[str, Status]
) -> tuple[list[Event], list[str]]:
    """The history with each echo of a retracted message marked, and the trace's notes."""
    retracted = [m for m, st in statuses.items() if st == Status.EXPIRED]
    found = history_echoes(events, retracted) if retracted else {}
    if not found:
        return list(hist), []
    out: list[Event] = []
    notes: list[str] = []
    for e in hist:
        answered = found.get(e.id)
        if answered is None:
            out.append(e)
            continue
        out.append(e.model_copy(update={"text": f"{ECHO_MARK} {e.text or ''}"}))
        notes.append(f"history: {e.id} marked {ECHO_MARK}: it repeats {answered}, retracted")
    return out, notes


def memory_echoes(
    store: Store,
    pid: str,
    answers: Mapping[str, str],
    statuses: Mapping[str, Mapping[str, Status]],
) -> dict[str, str]:
    """Of `answers` (assistant message id -> its session), those that answer and repeat a
    retracted user message of their session -> that message. `statuses`: the message
    statuses of the sessions, read already."""
    gone = {
        m
        for s in set(answers.values())
        for m, st in statuses.get(s, {}).items()
        if st == Status.EXPIRED
    }
    if not gone:
        return {}
    read = store.get_events(pid, [*gone, *answers])
    users = {e.id: e for e in read if e.id in gone and e.type == "user_message"}
    mine = {e.id: e for e in read if e.id in answers}
    out: dict[str, str] = {}
    pairs = 0
    for a in mine.values():
        for u in users.values():
            if u.session_id != a.session_id or u.seq is None or a.seq is None or u.seq >= a.seq:
                continue
            if not echoes(u.text or "", a.text or ""):
                continue
            answered = u.id in a.parent_event_ids
            if not answered and pairs < MAX_PAIRS:
                pairs += 1  # the first assistant turn after it: no turn between the two
                between = store.event_page(
                    pid, a.session_id, after_seq=u.seq, before_seq=a.seq, limit=1, types=_TURNS
                )
                answered = not between
            if answered:
                out[a.id] = u.id
                break
    return out
