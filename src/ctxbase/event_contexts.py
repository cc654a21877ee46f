"""What each captured event follows, for its search text: an event is indexed with the
words of the event before it (its first causal parent, else the previous event of its
session), as "Yes, the 3rd" means little without the question it answers."""

from __future__ import annotations

from collections.abc import Sequence

from .model import Event
from .retrieve.indexing import event_search_text
from .store.base import Store
from .store.shared import SharedReads

__all__ = ["preceding_texts"]


def preceding_texts(
    store: Store, events: Sequence[Event], texts: Sequence[str] | None = None
) -> dict[str, tuple[str, str]]:
    """The text each event follows: its first causal parent, else the previous event of
    its session (in this batch, or the last one stored). `texts` are the events' search
    texts when the caller has them."""
    if texts is None:
        texts = [event_search_text(e) for e in events]
    in_batch = {e.id: text for e, text in zip(events, texts, strict=True)}
    last_in_session: dict[tuple[str, str], str] = {}
    wanted: dict[str, str] = {}  # event id -> id of the event it follows
    need_tail: dict[str, tuple[str, str]] = {}  # event id -> (project, session)
    for e in events:
        key = (e.project_id, e.session_id)
        if e.parent_event_ids:
            wanted[e.id] = e.parent_event_ids[0]
        elif key in last_in_session:
            wanted[e.id] = last_in_session[key]
        else:
            need_tail[e.id] = key
        last_in_session[key] = e.id
    tail_sessions: dict[str, list[str]] = {}  # project -> sessions
    for pid, sid in dict.fromkeys(need_tail.values()):
        tail_sessions.setdefault(pid, []).append(sid)
    tails: dict[tuple[str, str], tuple[str, str]] = {}
    for pid, sids in tail_sessions.items():
        if isinstance(store, SharedReads):  # both built-in backends: one lookup
            last_events = store.last_events_of_sessions(pid, sids)
        else:
            last_events = {}
            for sid in sids:
                last = store.list_events(pid, sid, last_n=1)
                if last:
                    last_events[sid] = last[0]
        for sid, last_event in last_events.items():
            tails[(pid, sid)] = (last_event.id, event_search_text(last_event))
    missing = [w for w in wanted.values() if w not in in_batch]
    fetched: dict[str, str] = {}
    if missing:
        by_project: dict[str, list[str]] = {}
        project_of = {e.id: e.project_id for e in events}
        for eid, w in wanted.items():
            if w in missing:
                by_project.setdefault(project_of[eid], []).append(w)
        for pid, ids in by_project.items():
            for ev in store.get_events(pid, ids):
                fetched[ev.id] = event_search_text(ev)
    out: dict[str, tuple[str, str]] = {}
    for eid, w in wanted.items():
        text = in_batch.get(w) or fetched.get(w)
        if text:
            out[eid] = (w, text)
    for eid, key in need_tail.items():
        if key in tails:
            out[eid] = tails[key]
    return out
