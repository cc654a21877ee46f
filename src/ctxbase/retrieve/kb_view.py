"""What a search sees of a pinned knowledge-base version (tags: anchor/kb_versions.py).

A tag records, for the repositories it covers, which entity versions were current
(`{entity id: version}`). Seen as of the tag, each of them is either its stable id (still at
that version) or its kept copy `<id>@v<version>` (changed or removed since); everything
else of those repositories written since the tag is hidden. `resolve_view` turns a tag
into a `KnowledgeView` (store/base.py) that search applies as a filter; it holds only what
changed since the tag, and is computed when a version is pinned and again after each
ingest (the pin record keeps it), so a search reads one state record, not the repository,
and only when the project's index generation changed since it last read it (pinning and
unpinning change it: `Store.touch_index`).

State records (scope_id ''): scope `kb_tag`, key the tag's name, value
`{"repos": [...], "entities": {id: version}, "created_at": t}`; scope `kb_pin`, key
`pin`, value `{"tag": name, "repos": [...], "hidden": [...], "shown": [...],
"missing": n}`.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import NotFoundError
from ..model import Entity
from ..store.base import KnowledgeView, Store
from ..store.repo_records import KB_PIN_KEY, KB_PIN_SCOPE, KB_TAG_SCOPE

__all__ = [
    "KB_PIN_KEY",
    "KB_PIN_SCOPE",
    "KB_TAG_SCOPE",
    "LATEST",
    "ResolvedTag",
    "ViewCache",
    "entities_in_view",
    "kept_id",
    "pinned_view",
    "read_tag",
    "resolve_view",
    "view_for",
]

# `SearchConfig.kb_version` naming no tag: the latest knowledge base, whatever is pinned
LATEST = "latest"


def kept_id(entity_id: str, version: int) -> str:
    """Where an earlier version of an entity is kept (as entities.archived_id)."""
    return f"{entity_id}@v{version}"


@dataclass(frozen=True)
class ResolvedTag:
    """A tag seen from now: the view, how many of its versions are gone (forgotten, or
    changed while history was not kept), and how many are hidden (soft-deleted: shown
    again once restored)."""

    view: KnowledgeView
    missing: int
    soft_deleted: int = 0

    def to_json(self, tag: str) -> dict[str, Any]:
        return {
            "tag": tag,
            "repos": list(self.view.repos),
            "hidden": list(self.view.hidden_owner_ids),
            "shown": list(self.view.shown_owner_ids),
            "missing": self.missing,
            "soft_deleted": self.soft_deleted,
        }


def read_tag(store: Store, project_id: str, name: str) -> Mapping[str, Any]:
    facts = store.get_state(project_id, KB_TAG_SCOPE, "", name)
    if not facts or not isinstance(facts[0].value, dict):
        raise NotFoundError("knowledge-base version", name)
    value: Mapping[str, Any] = facts[0].value
    return value


def resolve_view(store: Store, project_id: str, tag: Mapping[str, Any]) -> ResolvedTag:
    """The knowledge base as of `tag` (a tag record's value), against the store now."""
    repos = tuple(str(r) for r in tag.get("repos") or ())
    tagged = {str(k): int(v) for k, v in dict(tag.get("entities") or {}).items()}
    current = {
        e.id: e
        for e in store.list_entities(project_id, latest_only=False)
        if e.active and e.properties.get("repo") in repos
    }
    hidden = sorted(
        i
        for i, e in current.items()
        if e.latest and "archived_from" not in e.properties and tagged.get(i) != e.version
    )
    shown: list[str] = []
    absent: dict[str, int] = {}  # tagged, not visible now: hidden, or gone
    for entity_id, version in tagged.items():
        now = current.get(entity_id)
        if now is not None and now.version == version:
            if not now.latest:  # (a document an ingest marked as an older version since)
                shown.append(entity_id)
            continue
        kept = current.get(kept_id(entity_id, version))
        if kept is not None:
            shown.append(kept.id)
        elif not entity_id.startswith("file:"):  # (a file's summary is not versioned)
            absent[entity_id] = version
    soft_deleted = 0
    if absent:  # one read by id: which of them are still stored, hidden
        ids = [i for e, v in absent.items() for i in (e, kept_id(e, v))]
        hidden_now = {
            (e.id, e.version)
            for e in store.get_entities(project_id, ids, include_inactive=True)
            if not e.active
        }
        soft_deleted = sum(
            1 for e, v in absent.items() if (e, v) in hidden_now or (kept_id(e, v), v) in hidden_now
        )
    view = KnowledgeView(repos, tuple(hidden), tuple(sorted(shown)))
    return ResolvedTag(view, len(absent) - soft_deleted, soft_deleted)


def pinned_view(store: Store, project_id: str) -> KnowledgeView | None:
    """The view the project's pin holds (None: nothing pinned)."""
    facts = store.get_state(project_id, KB_PIN_SCOPE, "", KB_PIN_KEY)
    value = facts[0].value if facts else None
    if not isinstance(value, dict) or not value.get("repos"):
        return None
    return KnowledgeView(
        tuple(value["repos"]),
        tuple(value.get("hidden") or ()),
        tuple(value.get("shown") or ()),
    )


def view_for(store: Store, project_id: str, version: str | None) -> KnowledgeView | None:
    """The view a search sees: the pinned one (`version` None), none (`latest`), or the
    named tag's, resolved for this search."""
    if version is None:
        return pinned_view(store, project_id)
    if version == LATEST:
        return None
    return resolve_view(store, project_id, read_tag(store, project_id, version)).view


class ViewCache:
    """The views searches see, by project and version asked, each held while the project's
    index generation is the one read before it (read first: a pin written meanwhile changes
    the generation after it, so it is read again by the next search)."""

    SIZE = 64

    def __init__(self, store: Store) -> None:
        self.store = store
        self._held: OrderedDict[tuple[str, str | None], tuple[int, KnowledgeView | None]] = (
            OrderedDict()
        )
        self._lock = threading.Lock()

    def view(self, project_id: str, version: str | None) -> KnowledgeView | None:
        if version == LATEST:
            return None
        from .synced import generation  # numpy: not for the commands that only list

        gen = generation(self.store, project_id)
        key = (project_id, version)
        with self._lock:
            held = self._held.get(key)
        if held is not None and held[0] == gen:
            return held[1]
        found = view_for(self.store, project_id, version)
        self._hold(key, gen, found)
        return found

    def last(self, project_id: str) -> KnowledgeView | None:
        """The pinned view as the project's last search read it (read now if none did):
        what reads beside a search (assembly's listings) use, with no store call."""
        with self._lock:
            held = self._held.get((project_id, None))
        return held[1] if held is not None else self.view(project_id, None)

    def _hold(self, key: tuple[str, str | None], gen: int, found: KnowledgeView | None) -> None:
        with self._lock:
            self._held[key] = (gen, found)
            self._held.move_to_end(key)
            while len(self._held) > self.SIZE:
                self._held.popitem(last=False)


def entities_in_view(
    store: Store,
    project_id: str,
    view: KnowledgeView | None,
    entities: Sequence[Entity],
    types: Collection[str],
) -> list[Entity]:
    """Latest `entities` (of `types`, as a listing returns them) as `view` sees them: those
    written since its tag left out, the tagged earlier versions of `types` added."""
    if view is None:
        return list(entities)
    hidden = set(view.hidden_owner_ids)
    kept = [e for e in entities if e.id not in hidden]
    if view.shown_owner_ids:
        have = {e.id for e in kept}
        shown = store.get_entities(project_id, list(view.shown_owner_ids))
        kept += [e for e in shown if e.type in types and e.id not in have]
    return kept
