"""Retention of archived sessions: their raw turns compacted into one summary (seeds 001, 003).

Seed 003 keeps every message when a session is archived, "then periodically cleans the raw
content and keeps a summary"; seed 001 compresses old context extractively. Here an archived
session older than a threshold gets one `session_summary` event (an extractive summary of its
tasks, requirements, decisions and key turns, bounded in size; no model needed), and its raw
turns are hidden the way `soft_delete` hides (the same `active` flag, reversible with
`restore`), so searches, assembly and the indexes serve the summary instead. Nothing is lost
silently: the rows stay, recorded as compacted, which the purge of soft-deleted rows leaves
alone; the entities and relations anchored from the turns stay visible (only the turns are
hidden), and the facts they set stay too.

What the summary says comes from the turns it names (`metadata["source_ids"]`): visible ones,
never a retracted, hidden or forgotten message. A turn forgotten (or hidden by its own id)
after the compaction leaves the summary too (summary_redaction.py), so forgotten text never
outlives its message in a summary.

Idempotent: a session that holds a summary is done, so running again does nothing more (a
turn a user restored stays restored).
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Callable, Sequence
from typing import Any

from ..components import Components
from ..model import Event, SessionInfo
from .compaction_report import CompactionReport
from .echoes import echo_ids
from .lifecycle import Status
from .state import message_statuses
from .summary_text import SUMMARY_TOKENS, summary_text

__all__ = [
    "SUMMARY_TYPE",
    "CompactionReport",
    "Progress",
    "compact_archived",
    "summary_id",
]

log = logging.getLogger(__name__)

SUMMARY_TYPE = "session_summary"
# Turns of these kinds say what the session was about; the others (model calls, thoughts,
# tool invocations) are hidden with them but not summarised.
_SAID = ("user_message", "assistant_message", "tool_result", "system")

Progress = Callable[[int, int, str], None]  # (done, total, session id)


def summary_id(project_id: str, session_id: str) -> str:
    """The summary's id, one per session: a second compaction would write the same row."""
    digest = hashlib.sha256(f"{project_id}\x00{session_id}".encode()).hexdigest()[:24]
    return f"summary-{digest}"


def archived_at(info: SessionInfo) -> float:
    """When the session was archived: its status log says, else its last change (an
    archived record takes no writes, so that is the archiving)."""
    for entry in reversed(info.metadata.get("status_log") or []):
        if isinstance(entry, dict) and entry.get("to") == Status.ARCHIVED.value:
            ts = entry.get("ts")
            if isinstance(ts, int | float):
                return float(ts)
    return info.updated_at


def compact_archived(
    cb: Components,
    older_than_s: float,
    *,
    project: str,
    now: float | None = None,
    progress: Progress | None = None,
) -> CompactionReport:
    """Compact every session of `project` archived more than `older_than_s` seconds ago
    (see the module doc); `progress` is told after each session considered."""
    at = time.time() if now is None else now
    report = CompactionReport()
    archived = [s for s in cb.store.list_sessions(project) if s.status == Status.ARCHIVED]
    due = [s for s in archived if archived_at(s) <= at - older_than_s]
    report.too_recent = [s.session_id for s in archived if archived_at(s) > at - older_than_s]
    for done, info in enumerate(due, 1):
        hidden = _compact_one(cb, project, info)
        if hidden is None:
            report.already_compacted.append(info.session_id)
        elif hidden == 0:
            report.nothing_to_compact.append(info.session_id)
        else:
            report.compacted.append(info.session_id)
            report.events_hidden += hidden
        if progress is not None:
            progress(done, len(due), info.session_id)
    if report.compacted:
        cb.notify_embedder()  # the summaries' search units want vectors
    return report


def _compact_one(cb: Components, pid: str, info: SessionInfo) -> int | None:
    """Compact one session: the turns hidden (0: none to hide), None when compacted before."""
    sid = info.session_id
    store = cb.store
    own = summary_id(pid, sid)  # compaction's own summary: a captured session_summary is a turn
    if store.get_events(pid, [own], include_inactive=True):
        return None
    raw = [e for e in store.list_events(pid, sid) if e.id != own]
    if not raw:
        return 0
    statuses = message_statuses(cb, sid, project=pid)
    # out of prompts: out of here, and so are the replies that repeat a retracted message
    retracted = set(statuses) | echo_ids(raw, statuses)
    sources = [e for e in raw if e.type in _SAID and e.id not in retracted and e.text]
    tasks = store.list_tasks(pid, sid)
    text = summary_text(info, tasks, sources, len(raw))
    summary = Event(
        id=summary_id(pid, sid),
        project_id=pid,
        session_id=sid,
        agent_id="ctxbase",
        type=SUMMARY_TYPE,
        text=text,
        ts=max(e.ts for e in raw),
        importance=0.8,
        metadata=_metadata(raw, sources, len(text)),
    )
    with store.transaction():  # the summary and the hiding, together or not at all
        written = store.write_events([summary], [summary_items(cb, summary)])
        if not written:  # forgotten before (a tombstone): the session is not compacted again
            return None
        store.set_active(pid, [e.id for e in raw], False, compacted=True)
    log.info("compacted archived session %r: %d turns into its summary", sid, len(raw))
    return len(raw)


def _metadata(raw: Sequence[Event], sources: Sequence[Event], chars: int) -> dict[str, Any]:
    return {
        "summarizer": "extractive",
        "compacted_ids": [e.id for e in raw],  # what `restore` brings back
        "source_ids": [e.id for e in sources],  # what the summary says comes from
        "max_tokens": SUMMARY_TOKENS,
        "chars": chars,
    }


def summary_items(cb: Components, event: Event) -> list[Any]:
    """The search units of a summary: its own words only (no context from the turn before
    it, which may be forgotten later)."""
    from ..retrieve.indexing import chunker_for, event_items

    return event_items(event, chunker_for(cb.chunking))
