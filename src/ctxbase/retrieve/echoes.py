"""The rule for an echo of a retracted message: an assistant turn that repeats what a
retracted user message said.

`expire_message` retracts a user message ("the deadline is Friday"); the assistant's answer
("OK, deadline Friday noted.") is the assistant's own turn, yet it says the retracted
statement again. The rule is conservative, so general assistant turns are never touched: an
assistant message echoes a retracted user message when it answers it, being the first
assistant message after it in the session (no user or assistant message between) or naming
it as a parent, and it repeats it: it holds at least `MIN_SHARED` of the retracted message's
index terms (stop words aside, stemmed) and at least `MIN_SHARE` of them.

Assembly (assemble/echoes.py) marks an echo in its session's history and leaves it out of
memory; searches leave it out as they leave out the retracted message (retracted.py), and
listings mark it (`ANSWERS_RETRACTED`). Reads: `paired_echoes` is given the messages, read
already; it reads at most `MAX_PAIRS` pages of one turn (whether a turn lies between).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from ..model import Event
from .tokenize import index_terms

if TYPE_CHECKING:
    from ..store.base import Store

__all__ = [
    "ANSWERS_RETRACTED",
    "MAX_PAIRS",
    "MIN_SHARE",
    "MIN_SHARED",
    "echoes",
    "history_echoes",
    "paired_echoes",
]

# A listing's mark of an echo (Event.marks), as "retracted" marks the message itself.
ANSWERS_RETRACTED = "answers retracted"
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


def paired_echoes(
    store: Store, project_id: str, answers: Iterable[Event], retracted: Iterable[Event]
) -> dict[str, str]:
    """Of the assistant messages `answers` (any sessions), those that answer and repeat one
    of the `retracted` user messages of their session -> that message. A pair that is not
    linked as parent and child costs one read of a page of one turn (is there a turn
    between?), at most `MAX_PAIRS` of them."""
    users = [u for u in retracted if u.type == "user_message"]
    out: dict[str, str] = {}
    pairs = 0
    for a in answers:
        if a.type != "assistant_message":
            continue
        for u in users:
            if u.session_id != a.session_id or u.seq is None or a.seq is None or u.seq >= a.seq:
                continue
            if not echoes(u.text or "", a.text or ""):
                continue
            answered = u.id in a.parent_event_ids
            if not answered and pairs < MAX_PAIRS:
                pairs += 1  # the first assistant turn after it: no turn between the two
                between = store.event_page(
                    project_id,
                    a.session_id,
                    after_seq=u.seq,
                    before_seq=a.seq,
                    limit=1,
                    types=_TURNS,
                )
                answered = not between
            if answered:
                out[a.id] = u.id
                break
    return out
