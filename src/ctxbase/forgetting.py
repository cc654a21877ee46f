"""Hard forget and the retention purge of soft-deleted rows (`ForgetMethods`, mixed into
ContextBase).

The store removes or redacts every stored copy (`Store.forget`); this layer flushes the
capture queue first and then drops what the process holds in memory: cached query
vectors, the project's in-memory vectors, and the term and text-analysis caches.

An entity anchored from a message (a decision or requirement statement, a code block: its
`properties["event_id"]` names the message) is a copy of part of what the message said, and
search often ranks it first. Forgetting or hiding it alone would leave the message saying
the same thing, so an agent told to forget would believe it did. When the entity's text is
the message's text (the statement is the whole message), the message is the same memory
and goes with it (`sources_forgotten` / `sources_hidden`); when the message says more, it
is left as it is and named in `sources_still_visible`, for the caller to forget too if its
content must go. A mention (a table or service named in many messages) names no message:
forgetting it never touches the messages that mention it.

What a forgotten (or hidden) message said leaves its session's summaries too: the archive's
and the compacted session's (assemble/summary_redaction.py).
"""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from .errors import ConflictError, NotFoundError, ValidationError
from .known_projects import check_known_project
from .model import Event, id_arg
from .repo_forget import plan_repo_forget, repo_names
from .retrieve.caches import clear_text_caches
from .same_text import same_text_events, texts_said
from .store.base import ForgetReport, KeptFact
from .store.forget_steps import COMPACTED, SOFT_DELETED_SCOPE
from .validation import check_id_list

if TYPE_CHECKING:
    from .components import Components
    from .retrieve.embedding_worker import EmbeddingWorker
    from .retrieve.search import Searcher
    from .store.base import Store

__all__ = [
    "ForgetMethods",
    "VisibilityReport",
    "check_forget_named",
    "forget",
    "merged_named_whole",
    "nothing_matched",
    "parse_duration",
    "purge_soft_deleted",
    "restorable",
    "retention_seconds",
]

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhdw]?)\s*$")
_UNIT_S = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}

# entity types whose CONTAINS edges lead to their own text (sections), forgotten with them
_DOCUMENT_TYPES = frozenset({"document", "section"})


def parse_duration(text: str, field: str = "older_than") -> float:
    """Seconds of "90", "90s", "15m", "12h", "30d" or "2w"; ValidationError otherwise."""
    found = _DURATION.match(text)
    if found is None:
        raise ValidationError(field, f"must be a duration such as 3600, 12h or 30d (got {text!r})")
    return float(found.group(1)) * _UNIT_S[found.group(2)]


def retention_seconds(value: float | timedelta | str, field: str = "older_than") -> float:
    """A retention given as seconds, a timedelta or a duration string, checked."""
    if isinstance(value, str):
        return parse_duration(value, field)
    seconds = value.total_seconds() if isinstance(value, timedelta) else value
    if isinstance(seconds, bool) or not isinstance(seconds, int | float) or not seconds >= 0:
        raise ValidationError(field, f"must be a duration of at least 0 seconds (got {value!r})")
    return float(seconds)


@dataclass
class VisibilityReport:
    """What a soft delete or restore did: `changed` rows (what was anchored from a named
    event included), the named ids that were already hidden (soft delete) or visible
    (restore), those the project holds as neither event nor entity, and those it
    hard-forgot before (`already_forgotten`: nothing left to hide or bring back)."""

    changed: int = 0
    unchanged: list[str] = field(default_factory=list)
    not_found: list[str] = field(default_factory=list)
    already_forgotten: list[str] = field(default_factory=list)
    # messages a named entity was anchored from that say what it says: hidden (or restored)
    # with it; and those that say more, left visible (see the module's docstring)
    sources_hidden: list[str] = field(default_factory=list)
    sources_still_visible: list[str] = field(default_factory=list)
    # after a hide: visible events saying what a hidden one said (same_text.py)
    same_text_still_visible: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {
            "changed": self.changed,
            "unchanged": list(self.unchanged),
            "not_found": list(self.not_found),
            "already_forgotten": list(self.already_forgotten),
            "sources_hidden": list(self.sources_hidden),
            "sources_still_visible": list(self.sources_still_visible),
            "same_text_still_visible": list(self.same_text_still_visible),
        }


def nothing_matched(verb: str, named: Sequence[tuple[str, str]], project: str) -> NotFoundError:
    """Every id a call named is unknown: most likely a typo, which must not pass for done."""
    kinds = {kind for kind, _ in named}
    text = ", ".join(f"{kind} {i!r}" if kind else repr(i) for kind, i in named)
    where = f"not found in project {project!r}"
    if kinds == {""}:
        verb_s = "matches" if len(named) == 1 else "match"
        where = f"{verb_s} no event or entity of project {project!r}"
    kind, first = named[0]
    return NotFoundError(
        (kind if len(kinds) == 1 else "") or "item",
        first,
        ids=[i for _, i in named],
        message=f"nothing to {verb}: {text} {where}",
    )


@dataclass
class _Targets:
    """What a forget named: how many targets, how many of them the project holds, the
    (kind, id) it does not hold, and the ids (and session) it forgot before (tombstoned)."""

    named: int
    held: int
    unknown: list[tuple[str, str]]
    already_forgotten: list[str]


@dataclass
class _Sources:
    """The messages named entities were anchored from: those that say what the entity says
    (`same`: they go with it) and those that say more (`more`: left, and named)."""

    same: list[Event] = field(default_factory=list)
    more: list[Event] = field(default_factory=list)


def _anchored_sources(store: Store, pid: str, ids: Sequence[str]) -> _Sources:
    """The source messages of the entities among `ids` (not those named themselves)."""
    named = set(ids)
    texts: dict[str, list[str]] = {}
    for entity in store.get_entities(pid, list(named), include_inactive=True):
        source = entity.properties.get("event_id")
        if isinstance(source, str) and source and source not in named:
            texts.setdefault(source, []).append(entity.text)
    out = _Sources()
    if not texts:
        return out
    for event in store.get_events(pid, list(texts), include_inactive=True):
        said = _said(event.text)
        same = bool(said) and any(_said(t) == said for t in texts[event.id])
        (out.same if same else out.more).append(event)
    return out


def _said(text: str | None) -> str:
    """Text as said: whitespace runs as one space, without the closing punctuation."""
    return " ".join((text or "").split()).rstrip("。．.!！?？;；")


def _visible(cb: ForgetMethods, pid: str, events: Sequence[Event]) -> list[str]:
    """Those of the events still visible now: shown themselves, or compacted into their
    archived session's summary, which says what they said (assemble/summary_redaction.py)."""
    shown = [e.id for e in cb.store.get_events(pid, [e.id for e in events])]
    hidden = [e for e in events if e.id not in shown]
    if not hidden:
        return shown
    from .assemble.summary_redaction import summarised

    return [*shown, *summarised(cb.components, pid, hidden)]


def _targets(
    store: Store,
    pid: str,
    event_ids: Sequence[str],
    entity_ids: Sequence[str],
    session_id: str | None,
) -> _Targets:
    """The store forgets an id whichever list names it, so an id is known when it is an
    event or an entity, and already forgotten when it is neither but has an event's or an
    entity's tombstone; its kind in the answer is the list that named it. A session is
    known when the project holds it or facts scoped to it (a fact can be set for a session
    nothing was captured in), or the history of such facts (deleted ones, whose old values
    the forget removes), or contexts assembled in it (an assembly writes no event, and its
    trace holds the request's text), and already forgotten when it has a session's
    tombstone."""
    named = [("event", i) for i in dict.fromkeys(event_ids)]
    named += [("entity", i) for i in dict.fromkeys(entity_ids)]
    ids = list(dict.fromkeys(i for _, i in named))
    known: set[str] = set()
    gone: set[str] = set()
    if ids:
        known = store.existing_ids(pid, ids)
        rest = [i for i in ids if i not in known]
        covered = merged_named_whole(store, pid, rest, ids, "forget") if rest else set()
        known |= covered
        rest = [i for i in rest if i not in covered]
        gone = store.forgotten_ids(pid, rest, ("event", "entity")) if rest else set()
    unknown = [(kind, i) for kind, i in named if i not in known and i not in gone]
    held = sum(1 for _, i in named if i in known)
    already = [i for i in ids if i in gone]
    if session_id is not None:
        if (
            store.get_session(pid, session_id) is not None
            or store.get_state(pid, "session", session_id)
            or store.state_history(pid, "session", session_id)
            or store.list_traces(pid, session_id=session_id, limit=1)
        ):
            held += 1
        elif store.forgotten_ids(pid, [session_id], ("session",)):
            already.append(session_id)
        else:
            unknown.append(("session", session_id))
    return _Targets(len(named) + (session_id is not None), held, unknown, already)


def _document_parts(store: Store, pid: str, entity_ids: Sequence[str]) -> list[str]:
    """The sections the named documents contain (CONTAINS drawn when they were anchored),
    theirs in turn: a section holds the document's text, so forgetting a document forgets
    them too (each with its kept versions, as the named ones)."""
    docs = [
        e.id
        for e in store.get_entities(pid, list(dict.fromkeys(entity_ids)), include_inactive=True)
        if e.type in _DOCUMENT_TYPES
    ]
    parts: dict[str, None] = {}
    while docs:
        links = store.list_relations(
            pid, docs, direction="out", types=["CONTAINS"], include_closed=True,
            include_hidden=True,  # a section hidden on its own is forgotten too
        )  # fmt: skip
        found = [r.to_id for r in links if r.to_id.startswith("section:")]
        docs = [i for i in dict.fromkeys(found) if i not in parts and i not in entity_ids]
        parts.update(dict.fromkeys(docs))
    return list(parts)


def _edition_moves(cb: ForgetMethods, pid: str, ids: Sequence[str], hidden: bool) -> None:
    """The current edition of a document written again under the same name (same_name.py),
    hidden: the one it superseded is current while it is; restored: it is current again."""
    docs = [
        e
        for e in cb.store.get_entities(pid, list(ids), include_inactive=True)
        if e.type == "document"
    ]
    if not docs:
        return
    from .anchor.same_name import reinstate_superseded, supersede_same_name

    if hidden:
        reinstate_superseded(cb.components, pid, [d.id for d in docs])
    else:
        for doc in docs:
            supersede_same_name(cb.components, doc)


def _cards_to_rewrite(
    store: Store, pid: str, entity_ids: Sequence[str], parts: Sequence[str]
) -> list[str]:
    """The documents that keep a section named among `entity_ids`: their cards name its
    words and heading, and are written again after the forget or hide (anchor/doc_card.py)."""
    if not any(i.startswith("section:") for i in entity_ids):
        return []
    from .anchor.doc_card import documents_of_sections

    going = {*entity_ids, *parts}
    return [d for d in documents_of_sections(store, pid, entity_ids) if d not in going]


def _kept_versions(store: Store, pid: str, entity_ids: Sequence[str]) -> list[str]:
    """The earlier versions kept of these entities (`<id>@v<n>`, written when an update
    changed them): forgetting an entity forgets what it said before, too. Each new version
    linked the entity to the one it replaced (MODIFIES, closed once superseded), so one read
    of those links finds them all."""
    if not entity_ids:
        return []
    named = list(dict.fromkeys(entity_ids))
    links = store.list_relations(
        pid, named, direction="out", types=["MODIFIES"], include_closed=True
    )
    return sorted(
        {
            r.to_id
            for r in links
            if r.source == "auto:version" and r.to_id.startswith(f"{r.from_id}@v")
        }
    )


def merged_named_whole(
    store: Store, pid: str, ids: Sequence[str], named: Sequence[str], action: str
) -> set[str]:
    """Those of `ids` (held by no row of their own) that name events the capture bus merged
    into an aggregated event which `named` names too: the call covers them. ConflictError
    for one whose aggregated event it does not name: hiding or forgetting the whole burst
    for one of its events would take the others with it, unasked."""
    into = store.event_aliases(pid, ids)
    for alias, event_id in into.items():
        if event_id not in named:
            raise ConflictError(
                f"cannot {action} event {alias!r} alone: it was merged into event "
                f"{event_id!r} when captured (a burst of low-priority events, each kept "
                f"whole in its data['aggregated']); {action} {event_id!r} to {action} the "
                "whole burst"
            )
    return set(into)


def check_forget_named(
    event_ids: Sequence[str],
    entity_ids: Sequence[str],
    session_id: str | None,
    whole_project: bool,
    soft_deleted_older_than: float | timedelta | str | None,
    repo: str | None,
    repos: Sequence[str],
) -> list[str]:
    """The repositories a forget names, once it is known to name something: the same check
    (and message) embedded and in the remote client, before anything is sent."""
    check_id_list("event_ids", event_ids)
    check_id_list("entity_ids", entity_ids)
    if session_id is not None:
        id_arg("session_id", session_id)  # a SessionInfo where its id goes, say so
    if not isinstance(whole_project, bool):  # "yes" or 1 must not wipe a project
        raise ValidationError("whole_project", f"must be True or False (got {whole_project!r})")
    names = repo_names(repo, repos)
    if whole_project and (event_ids or entity_ids or session_id or names):
        # which was meant? the narrow target, most likely: forget nothing, say so
        raise ValidationError(
            "whole_project",
            "forgets everything the project holds: name it alone, not with event_ids, "
            "entity_ids, session_id or repo",
        )
    if not (event_ids or entity_ids or session_id or whole_project or names) and (
        soft_deleted_older_than is None
    ):
        raise ValidationError(
            "forget",
            "name event_ids, entity_ids, session_id, repo, soft_deleted_older_than or "
            "whole_project=True",
        )
    return names


def forget(
    cb: ForgetMethods,
    *,
    event_ids: Sequence[str] = (),
    entity_ids: Sequence[str] = (),
    session_id: str | None = None,
    whole_project: bool = False,
    soft_deleted_older_than: float | timedelta | str | None = None,
    project: str | None = None,
    repo: str | None = None,
    repos: Sequence[str] = (),
) -> ForgetReport:
    """See `ContextBase.forget`."""
    names = check_forget_named(
        event_ids, entity_ids, session_id, whole_project, soft_deleted_older_than, repo, repos
    )
    before = None
    if soft_deleted_older_than is not None:
        before = time.time() - retention_seconds(soft_deleted_older_than)
    pid = cb.resolve_project(project)
    cb.flush()
    if cb._searcher is not None:  # noted uses first: the forget then removes those it covers
        cb._searcher.usage.flush()
    # an unknown repository is refused before anything is done; one forgotten before is
    # "already forgotten", as a session is
    plan = plan_repo_forget(cb.store, pid, names) if names and not whole_project else None
    repos_forgotten = plan.already_forgotten if plan is not None else []
    if plan is not None and not plan.names:
        plan = None  # each was forgotten before: nothing left to remove
    targets = _targets(cb.store, pid, event_ids, entity_ids, session_id)
    unknown, named = targets.unknown, targets.named
    sources = _anchored_sources(cb.store, pid, [*event_ids, *entity_ids])
    only_named = not whole_project and before is None and plan is None
    if named and len(unknown) == named and only_named and not repos_forgotten:
        check_known_project(cb.store, cb.project, pid)  # a mistyped project says so
        raise nothing_matched("forget", unknown, pid)
    # what the named events and entities said, read before they go: the visible events that
    # say the same are named after (the same thing stored twice stays otherwise)
    said = texts_said(cb.store, pid, [*event_ids, *entity_ids]) if targets.held else {}
    # what the messages forgotten said leaves their sessions' summaries (read before they go)
    removed = _removal_sources(cb, pid, [*event_ids, *(e.id for e in sources.same)])
    # what a purge forgets, read once for the facts and the summaries among it
    purged = _purged_ids(cb.store, pid, before) if before is not None else []
    # the raw turns a forgotten summary alone still shows go with it
    behind = [] if whole_project else _compacted_behind(cb.store, pid, [*event_ids, *purged])
    with_sources = [*(e.id for e in sources.same), *behind]
    parts = _document_parts(cb.store, pid, entity_ids) if entity_ids else []
    cards = _cards_to_rewrite(cb.store, pid, entity_ids, parts)
    # facts a forgotten message is named in go whole; those another message still states
    # (or a caller set) are written back with that value
    kept = (
        {}
        if whole_project
        else _kept_facts(cb, pid, [*event_ids, *with_sources, *purged], session_id)
    )
    if only_named and targets.held == 0:
        # nothing named is held: a repeat (or a retry whose first answer was lost) of a
        # forget that was done, which has nothing left to remove
        report = ForgetReport()
    else:
        report = cb.store.forget(
            pid,
            event_ids=[*event_ids, *with_sources],
            entity_ids=[
                *entity_ids,
                *parts,
                *_kept_versions(cb.store, pid, [*entity_ids, *parts]),
                *(plan.entity_ids if plan else ()),
            ],
            session_id=session_id,
            whole_project=whole_project,
            soft_deleted_before=before,
            replace_state={**kept, **(plan.replace_state if plan else {})} or None,
            repos=plan.names if plan else (),
            redact_ids=cards,  # their cards, rewritten below, listed the section's words
        )
        if plan is not None and plan.repin is not None:
            # the pinned view held forgotten ids: its tag, rewritten, is pinned again
            from .anchor.kb_versions import pin_knowledge  # numpy: only when a pin moves

            pin_knowledge(cb.components, plan.repin, project=pid)
        if removed:
            from .assemble.summary_redaction import after_removal

            after_removal(cb.components, pid, removed)
        if entity_ids and report.total:
            from .anchor.same_name import reinstate_superseded  # its earlier edition is current

            reinstate_superseded(cb.components, pid, entity_ids)
        if cards and report.total:
            from .anchor.doc_card import rewrite_cards  # a section forgotten alone

            rewrite_cards(cb.components, pid, cards, versions=True)
        for cache, n in cb._forget_cached(pid).items():
            report.add_cache(cache, n)
        report.add_cache("text_analysis", clear_text_caches())
    # a whole-project forget forgets the project's repositories too: the store names them
    report.repos = plan.names if plan else report.repos if whole_project else []
    report.not_found = [i for _, i in unknown]
    report.already_forgotten = [*targets.already_forgotten, *repos_forgotten]
    if report.total:
        report.sources_forgotten = with_sources
    report.sources_still_visible = _visible(cb, pid, sources.more)
    if said:
        skip = {*event_ids, *entity_ids, *report.sources_still_visible}
        report.same_text_still_visible = same_text_events(cb.store, pid, said, skip)
    return report


def restorable(store: Store, pid: str, events: Sequence[Event]) -> list[Event]:
    """What a restore of a session names, of its `events`: those hidden other than by
    compaction (a soft forget of the session hid only what showed, its summary among them,
    so the two undo each other); with none of those, the turns compacted into its summary.
    The visible ones too (told unchanged)."""
    out = [e for e in events if not e.active]
    causes = store.get_state_keys(pid, SOFT_DELETED_SCOPE, "", [e.id for e in out])
    own = [e for e in out if e.id not in causes or causes[e.id].cause != COMPACTED]
    return [*(e for e in events if e.active), *(own or out)]


def _purged_ids(store: Store, pid: str, before: float) -> list[str]:
    """The ids a purge forgets: hidden before `before`, other than by compaction (the
    store's purge reads the same records)."""
    hidden = store.get_state(pid, SOFT_DELETED_SCOPE, "")
    return [f.key for f in hidden if f.updated_at < before and f.cause != COMPACTED]


def _compacted_behind(store: Store, pid: str, ids: Sequence[str]) -> list[str]:
    """The raw turns still compacted into the session summaries among `ids` (a forget's
    named events and what its purge forgets). Hidden by the compaction, they are shown only
    by their summary: left stored after it, nothing would show, restore or ever purge them."""
    if not ids:
        return []
    from .assemble.compaction import SUMMARY_TYPE

    named = set(ids)
    found = store.get_events(pid, list(named), include_inactive=True)
    listed = [
        i
        for e in found
        if e.type == SUMMARY_TYPE
        for i in e.metadata.get("compacted_ids") or ()
        if isinstance(i, str) and i not in named
    ]
    if not listed:
        return []
    states = store.get_state_keys(pid, SOFT_DELETED_SCOPE, "", listed)
    return [i for i in dict.fromkeys(listed) if i in states and states[i].cause == COMPACTED]


def _kept_facts(
    cb: ForgetMethods,
    pid: str,
    event_ids: Sequence[str],
    session_id: str | None,
) -> dict[tuple[str, str, str], KeptFact]:
    """The facts the forgotten messages are named in that keep a value (withheld.py): those
    named (a purge's among them) and a forgotten session's (its user's facts only: its own
    scopes go whole)."""
    wanted = list(dict.fromkeys(event_ids))
    events = cb.store.get_events(pid, wanted, include_inactive=True) if wanted else []
    skip: set[tuple[str, str]] = set()
    if session_id is not None:
        own = cb.store.list_events(pid, session_id, types=["user_message"], include_inactive=True)
        events += own
        skip = {("session", session_id), *(("task", e.task_id) for e in own if e.task_id)}
        skip |= {("task", t.task_id) for t in cb.store.list_tasks(pid, session_id)}
    if not events:
        return {}
    from .assemble.withheld import facts_kept_after_forget

    return facts_kept_after_forget(cb.components, events, project=pid, skip_scopes=skip)


def _removal_sources(cb: ForgetMethods, pid: str, event_ids: Sequence[str]) -> list[Event]:
    if not event_ids:
        return []
    from .assemble.summary_redaction import removal_sources

    return removal_sources(cb.components, pid, event_ids)


def purge_soft_deleted(
    cb: ForgetMethods,
    older_than: float | timedelta | str,
    *,
    project: str | None = None,
    all_projects: bool = False,
) -> ForgetReport:
    """Hard forget what was soft-deleted more than `older_than` ago (seconds, a timedelta
    or "30d"), in one project or in every project; one report for all."""
    retention_seconds(older_than)  # bad input fails before any project is touched
    if not all_projects:
        return forget(cb, soft_deleted_older_than=older_than, project=project)
    total = ForgetReport()
    for pid in cb.store.list_projects():
        one = forget(cb, soft_deleted_older_than=older_than, project=pid)
        for table, n in one.removed.items():
            total.add(table, n)
        for table, n in one.redacted.items():
            total.add_redacted(table, n)
        for cache, n in one.caches.items():
            total.add_cache(cache, n)
    return total


class ForgetMethods:
    """Mixed into `ContextBase`: it supplies `store`, `_searcher`, `_embedding_worker`,
    `flush` and `_pid`."""

    store: Store
    project: str
    components: Components
    _searcher: Searcher | None
    _embedding_worker: EmbeddingWorker | None

    def _pid(self, project: str | None) -> str:
        raise NotImplementedError

    def resolve_project(self, project: str | None = None) -> str:
        raise NotImplementedError

    def flush(self, timeout: float | None = None) -> None:
        raise NotImplementedError

    def soft_delete(self, ids: Sequence[str], *, project: str | None = None) -> int:
        """Hide events or entities from every read; `restore` brings them back. What was
        anchored from a hidden event (its entities, and mentions no other visible event
        names) is hidden and restored with it, and counted; an entity hidden by its own id
        stays hidden when the event is restored. A fact a hidden message stated is withdrawn
        (back to an earlier value, or deleted, in its history), unless a later message set it
        again, and comes back with the message (assemble/withheld.py). When they were
        hidden is recorded:
        `purge_soft_deleted` forgets them after a retention. Returns the rows hidden;
        `set_hidden` also says which ids were hidden already, hard-forgotten before or are
        unknown. NotFoundError when every id is unknown (an id hidden already, or
        forgotten, is no error)."""
        return self.set_hidden(ids, True, project=project).changed

    def restore(self, ids: Sequence[str], *, project: str | None = None) -> int:
        """Bring back what `soft_delete` hid; the rows restored (see `set_hidden`)."""
        return self.set_hidden(ids, False, project=project).changed

    def set_hidden(
        self, ids: Sequence[str], hidden: bool = True, *, project: str | None = None
    ) -> VisibilityReport:
        """Soft delete (`hidden=True`) or restore events or entities, as `soft_delete` and
        `restore` do, with a report: the rows changed, the ids that were already in that
        state, the ids of events and entities hard-forgotten before (known by their
        tombstones; no error, nothing to do for them), and the ids the project holds as
        neither (NotFoundError when that is every id named)."""
        check_id_list("ids", ids)
        pid = self._pid(project)
        self.flush()
        wanted = list(dict.fromkeys(ids))
        if not wanted:
            return VisibilityReport()
        events = self.store.get_events(pid, wanted, include_inactive=True)
        state = {e.id: e.active for e in events}
        for entity in self.store.get_entities(pid, wanted, include_inactive=True):
            state.setdefault(entity.id, entity.active)
        missing = [i for i in wanted if i not in state]
        action = "hide" if hidden else "restore"
        covered = merged_named_whole(self.store, pid, missing, wanted, action) if missing else set()
        if covered:  # their aggregated event is named: they go with it
            wanted = [i for i in wanted if i not in covered]
            missing = [i for i in missing if i not in covered]
        gone = self.store.forgotten_ids(pid, missing, ("event", "entity")) if missing else set()
        unknown = [i for i in missing if i not in gone]
        forgotten = [i for i in missing if i in gone]
        if len(unknown) == len(wanted):
            check_known_project(self.store, self.project, pid)  # a mistyped project says so
            raise nothing_matched("hide" if hidden else "restore", [("", i) for i in unknown], pid)
        report = VisibilityReport(not_found=unknown, already_forgotten=forgotten)
        if len(missing) == len(wanted):
            return report  # every id was forgotten (or unknown): nothing left to change
        sources = _anchored_sources(self.store, pid, wanted)
        with_them = [e.id for e in sources.same if e.active == hidden]
        report.changed = self.store.set_active(pid, [*wanted, *with_them], not hidden)
        if report.changed:
            _edition_moves(self, pid, wanted, hidden)
        if cards := _cards_to_rewrite(self.store, pid, wanted, ()):
            from .anchor.doc_card import rewrite_cards  # a section hidden or restored alone

            rewrite_cards(self.components, pid, cards)
        moved = [e for e in [*events, *sources.same] if e.active == hidden]
        if moved:  # the facts the messages stated go out and come back with them
            from .assemble.withheld import HIDDEN, messages_out, reinstate_facts, withdraw_facts

            if hidden:
                withdraw_facts(self.components, moved, HIDDEN, project=pid)
            else:
                reinstate_facts(self.components, moved, "restored", project=pid)
                # a message retracted or rated false keeps its words from its neighbour
                out = messages_out(self.components, [e.id for e in moved], project=pid)
                if out:
                    self.store.set_context_hidden(pid, sorted(out), True)
        report.unchanged = [i for i in wanted if i in state and state[i] == (not hidden)]
        if hidden:  # what a message hidden by its own id said leaves its session's summaries
            from .assemble.summary_redaction import after_removal

            after_removal(self.components, pid, [*events, *sources.same])
        report.sources_hidden = with_them
        if hidden:
            report.sources_still_visible = _visible(self, pid, sources.more)
            skip = {*wanted, *with_them, *report.sources_still_visible}
            said = texts_said(self.store, pid, wanted)
            report.same_text_still_visible = same_text_events(self.store, pid, said, skip)
        return report

    def forget(
        self,
        *,
        event_ids: Sequence[str] = (),
        entity_ids: Sequence[str] = (),
        session_id: str | None = None,
        whole_project: bool = False,
        soft_deleted_older_than: float | timedelta | str | None = None,
        project: str | None = None,
        repo: str | None = None,
        repos: Sequence[str] = (),
    ) -> ForgetReport:
        """Hard forget events, entities, a session, ingested repositories (`repo`,
        `repos`: every entity an ingest wrote under those names, and where they live, so a
        later ingest is a new one; see repo_forget.py), what was soft-deleted longer ago than
        `soft_deleted_older_than`, or the whole project: every stored copy is removed (rows,
        index entries, vectors, edges, facts, the session's traces) or redacted (other
        sessions' traces), and in-memory caches are dropped; a stale retry of a forgotten
        event is ignored. The report counts each per table and cache, names the ids the
        project does not hold (`not_found`) and the events, entities and session it forgot
        before (`already_forgotten`: forgetting again is no error, so a retry is harmless;
        a forget keeps a tombstone, a hash of each id, for that), repositories included.
        NotFoundError when every id and session named is unknown (unless whole_project or
        a purge was asked), and UnknownReposError (a NotFoundError naming the project's
        repositories), before anything is done, when a repository named is neither one of
        them nor forgotten before."""
        return forget(
            self,
            event_ids=event_ids,
            entity_ids=entity_ids,
            session_id=session_id,
            whole_project=whole_project,
            soft_deleted_older_than=soft_deleted_older_than,
            project=project,
            repo=repo,
            repos=repos,
        )

    def purge_soft_deleted(
        self,
        older_than: float | timedelta | str,
        *,
        project: str | None = None,
        all_projects: bool = False,
    ) -> ForgetReport:
        """Hard forget what was soft-deleted more than `older_than` ago (seconds, a
        timedelta or "30d"), in this project, another, or all of them."""
        return purge_soft_deleted(self, older_than, project=project, all_projects=all_projects)

    def _forget_cached(self, project_id: str) -> dict[str, int]:
        # Without a searcher yet nothing is cached (and no embedder needs loading).
        searcher = self._searcher
        dropped = {} if searcher is None else searcher.forget_cached(project_id)
        if self._embedding_worker is not None:
            dropped["code_cards"] = self._embedding_worker.forget_cached()
        return dropped
