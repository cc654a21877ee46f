"""Summaries never keep what their messages no longer say.

A session has two summaries drawn from its messages: the archive's (`metadata
["archive_summary"]`, written when it is archived) and, once compacted, its
`session_summary` event (compaction.py). Both copy sentences. When a message is forgotten,
or hidden by its own id, what it said leaves both: the event's summary is written again
from the turns still there (its `metadata["source_ids"]`), and the archive's loses the
sentences of that message (it was cut from the messages alone, so taking sentences out
keeps it true). The caller reads the messages before it removes them (`removal_sources`),
and calls `after_removal` once they are gone or hidden.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence

from ..components import Components
from ..model import Event
from ..store.records import EventRetext
from .budget import split_sentences
from .compaction import SUMMARY_TYPE, summary_items
from .summary_text import summary_text

__all__ = ["after_removal", "removal_sources", "summarised"]

_ARCHIVE_SUMMARY = "archive_summary"


def removal_sources(cb: Components, pid: str, event_ids: Iterable[str]) -> list[Event]:
    """The stored events among these ids (hidden ones too), read before they go."""
    ids = list(dict.fromkeys(event_ids))
    return cb.store.get_events(pid, ids, include_inactive=True) if ids else []


def summarised(cb: Components, pid: str, events: Sequence[Event]) -> list[str]:
    """Those of the events a summary of their session says (among its `source_ids`)."""
    said: set[str] = set()
    for sid in dict.fromkeys(e.session_id for e in events):
        for summary in cb.store.list_events(pid, sid, types=[SUMMARY_TYPE]):
            said.update(str(i) for i in summary.metadata.get("source_ids") or [])
    return [e.id for e in events if e.id in said]


def after_removal(cb: Components, pid: str, removed: Sequence[Event]) -> int:
    """Take what the `removed` messages said out of their sessions' summaries; returns how
    many summaries changed."""
    if not removed:
        return 0
    gone = {e.id for e in removed}
    changes: list[EventRetext] = []
    redacted = 0
    for sid in dict.fromkeys(e.session_id for e in removed):
        for summary in cb.store.list_events(pid, sid, types=[SUMMARY_TYPE], include_inactive=True):
            change = _rewritten(cb, pid, summary, gone)
            if change is not None:
                changes.append(change)
        redacted += _redact_archive_summary(
            cb, pid, sid, [e for e in removed if e.session_id == sid]
        )
    if not changes:
        return redacted
    done = cb.store.retext_events(pid, changes)
    cb.notify_embedder()
    return redacted + done


def _redact_archive_summary(cb: Components, pid: str, sid: str, removed: Sequence[Event]) -> int:
    info = cb.store.get_session(pid, sid)
    said = info.metadata.get(_ARCHIVE_SUMMARY) if info is not None else None
    if info is None or not isinstance(said, str) or not said:
        return 0
    out = {_key(s) for e in removed for s in split_sentences(e.text or "")}
    kept = [s for s in split_sentences(said) if _key(s) not in out]
    text = " ".join(kept)
    if text == said:
        return 0
    # the archive is read-only to callers; this is what was forgotten leaving it, written
    # as it stands (status, times and log unchanged)
    cb.store.upsert_session(
        info.model_copy(update={"metadata": {**info.metadata, _ARCHIVE_SUMMARY: text}})
    )
    return 1


def _key(sentence: str) -> str:
    return " ".join(sentence.split()).casefold()


def _rewritten(cb: Components, pid: str, summary: Event, gone: set[str]) -> EventRetext | None:
    meta = dict(summary.metadata)
    named = [str(i) for i in meta.get("source_ids") or []]
    if not gone & set(named):
        return None  # it says nothing of theirs
    wanted = [i for i in named if i not in gone]
    by_id = {e.id: e for e in cb.store.get_events(pid, wanted, include_inactive=True)}
    sources = [by_id[i] for i in wanted if i in by_id]
    info = cb.store.get_session(pid, summary.session_id)
    if info is None:
        return None  # the session was forgotten, its summary with it
    ids = [str(i) for i in meta.get("compacted_ids") or []]
    still = {e.id for e in cb.store.get_events(pid, ids, include_inactive=True)}
    text = summary_text(info, cb.store.list_tasks(pid, summary.session_id), sources, len(still))
    meta.update(
        source_ids=[e.id for e in sources],
        compacted_ids=[i for i in ids if i in still],
        chars=len(text),
        rewritten_at=time.time(),
    )
    return EventRetext(
        event_id=summary.id,
        text=text,
        metadata=meta,
        items=summary_items(cb, summary.model_copy(update={"text": text, "metadata": meta})),
        context_terms="",
        old_text=summary.text,
    )
