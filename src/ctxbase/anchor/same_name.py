"""A document written again under the same name, with another id: one of them is current.

Seed 000's client names its entities itself (`upsert_entity(entity_type="document",
entity_id="doc_101", ...)`): a new edition of "Redis 规范" may come under a new id, or its
title may carry the version ("API 文档 V2.1", then "API 文档 V3.2": the article's outdated
document served as the current one). A document written with `upsert_entity` whose title,
without its version, is that of another current document of the project supersedes it:
the newer version when both titles carry one, else the one written last. The superseded one
is kept (latest=False, `superseded_by` and `superseded_at` in its properties, out of searches
and assemblies, read by id as history) and linked `<new> -MODIFIES-> <old>` (source
`auto:same_name`). Documents ingested from a repository are versioned by their files
(doc_versions.py), not here.

When the current one is hard-forgotten, the documents it superseded are not left without a
current one (`reinstate_superseded`): the newest version of them (else the one created
last) is current again, as a repository's next file is when the newest is removed.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from ..components import ComponentsSource, components_of
from ..model import Entity, Relation
from .doc_versions import document_title_key, version_order
from .entities import restore_vectors, unit_vectors, write_entity

__all__ = ["SAME_NAME_SOURCE", "reinstate_superseded", "supersede_same_name"]

SAME_NAME_SOURCE = "auto:same_name"
_TYPES = frozenset({"document"})


def _key(doc: Entity) -> str:
    return document_title_key(str(doc.properties.get("title") or doc.name))


def _order(doc: Entity) -> tuple[int, ...] | None:
    from .documents import detect_version

    version = doc.properties.get("version")
    if not (isinstance(version, str) and version_order(version)):
        version = detect_version(str(doc.properties.get("title") or doc.name), "")
    return version_order(version) if version else None


def _standalone(doc: Entity) -> bool:
    """A current document written by a caller: not a kept copy, not from a repository."""
    props = doc.properties
    return doc.active and not props.get("path") and "archived_from" not in props


def supersede_same_name(cb: ComponentsSource, written: Entity) -> Entity:
    """After `written` is stored: make it or a same-named document the current one (see
    the module doc); returns `written` as it now stands. Run in the write's transaction."""
    cb = components_of(cb)
    if written.type not in _TYPES or not written.latest or not _standalone(written):
        return written
    key = _key(written)
    if not key:
        return written
    pid = written.project_id
    others = [
        d
        for d in cb.store.list_entities(pid, type=written.type)
        if d.id != written.id and _standalone(d) and _key(d) == key
    ]
    if not others:
        return written
    group = [written, *others]
    orders = [_order(d) for d in group]
    if all(o is not None for o in orders):  # newest version; written last on a tie
        best = max(o for o in orders if o is not None)
        current = next(d for d, o in zip(group, orders, strict=True) if o == best)
    else:
        current = written
    now = time.time()
    old = [d for d in group if d.id != current.id]
    vectors = unit_vectors(cb, pid, old)
    stood = written
    for doc in old:
        props = dict(doc.properties)
        if "_sig" not in props:  # a signed one's properties are signed: latest alone changes
            props.update({"superseded_by": current.id, "superseded_at": now})
        kept = write_entity(
            cb, doc.model_copy(update={"latest": False, "properties": props}), notify=False
        )
        if doc.id == written.id:
            stood = kept
    restore_vectors(cb, pid, vectors)
    cb.store.upsert_relations(
        [
            Relation(
                project_id=pid,
                from_id=current.id,
                type="MODIFIES",
                to_id=doc.id,
                confidence=1.0,
                source=SAME_NAME_SOURCE,
                properties={"same_name": key},
            )
            for doc in old
        ]
    )
    return stood


def reinstate_superseded(cb: ComponentsSource, project_id: str, gone: Sequence[str]) -> list[str]:
    """After a forget of the documents `gone`: of the documents each superseded, the one
    to be current (the newest version, else the one created last) is current again, and
    the others are superseded by it. Returns the ids made current."""
    comps = components_of(cb)
    forgotten = set(gone)
    waiting: dict[str, list[Entity]] = {}
    for doc in comps.store.list_entities(project_id, type="document", latest_only=False):
        if not doc.latest and _standalone(doc) and doc.properties.get("superseded_by") in forgotten:
            waiting.setdefault(str(doc.properties["superseded_by"]), []).append(doc)
    made: list[str] = []
    for group in waiting.values():
        orders = [_order(d) for d in group]
        if all(o is not None for o in orders):
            best = max(o for o in orders if o is not None)
            current = next(d for d, o in zip(group, orders, strict=True) if o == best)
        else:
            current = max(group, key=lambda d: (d.created_at, d.id))
        props = dict(current.properties)
        if "_sig" not in props:  # a signed one's properties are signed: latest alone changes
            props.pop("superseded_by", None)
            props.pop("superseded_at", None)
        vectors = unit_vectors(comps, project_id, [current])
        stood = write_entity(
            comps, current.model_copy(update={"latest": True, "properties": props}), notify=False
        )
        restore_vectors(comps, project_id, vectors)
        supersede_same_name(comps, stood)  # the current others of its name, if any
        rest = [d for d in group if d.id != current.id and "_sig" not in d.properties]
        vectors = unit_vectors(comps, project_id, rest)
        for doc in rest:  # the others it stood with: superseded by it now
            moved = {**doc.properties, "superseded_by": current.id}
            write_entity(comps, doc.model_copy(update={"properties": moved}), notify=False)
        restore_vectors(comps, project_id, vectors)
        made.append(current.id)
    return made
