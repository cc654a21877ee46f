"""Knowledge-base versions: tag what the ingested repositories hold, pin a tag, roll back.

A tag (`tag_knowledge`, `ctxbase kb tag v1.2`) records which version of each entity of the
ingested repositories (all of them, or those named) is current: `{entity id: version}`,
in a state record (retrieve/kb_view.py describes the records). Pinning a tag
(`pin_knowledge`) makes every search and assembly of the project see those repositories
as they were when tagged; `unpin_knowledge` returns to the latest. Pinning is a view:
nothing an ingest wrote since the tag is deleted, an ingest while pinned still writes the
newest files (and the pinned view is recomputed after it), and unpinning shows them again.
A search may also name a version for one call (`SearchConfig.kb_version`: a tag, or
`latest` whatever is pinned).

What a tag can restore: a unit whose text changed keeps its previous version as
`<id>@v<n>` (entities.py), and a tagged unit that an ingest removes (gone from its file, or
its file deleted) is kept the same way before it is soft-deleted (`deactivate`). Not kept:
versions overwritten by an ingest with `keep_history=False`, entities removed by
`forget`, and a file's own summary unit (its path and outline), which shows the current
outline while the file exists. Those count as `missing` when a tag is pinned.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from ..components import Components, ComponentsSource, components_of
from ..errors import UnknownReposError, ValidationError
from ..model import Entity, StateFact
from ..retrieve.kb_view import (
    KB_PIN_KEY,
    KB_PIN_SCOPE,
    KB_TAG_SCOPE,
    LATEST,
    kept_id,
    read_tag,
    resolve_view,
)
from ..validation import check_name
from .entities import restore_vectors, unit_vectors, write_entity

__all__ = [
    "KnowledgeTag",
    "PinReport",
    "deactivate",
    "knowledge_tags",
    "pin_knowledge",
    "pinned_version",
    "refresh_pin",
    "tag_knowledge",
    "unpin_knowledge",
]

_TAG_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")


@dataclass(frozen=True)
class KnowledgeTag:
    """A recorded knowledge-base version."""

    name: str
    repos: tuple[str, ...]
    entities: int
    created_at: float
    pinned: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "repos": list(self.repos),
            "entities": self.entities,
            "created_at": self.created_at,
            "pinned": self.pinned,
        }


@dataclass(frozen=True)
class PinReport:
    """A pinned tag as searches see it: units hidden (written since), earlier versions
    shown instead of the latest, tagged versions no longer stored, and tagged versions
    soft-deleted (not shown until restored). `replaced`: the other version that was pinned
    before (a project pins one version at a time)."""

    tag: str
    repos: tuple[str, ...]
    hidden: int
    shown: int
    missing: int
    replaced: str | None = None
    soft_deleted: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "tag": self.tag,
            "repos": list(self.repos),
            "hidden": self.hidden,
            "shown": self.shown,
            "missing": self.missing,
            "replaced": self.replaced,
            "soft_deleted": self.soft_deleted,
        }


def _check_name(name: str) -> str:
    if not isinstance(name, str) or not _TAG_NAME.fullmatch(name) or name == LATEST:
        raise ValidationError(
            "name",
            "a version name is 1-100 letters, digits and ._- starting with a letter or digit, "
            f"and not {LATEST!r} (got {name!r})",
        )
    return name


def tag_knowledge(
    cb: ComponentsSource,
    name: str,
    *,
    repos: Sequence[str] | None = None,
    project: str | None = None,
) -> KnowledgeTag:
    """Record the current version of every entity of `repos` (default: every ingested
    repository) as version `name`; a name already recorded is refused."""
    cb = components_of(cb)
    pid = cb.resolve_project(project)
    _check_name(name)
    if cb.store.get_state(pid, KB_TAG_SCOPE, "", name):
        raise ValidationError("name", f"version {name!r} is already recorded")
    known = cb.store.list_repos(pid)
    chosen = tuple(dict.fromkeys(repos)) if repos else tuple(known)
    unknown = [repo for repo in chosen if repo not in known]
    if unknown:  # a typo: named with the repositories there are
        raise UnknownReposError(unknown, pid, sorted(known))
    if not chosen:
        raise ValidationError("repo", "nothing is ingested in this project: nothing to tag")
    entities = {
        e.id: e.version
        for e in cb.store.list_entities(pid, latest_only=False)
        if e.active
        and e.latest
        and e.properties.get("repo") in chosen
        and "archived_from" not in e.properties
    }
    now = time.time()
    value = {"repos": list(chosen), "entities": entities, "created_at": now}
    cb.store.set_state(
        StateFact(
            project_id=pid, scope=KB_TAG_SCOPE, scope_id="", key=name, value=value, cause="kb tag"
        )
    )
    return KnowledgeTag(name, chosen, len(entities), now)


def _pin_record(cb: Components, pid: str) -> dict[str, Any] | None:
    facts = cb.store.get_state(pid, KB_PIN_SCOPE, "", KB_PIN_KEY)
    value = facts[0].value if facts else None
    return value if isinstance(value, dict) and value.get("tag") else None


def _pinned_tag(cb: Components, pid: str) -> str | None:
    record = _pin_record(cb, pid)
    return None if record is None else str(record["tag"])


def knowledge_tags(cb: ComponentsSource, *, project: str | None = None) -> list[KnowledgeTag]:
    """The recorded versions, oldest first; `pinned` marks the one searches see."""
    cb = components_of(cb)
    pid = cb.resolve_project(project)
    pinned = _pinned_tag(cb, pid)
    tags = [
        KnowledgeTag(
            fact.key,
            tuple(fact.value.get("repos") or ()),
            len(fact.value.get("entities") or {}),
            float(fact.value.get("created_at") or fact.updated_at),
            pinned=fact.key == pinned,
        )
        for fact in cb.store.get_state(pid, KB_TAG_SCOPE, "")
        if isinstance(fact.value, dict)
    ]
    return sorted(tags, key=lambda t: (t.created_at, t.name))


def _write_pin(cb: Components, pid: str, name: str, cause: str) -> PinReport:
    resolved = resolve_view(cb.store, pid, read_tag(cb.store, pid, name))
    value = resolved.to_json(name)
    before = _pin_record(cb, pid)
    replaced = None if before is None or before["tag"] == name else str(before["tag"])
    if value != before:  # the same view again: no new record, no history
        fact = StateFact(
            project_id=pid,
            scope=KB_PIN_SCOPE,
            scope_id="",
            key=KB_PIN_KEY,
            value=value,
            cause=cause,
        )
        cb.store.set_state(fact)
        cb.store.touch_index(pid)  # after the record: searches read it again (ViewCache)
    view = resolved.view
    return PinReport(
        name,
        view.repos,
        len(view.hidden_owner_ids),
        len(view.shown_owner_ids),
        resolved.missing,
        replaced,
        resolved.soft_deleted,
    )


def pin_knowledge(cb: ComponentsSource, name: str, *, project: str | None = None) -> PinReport:
    """Make searches and assemblies see the knowledge base as of version `name` (kept
    across restarts, until `unpin_knowledge`)."""
    check_name("name", name)
    cb = components_of(cb)
    return _write_pin(cb, cb.resolve_project(project), name, "kb pin")


def pinned_version(cb: ComponentsSource, *, project: str | None = None) -> str | None:
    """The version searches and assemblies of the project see, or None (the latest)."""
    cb = components_of(cb)
    return _pinned_tag(cb, cb.resolve_project(project))


def unpin_knowledge(cb: ComponentsSource, *, project: str | None = None) -> str | None:
    """Return searches to the latest knowledge base; the version that was pinned, if any."""
    cb = components_of(cb)
    pid = cb.resolve_project(project)
    pinned = _pinned_tag(cb, pid)
    if pinned is not None:
        cb.store.delete_state(pid, KB_PIN_SCOPE, "", KB_PIN_KEY, "kb unpin")
        cb.store.touch_index(pid)
    return pinned


def refresh_pin(cb: ComponentsSource, pid: str) -> PinReport | None:
    """Recompute the pinned view after an ingest (what it wrote is hidden, what it
    replaced is shown)."""
    cb = components_of(cb)
    pinned = _pinned_tag(cb, pid)
    return None if pinned is None else _write_pin(cb, pid, pinned, "ingest")


def deactivate(
    cb: ComponentsSource, pid: str, ids: Sequence[str], sign_key: bytes | None = None
) -> None:
    """Soft-delete ingested entities, first keeping a copy `<id>@v<n>` of each one a tag
    holds at its current version, so the tag still finds it."""
    cb = components_of(cb)
    _keep_tagged(cb, pid, ids, sign_key)
    cb.store.set_active(pid, list(ids), False, removed=True)


def _tagged_versions(cb: Components, pid: str) -> set[tuple[str, int]]:
    out: set[tuple[str, int]] = set()
    for fact in cb.store.get_state(pid, KB_TAG_SCOPE, ""):
        if isinstance(fact.value, dict):
            out.update((str(i), int(v)) for i, v in (fact.value.get("entities") or {}).items())
    return out


def _keep_tagged(cb: Components, pid: str, ids: Iterable[str], sign_key: bytes | None) -> list[str]:
    wanted = [i for i in ids if not i.startswith("file:")]
    if not wanted:
        return []
    tagged = _tagged_versions(cb, pid)
    if not tagged:
        return []
    olds = [
        e
        for e in cb.store.get_entities(pid, wanted)
        if e.active and (e.id, e.version) in tagged and e.type != "file"
    ]
    copies = {kept_id(e.id, e.version): e for e in olds}
    if not copies:
        return []
    stored = {e.id for e in cb.store.get_entities(pid, list(copies), include_inactive=True)}
    kept: list[str] = []
    for copy_id, old in copies.items():
        if copy_id not in stored:
            _keep_copy(cb, pid, old, copy_id, sign_key)
            kept.append(copy_id)
    return kept


def _keep_copy(cb: Components, pid: str, old: Entity, copy_id: str, sign_key: bytes | None) -> None:
    """`old` stored again as `copy_id`, not latest, with its vectors (as entities.py keeps
    a superseded version)."""
    from .signing import sign_entity

    vectors = unit_vectors(cb, pid, [old])
    props = {k: v for k, v in old.properties.items() if k != "_sig"}
    props.update({"archived_from": old.id, "superseded_at": time.time(), "removed": True})
    copy = old.model_copy(update={"id": copy_id, "latest": False, "properties": props})
    if sign_key is not None:
        copy = copy.model_copy(
            update={"properties": {**props, "_sig": sign_entity(copy, sign_key)}}
        )
    write_entity(cb, copy, notify=False)
    renames = {
        a.item_id: b.item_id
        for a, b in zip(cb.entity_items(old), cb.entity_items(copy), strict=True)
    }
    restore_vectors(cb, pid, vectors, renames)
