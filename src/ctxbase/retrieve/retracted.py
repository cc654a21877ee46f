"""Messages retracted from their session, as searches and listings see them.

`ContextManager.expire_message` retracts a message: the store keeps a status record for it
(store.base.MESSAGE_SCOPE: scope id the session, key the message), and assembly leaves it
out of every prompt. Searches leave it out too, as they leave out a memory rated "wrong",
and with it the statements anchoring cut from it (a decision, its SQL: the same words,
assemble/repeats.cut_from), since a statement stands or falls with its message. A per-turn
tool result of an earlier turn has the same status and goes the same way, marked for what
it is: "expired" (`Candidate.expired`), as the event listings mark it, not "retracted".
An assistant turn that answers a retracted user message and repeats it (echoes.py: "OK,
deadline Friday noted.") is left out with it, "retracted: answers <message>", as assembly
leaves it out of memory; listings mark it "answers retracted".

The work is bounded by the candidates, not the project: the status records of the
sessions the candidates are in (one read; a session holds a record only for a message
that is no longer active), remembered while the project's index generation stands
(a retraction moves it on), then the entities among the candidates of a session that has
any, and the messages they were cut from; for the assistant messages among them, one read
of those messages with their session's retracted user messages (and echoes.MAX_PAIRS pages
of one turn at most).
"""

from __future__ import annotations

import threading
from collections.abc import Collection, Iterable, Sequence
from typing import TYPE_CHECKING

from ..model import Event
from ..store.base import FEEDBACK_SCOPE, MESSAGE_SCOPE, SearchItem, Store
from .config import SearchConfig
from .echoes import ANSWERS_RETRACTED, paired_echoes
from .signals import feedback_confidence

if TYPE_CHECKING:
    from .search import Candidate

__all__ = [
    "EXPIRED",
    "RETRACTED",
    "KnownStatuses",
    "event_marks",
    "mark_retracted",
    "retracted_owners",
    "with_marks",
]

RETRACTED = "retracted"
# A per-turn tool result of an earlier turn (assemble.manager: metadata per_turn): its
# status is a retraction's, but nobody retracted it.
EXPIRED = "expired"
# Message statuses that still put a message in prompts and searches (lifecycle.Status).
_IN_USE = frozenset({"active", "created"})


class KnownStatuses:
    """Per project and session, the messages out of prompts by their status, while the
    project's index generation stands. Bounded: past `limit` sessions it starts again."""

    def __init__(self, limit: int = 50_000) -> None:
        self.limit = limit
        self._lock = threading.Lock()
        self._held: dict[str, tuple[int, dict[str, frozenset[str]]]] = {}

    def withdrawn(
        self, store: Store, project_id: str, session_ids: Collection[str]
    ) -> dict[str, frozenset[str]]:
        """Session id -> its messages that are retracted (or otherwise not active)."""
        from .synced import generation  # numpy: not for the commands that only list

        gen = generation(store, project_id)
        with self._lock:
            held_gen, held = self._held.get(project_id, (gen, {}))
            known = dict(held) if held_gen == gen else {}
        missing = [s for s in dict.fromkeys(session_ids) if s not in known]
        if missing:
            found = store.get_states(project_id, [(MESSAGE_SCOPE, s) for s in missing])
            for s in missing:
                records = found.get((MESSAGE_SCOPE, s), [])
                known[s] = frozenset(f.key for f in records if str(f.value) not in _IN_USE)
            with self._lock:
                if len(known) > self.limit:
                    known = {s: known[s] for s in session_ids if s in known}
                self._held[project_id] = (gen, known)
        return {s: known[s] for s in session_ids if s in known}

    def drop(self, project_id: str) -> int:
        """Forget what is held of a project (after a hard forget); the sessions dropped."""
        with self._lock:
            return len(self._held.pop(project_id, (0, {}))[1])


def retracted_owners(
    store: Store, project_id: str, items: Iterable[SearchItem], known: KnownStatuses
) -> dict[str, str]:
    """Owner id -> why, for the owners of `items` that are a retracted message ("retracted";
    a per-turn tool result of an earlier turn: "expired"), a statement cut from one
    ("retracted: cut from <message>", "expired: cut from <message>") or an assistant
    message that answers a retracted user message and repeats it ("retracted: answers
    <message>")."""
    from ..assemble.repeats import cut_from  # a pure text rule: it imports no layer

    by_session: dict[str, set[str]] = {}
    results: set[str] = set()  # owners that are tool results: per-turn ones expire
    answers: set[str] = set()  # assistant messages: an echo of a retracted message goes
    for it in items:
        if it.session_id:
            by_session.setdefault(it.session_id, set()).add(it.owner_id)
            if it.type == "tool_result":
                results.add(it.owner_id)
            elif it.type == "assistant_message":
                answers.add(it.owner_id)
    if not by_session:
        return {}
    withdrawn = known.withdrawn(store, project_id, list(by_session))
    out: dict[str, str] = {}
    suspects: list[str] = []
    for session_id, owners in by_session.items():
        gone = withdrawn.get(session_id, frozenset())
        if not gone:
            continue
        for owner in owners:
            if owner in gone:
                out[owner] = RETRACTED
            else:
                suspects.append(owner)
    results &= out.keys()
    if results:
        for e in store.get_events(project_id, list(results)):
            out[e.id] = _why(e)
    if not suspects:
        return out
    out.update(_echoes(store, project_id, answers.intersection(suspects), withdrawn))
    suspects = [s for s in suspects if s not in out]
    cut: dict[str, tuple[str, str]] = {}  # entity -> (its message, its text)
    for entity in store.get_entities(project_id, suspects):
        source = entity.properties.get("event_id")
        where = entity.properties.get("session_id")
        if (
            isinstance(source, str)
            and isinstance(where, str)
            and source in withdrawn.get(where, frozenset())
        ):
            cut[entity.id] = (source, entity.text)
    if not cut:
        return out
    sources = list(dict.fromkeys(source for source, _ in cut.values()))
    said = {e.id: e for e in store.get_events(project_id, sources)}
    for entity_id, (source, text) in cut.items():
        if source in said and cut_from(text, said[source].text or ""):
            out[entity_id] = f"{_why(said[source])}: cut from {source}"
    return out


def _echoes(
    store: Store, project_id: str, answers: Collection[str], withdrawn: dict[str, frozenset[str]]
) -> dict[str, str]:
    """Of the assistant messages `answers` (in sessions with a message out of use), those
    that echo a retracted user message -> "retracted: answers <message>". One read."""
    if not answers:
        return {}
    gone = {m for ms in withdrawn.values() for m in ms}
    read = store.get_events(project_id, [*answers, *gone])
    found = paired_echoes(
        store, project_id, [e for e in read if e.id in answers], [e for e in read if e.id in gone]
    )
    return {a: f"{RETRACTED}: answers {u}" for a, u in found.items()}


def _why(event: Event) -> str:
    """The mark of a message out of use by its status: "expired" for a per-turn tool
    result (an earlier turn's), else "retracted"."""
    per_turn = event.type == "tool_result" and event.metadata.get("per_turn")
    return EXPIRED if per_turn else RETRACTED


def mark_retracted(
    store: Store,
    project_id: str,
    cands: Collection[Candidate],
    config: SearchConfig,
    known: KnownStatuses,
) -> None:
    """Mark the candidates that are retracted or expired (or cut from such a message), and
    drop them as the confidence floor drops a memory rated wrong: unless `min_confidence`
    is 0, which keeps both."""
    gone = retracted_owners(store, project_id, (c.item for c in cands), known)
    for c in cands:
        why = gone.get(c.item.owner_id)
        if why is not None:
            if why.startswith(EXPIRED):
                c.expired = True
            else:
                c.retracted = True
            if config.min_confidence > 0 and c.dropped is None:
                c.dropped = why


def event_marks(store: Store, project_id: str, events: Sequence[Event]) -> dict[str, list[str]]:
    """Event id -> what a listing marks it with: "retracted" (a per-turn tool result of an
    earlier turn: "expired"), "answers retracted" (an assistant message repeating a
    retracted user message it answers, echoes.py), "wrong" (rated false: confidence below
    the searches' default floor). Two bounded reads for the events given, and a third when
    an assistant message among them is in a session with a retracted message; events with
    no mark are left out."""
    if not events:
        return {}
    floor = SearchConfig.model_fields["min_confidence"].default
    ids = [e.id for e in events]
    out: dict[str, list[str]] = {}
    sessions = list(dict.fromkeys(e.session_id for e in events))
    found = store.get_states(project_id, [(MESSAGE_SCOPE, s) for s in sessions])
    status = {(s, f.key): str(f.value) for s in sessions for f in found.get((MESSAGE_SCOPE, s), [])}
    for e in events:
        value = status.get((e.session_id, e.id))
        if value is not None and value not in _IN_USE:
            out.setdefault(e.id, []).append(_why(e))
    gone = {key for key, value in status.items() if value not in _IN_USE}
    sessions_gone = {s for s, _ in gone}
    answers = [
        e
        for e in events
        if e.type == "assistant_message" and e.id not in out and e.session_id in sessions_gone
    ]
    if answers:
        mine = {a.session_id for a in answers}
        said = store.get_events(project_id, sorted(m for s, m in gone if s in mine))
        for a in paired_echoes(store, project_id, answers, said):
            out.setdefault(a, []).append(ANSWERS_RETRACTED)
    for key, fact in store.get_state_keys(project_id, FEEDBACK_SCOPE, "", ids).items():
        conf = feedback_confidence(fact.value)
        if conf is not None and conf.value < floor:
            out.setdefault(key, []).append("wrong")
    return out


def with_marks(store: Store, project_id: str, events: Sequence[Event]) -> list[Event]:
    """The events, each carrying its `event_marks` in `Event.marks` (an event read tells
    that a message is retracted or rated wrong, as the listings do)."""
    marks = event_marks(store, project_id, events)
    return [e.model_copy(update={"marks": marks[e.id]}) if e.id in marks else e for e in events]
