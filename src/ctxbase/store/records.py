"""The storage protocol's records: what a `Store` takes and returns besides the model's
nodes (search units and their filters, counts, trace summaries, state history, API keys,
what a forget did). Re-exported by store.base, the protocol's import path."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "ApiKeyRecord",
    "EventCount",
    "EventRetext",
    "ForgetReport",
    "ItemFilter",
    "KeptFact",
    "KnowledgeView",
    "SearchItem",
    "StateChange",
    "TraceSummary",
]


@dataclass(frozen=True, slots=True)
class SearchItem:
    """One retrievable unit (a whole event, an entity, or a chunk of either).

    `terms` is the space-joined keyword-index terms (see retrieve.tokenize); `owner_id` is the
    event or entity the unit belongs to, so forgetting the owner removes its units.
    """

    item_id: str
    owner_id: str
    kind: str  # "event" | "entity" | "chunk"
    type: str  # event type or entity type
    text: str
    terms: str
    ts: float
    session_id: str | None = None
    agent_id: str | None = None
    agent_role: str | None = None
    path: str | None = None
    line_start: int | None = None
    line_end: int | None = None
    latest: bool = True
    importance: float = 0.5
    # Terms of the event this one follows, indexed with it (see retrieve.indexing); kept
    # apart so that hiding or forgetting that event also removes its words from here.
    context_terms: str = ""
    context_id: str | None = None
    # The repository an ingested entity comes from (None: events, other entities).
    repo: str | None = None


@dataclass(frozen=True, slots=True)
class EventRetext:
    """A stored event's text given by an upgrade step (`Store.retext_events`): the text and
    metadata it gets, its search units (replacing those it had), and the context terms of
    the items that follow it (indexed with its words: SearchItem.context_terms)."""

    event_id: str
    text: str
    metadata: dict[str, Any]
    items: Sequence[SearchItem]
    context_terms: str
    # the text the event must still hold to change: None, none (an old tool-call turn); a
    # text, exactly that (an old tool_invocation's legacy rendering)
    old_text: str | None = None


@dataclass(frozen=True, slots=True)
class KnowledgeView:
    """The knowledge base as of a tag (see anchor/kb_versions.py), as item owners.

    Items of `repos` are admitted only when they are latest (as of now) and their owner is
    not in `hidden_owner_ids` (units written or changed since the tag), or when their owner
    is in `shown_owner_ids` (the versions the tag holds that are no longer the latest: kept
    copies `<id>@v<n>`), whether or not the search asks for latest versions only. Items of
    other repositories, and items of no repository (events, anchored messages), are not
    concerned. Both sets hold only what changed since the tag, not the whole repository."""

    repos: tuple[str, ...]
    hidden_owner_ids: tuple[str, ...] = ()
    shown_owner_ids: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class ItemFilter:
    """Structured filters applied before any ranking (the first layer of dual-layer search)."""

    session_ids: tuple[str, ...] | None = None
    agent_ids: tuple[str, ...] | None = None
    agent_roles: tuple[str, ...] | None = None
    types: tuple[str, ...] | None = None
    kinds: tuple[str, ...] | None = None
    owner_ids: tuple[str, ...] | None = None
    repos: tuple[str, ...] | None = None  # ingested repositories (see anchor.ingest)
    path_prefix: str | None = None
    line_from: int | None = None  # keep items whose line range overlaps [line_from, line_to]
    line_to: int | None = None
    since: float | None = None
    until: float | None = None
    latest_only: bool = False
    # items of any session but these (and items of no session); cheaper than naming every
    # other session of a large project
    exclude_session_ids: tuple[str, ...] | None = None
    # a pinned knowledge-base version: what its repositories' items are as of that tag
    view: KnowledgeView | None = None


@dataclass(frozen=True, slots=True)
class EventCount:
    """How many active events of a session one agent recorded of one type, and when."""

    agent_id: str
    type: str
    count: int
    first_ts: float
    last_ts: float


@dataclass(frozen=True, slots=True)
class TraceSummary:
    """One stored assembly, without its trace: what a list of contexts shows."""

    context_id: str
    created_at: float
    agent_role: str | None
    session_id: str | None
    task_id: str | None
    intent: str | None
    policy: str | None
    total_tokens: int | None


@dataclass(frozen=True, slots=True)
class StateChange:
    """One entry of a state fact's history: the old and new value, when, and why. `ttl`:
    the time to live (seconds) the value was written with; `expired`: it went unwritten
    for that long, so it was out of prompts from `ts + ttl` until the next change (set by
    `assemble.state.fact_history`)."""

    key: str
    scope: str
    scope_id: str
    version: int
    old_value: Any
    new_value: Any
    cause: str | None
    ts: float
    deleted: bool = False
    ttl: float | None = None
    expired: bool = False


@dataclass(frozen=True, slots=True)
class KeptFact:
    """A fact a forget removes whole (a forgotten message is named in its history) that
    keeps a value another source stated (`Store.forget`'s `replace_state`): written back as
    its first version with that source's `cause`, so forgetting that source removes it too."""

    value: Any
    cause: str | None


@dataclass(frozen=True, slots=True)
class ApiKeyRecord:
    """A stored API key: only the sha256 of its secret is kept."""

    key_id: str
    key_hash: str
    name: str | None
    role: str  # "read" | "write" | "admin"
    projects: tuple[str, ...]  # "*" means every project
    created_at: float
    revoked_at: float | None = None


@dataclass
class ForgetReport:
    """What a hard forget did: rows removed per table (index entries as `item_fts` on
    SQLite), rows kept but redacted per table (traces of other sessions that used forgotten
    events), and in-memory cache entries dropped per cache. `not_found` lists the event ids,
    entity ids and session id the forget named that the project does not hold, and
    `already_forgotten` the ids (and session and repositories) named that the project has
    forgotten before (filled in by `ContextBase.forget`, which raises NotFoundError when
    every one it named is unknown), and `repos` the ingested repositories it forgot whole
    (not those forgotten before)."""

    removed: dict[str, int] = field(default_factory=dict)
    redacted: dict[str, int] = field(default_factory=dict)
    caches: dict[str, int] = field(default_factory=dict)
    not_found: list[str] = field(default_factory=list)
    already_forgotten: list[str] = field(default_factory=list)
    # messages a forgotten entity was anchored from: those that said what it said, forgotten
    # with it, and those that say more, left visible (filled in by `ContextBase.forget`);
    # the raw turns still compacted into a forgotten session summary go with it too
    sources_forgotten: list[str] = field(default_factory=list)
    sources_still_visible: list[str] = field(default_factory=list)
    # visible events whose text is a forgotten event's or entity's, up to whitespace and
    # case (the same thing said twice): left, for the caller to forget too (same_text.py)
    same_text_still_visible: list[str] = field(default_factory=list)
    # the ingested repositories forgotten whole (filled in by `ContextBase.forget`; by the
    # store for a whole-project forget, which forgets every repository of the project)
    repos: list[str] = field(default_factory=list)

    def add(self, table: str, n: int) -> None:
        if n:
            self.removed[table] = self.removed.get(table, 0) + n

    def add_redacted(self, table: str, n: int) -> None:
        if n:
            self.redacted[table] = self.redacted.get(table, 0) + n

    def add_cache(self, cache: str, n: int) -> None:
        if n:
            self.caches[cache] = self.caches.get(cache, 0) + n

    @property
    def total(self) -> int:
        """Rows removed (redacted rows and cache entries are counted apart)."""
        return sum(self.removed.values())

    def as_dict(self) -> dict[str, Any]:
        return {
            "removed": dict(self.removed),
            "redacted": dict(self.redacted),
            "caches": dict(self.caches),
            "total": self.total,
            "not_found": list(self.not_found),
            "already_forgotten": list(self.already_forgotten),
            "sources_forgotten": list(self.sources_forgotten),
            "sources_still_visible": list(self.sources_still_visible),
            "same_text_still_visible": list(self.same_text_still_visible),
            "repos": list(self.repos),
        }
