"""Upgrade step of schema 8 (store.base.TOOL_CALL_TEXTS): old tool-call turns read as their
calls.

An assistant message made only of tool calls was once stored with no text and the data
{"tool_calls": n}: its search text was that JSON, and searches found it for nothing it said.
Such a message is now stored reading as its calls (`run_sql(sql="SELECT ...")`,
capture.tool_calls). The store's migration records the step pending when its database
holds messages of that shape; the base opening the store re-derives each one's text from
the calls it made (the tool_invocation events that follow it in its session, caused by it)
and gives it that text, the `text_from` mark capture gives it (so message lists still align
by what was sent), and its search units again: keyword terms rewritten, vectors dropped for
the embedding worker to compute, and the items that follow it indexed with its new words.
Its calls, stored then as `run_sql({"sql": "SELECT ..."})`, are given capture's rendering
in the same step (`run_sql(sql="SELECT ...")`, with the same mark), so a search does not
show the old form, nor keep it over the turn as a near-duplicate; a call whose text is not
that old rendering is left as it is.

Idempotent: only active messages still without text are read and changed, and their calls
only while they hold the old rendering (an event forgotten, hidden or given another text
meanwhile is left alone), and the step is recorded done
at the end; a message whose calls are all gone (forgotten, hidden) has nothing to read as
and is left as it was.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from .capture.tool_calls import TEXT_FROM, TOOL_CALLS, call_text, sent_text
from .model import Event
from .retrieve.indexing import Chunker, context_terms, event_items, event_search_text
from .store.base import TOOL_CALL_TEXTS, EventRetext, Store

__all__ = ["calls_text", "retext_tool_call_turns"]

_BATCH = 500


def _call_count(event: Event) -> int:
    data = event.data
    count = data.get("tool_calls") if isinstance(data, Mapping) else None
    return count if isinstance(count, int) and not isinstance(count, bool) else 0


def _calls(store: Store, turn: Event) -> list[Event]:
    """The tool_invocation events an old tool-call turn made: written right after it, in
    order, each caused by it (those still stored and active)."""
    count = _call_count(turn)
    if count < 1 or turn.seq is None:
        return []
    after = store.event_page(turn.project_id, turn.session_id, after_seq=turn.seq, limit=count)
    calls: list[Event] = []
    for e in after:
        if e.type != "tool_invocation" or turn.id not in e.parent_event_ids:
            break
        calls.append(e)
    return calls


def _shown(call: Event) -> str:
    data = call.data if isinstance(call.data, Mapping) else {}
    return call_text(data.get("tool"), data.get("arguments"))


def calls_text(store: Store, turn: Event) -> str | None:
    """What an old tool-call turn reads as: its calls, one a line, as capture renders them
    now; None when none of them is stored (active) any more."""
    return "\n".join(_shown(e) for e in _calls(store, turn)) or None


def _legacy(call: Event) -> bool:
    """Whether a tool_invocation holds the rendering capture gave calls before schema 8:
    `name(<arguments as sent>)`, arguments that were not a string as JSON."""
    if call.metadata.get(TEXT_FROM) == TOOL_CALLS or not isinstance(call.data, Mapping):
        return False
    args: Any = call.data.get("arguments")
    shown = args if isinstance(args, str) else json.dumps(args, ensure_ascii=False)
    old = f"{call.data.get('tool') or 'tool'}({shown})"
    meta = {TEXT_FROM: TOOL_CALLS}
    return call.text in (old, sent_text("tool_invocation", call.text, call.data, meta))


def _change(event: Event, text: str, chunker: Chunker | None, old_text: str | None) -> EventRetext:
    metadata = {**event.metadata, TEXT_FROM: TOOL_CALLS}
    shown = event.model_copy(update={"text": text, "metadata": metadata})
    search = event_search_text(shown)
    return EventRetext(
        event_id=event.id,
        text=text,
        metadata=metadata,
        items=event_items(shown, chunker, search_text=search),
        context_terms=" ".join(context_terms(search)),
        old_text=old_text,
    )


def _retext(store: Store, turn: Event, chunker: Chunker | None) -> list[EventRetext]:
    """The turn's change, then its calls' still in the old rendering (in that order: each
    call is indexed with the turn's new words, and its result with the call's)."""
    calls = _calls(store, turn)
    if not calls:
        return []
    changes = [_change(turn, "\n".join(_shown(e) for e in calls), chunker, None)]
    for e in calls:
        shown = _shown(e)
        if e.text and e.text != shown and _legacy(e):
            changes.append(_change(e, shown, chunker, e.text))
    return changes


def retext_tool_call_turns(store: Store, chunker: Chunker | None) -> int:
    """Run the step when the store has it pending (one read when it has not); returns how
    many events were given a text (the turns and the calls rendered again). `chunker`
    cuts a long text, as capture would."""
    if TOOL_CALL_TEXTS not in store.pending_upgrades():
        return 0
    done = 0
    after: tuple[str, str] | None = None
    while batch := store.textless_events("assistant_message", after, _BATCH):
        after = (batch[-1].project_id, batch[-1].id)
        by_project: dict[str, list[EventRetext]] = {}
        for turn in batch:
            changes = _retext(store, turn, chunker)
            if changes:
                by_project.setdefault(turn.project_id, []).extend(changes)
        for project_id, changes in by_project.items():
            done += store.retext_events(project_id, changes)
    store.finish_upgrade(TOOL_CALL_TEXTS)
    return done
