"""Echoes of retracted messages in assembly: an assistant turn that repeats what a
retracted user message said (the rule: retrieve/echoes.py, which searches share).

What is done with an echo keeps the conversation's order: in the history it stays where it
was, its text marked `ECHO_MARK` (a note in the trace names it and the message it
answers); as a memory item (another session's turn) it is left out, the trace saying
"answers retracted" and which message. Reads: none for the history (the session's events
and statuses are read already); for memory only when a candidate assistant message is in a
session with a retracted message, one read of those messages and, per such pair, one read
of the turns between them (at most `MAX_PAIRS`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from ..model import Event
from ..retrieve.echoes import history_echoes, paired_echoes
from .lifecycle import Status

if TYPE_CHECKING:
    from ..store.base import Store

__all__ = [
    "ECHO_MARK",
    "echo_ids",
    "mark_echoes",
    "memory_echoes",
]

ECHO_MARK = "[answers a retracted message]"


def echo_ids(events: Sequence[Event], statuses: Mapping[str, Status]) -> set[str]:
    """The assistant messages among one session's `events` that answer and repeat a
    retracted message: left out wherever the message is (a session's summaries too)."""
    retracted = [m for m, st in statuses.items() if st == Status.EXPIRED]
    return set(history_echoes(events, retracted)) if retracted else set()


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
    users = [e for e in read if e.id in gone]
    return paired_echoes(store, pid, [e for e in read if e.id in answers], users)
