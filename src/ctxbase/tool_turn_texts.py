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

Idempotent: only active messages still without text are read and changed (a message
forgotten, hidden or given a text meanwhile is left alone), and the step is recorded done
at the end; a message whose calls are all gone (forgotten, hidden) has nothing to read as
and is left as it was.
"""

from __future__ import annotations

from collections.abc import Mapping

from .capture.tool_calls import TEXT_FROM, TOOL_CALLS, call_text
from .model import Event
from .retrieve.indexing import Chunker, context_terms, event_items, event_search_text
from .store.base import TOOL_CALL_TEXTS, EventRetext, Store

__all__ = ["calls_text", "retext_tool_call_turns"]

_BATCH = 500


def _call_count(event: Event) -> int:
    data = event.data
    count = data.get("tool_calls") if isinstance(data, Mapping) else None
    return count if isinstance(count, int) and not isinstance(count, bool) else 0


def calls_text(store: Store, turn: Event) -> str | None:
    """What an old tool-call turn reads as: its calls, one a line, as capture renders them
    now; None when none of them is stored (active) any more."""
    count = _call_count(turn)
    if count < 1 or turn.seq is None:
        return None
    after = store.event_page(turn.project_id, turn.session_id, after_seq=turn.seq, limit=count)
    calls: list[str] = []
    for e in after:  # its calls were written right after it, in order
        if e.type != "tool_invocation" or turn.id not in e.parent_event_ids:
            break
        data = e.data if isinstance(e.data, Mapping) else {}
        calls.append(call_text(data.get("tool"), data.get("arguments")))
    return "\n".join(calls) or None


def _retext(store: Store, turn: Event, chunker: Chunker | None) -> EventRetext | None:
    text = calls_text(store, turn)
    if text is None:
        return None
    metadata = {**turn.metadata, TEXT_FROM: TOOL_CALLS}
    event = turn.model_copy(update={"text": text, "metadata": metadata})
    search = event_search_text(event)
    return EventRetext(
        event_id=turn.id,
        text=text,
        metadata=metadata,
        items=event_items(event, chunker, search_text=search),
        context_terms=" ".join(context_terms(search)),
    )


def retext_tool_call_turns(store: Store, chunker: Chunker | None) -> int:
    """Run the step when the store has it pending (one read when it has not); returns how
    many messages were given their calls' text. `chunker` cuts a long text, as capture
    would."""
    if TOOL_CALL_TEXTS not in store.pending_upgrades():
        return 0
    done = 0
    after: tuple[str, str] | None = None
    while batch := store.textless_events("assistant_message", after, _BATCH):
        after = (batch[-1].project_id, batch[-1].id)
        by_project: dict[str, list[EventRetext]] = {}
        for turn in batch:
            change = _retext(store, turn, chunker)
            if change is not None:
                by_project.setdefault(turn.project_id, []).append(change)
        for project_id, changes in by_project.items():
            done += store.retext_events(project_id, changes)
    store.finish_upgrade(TOOL_CALL_TEXTS)
    return done
