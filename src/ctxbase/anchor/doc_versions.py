"""Versions of one document kept in separate files: only the newest is the latest.

Seed 000 tells of an outdated API document (V2.1) served as the current one (V3.2). A new
version of a document under the same path or title supersedes the old one where it is
anchored (`anchor_document`, `upsert_versioned`); a repository often keeps versions side by
side instead ("api_v2.1.md", "api_v3.2.md"). After each ingest, the documents of a
repository whose titles differ only in their version ("订单 API 文档 V2.1" / "订单 API 文档
V3.2", the version detected from the title or the front matter) are versions of one
document ("Guide V1" / "Guide V2" too: a whole-number version after a V/v or a version word,
never a bare number as in "Python 3"): the newest one's document and sections are `latest`,
the older ones' are not (kept, and found with `latest_only=False`). When the newest file is
removed, the next one is the latest again.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager

from ..components import Components
from ..model import Entity
from .entities import restore_vectors, unit_vectors, write_entity

__all__ = ["document_title_key", "mark_latest_versions", "version_order"]

# A version at the end of a title ("V3.2", "version 2.1", "版本 1.0"), as anchor_document
# strips it to key versions of one document. It also makes the ids of documents anchored
# without a path (and of their sections), so it stays as it is: widening it would change
# the ids of documents already stored.
VERSION_WORDS = re.compile(
    r"[\s_-]*(?:版本号?|version|ver\.?)?\s*[vV]?\d+(?:\.\d+){1,3}\s*$", re.IGNORECASE
)
# A whole-number version at the end of a title, after a version word or a V/v that starts a
# word ("Guide V2", "Guide version 3", "订单文档 版本2"; not "Python 3", "step 2", "IPv6"):
# grouping versions of one file by title only (no id is made from it).
_WHOLE_VERSION = re.compile(
    r"[\s_-]*(?:(?:版本号?|version|ver\.?)\s*[vV]?\s*|(?<![^\s_-])[vV]\.?)\d+\s*$", re.IGNORECASE
)
_NUMBER = re.compile(r"\d+")


def document_title_key(title: str) -> str:
    """The title without its version, folded: what versions of one document share."""
    key, found = VERSION_WORDS.subn("", title.strip())
    if not found:
        key = _WHOLE_VERSION.sub("", key)
    return key.strip().casefold()


def version_order(version: str) -> tuple[int, ...]:
    """A version's numbers, to compare: "3.2" > "2.10" > "2.9"."""
    return tuple(int(n) for n in _NUMBER.findall(version))


def _version(doc: Entity) -> str | None:
    """The document's version: as stored, else read from its title (a document stored
    before whole-number versions were read, "Guide V2", is grouped without re-parsing)."""
    from .documents import detect_version

    version = doc.properties.get("version")
    if isinstance(version, str) and version_order(version):
        return version
    return detect_version(str(doc.properties.get("title") or doc.name), "")


def _versioned_documents(
    cb: Components, pid: str, repo: str
) -> dict[str, list[tuple[Entity, tuple[int, ...]]]]:
    groups: dict[str, list[tuple[Entity, tuple[int, ...]]]] = {}
    for doc in cb.store.list_entities(pid, type="document", latest_only=False):
        props = doc.properties
        if (
            not doc.active
            or props.get("repo") != repo
            or not props.get("path")
            or "archived_from" in props  # a stored earlier version of the same file
        ):
            continue
        version = _version(doc)
        if version is None or not version_order(version):
            continue
        key = document_title_key(str(props.get("title") or doc.name))
        if key:
            groups.setdefault(key, []).append((doc, version_order(version)))
    return groups


def mark_latest_versions(
    cb: Components,
    pid: str,
    repo: str,
    writing: Callable[[], AbstractContextManager[None]] | None = None,
) -> list[str]:
    """Make the newest version of each versioned document of `repo` the latest, and its
    older versions not; returns the ids of the documents and sections changed. The
    changes are written in one transaction, `writing()` (default: the store's)."""
    wanted: dict[str, bool] = {}  # file id -> whether its document is the latest version
    for docs in _versioned_documents(cb, pid, repo).values():
        newest = max(order for _, order in docs)
        for doc, order in docs:
            latest = len(docs) == 1 or order == newest
            wanted[str(doc.properties.get("file_id") or doc.id)] = latest
    if not wanted:
        return []
    changed: list[Entity] = []
    for kind in ("document", "section"):
        for entity in cb.store.list_entities(pid, type=kind, latest_only=False):
            file_id = str(entity.properties.get("file_id") or entity.id)
            if (
                entity.active
                and file_id in wanted
                and "archived_from" not in entity.properties
                and entity.latest != wanted[file_id]
            ):
                changed.append(entity.model_copy(update={"latest": wanted[file_id]}))
    if changed:
        with (writing or cb.store.transaction)():
            _rewrite(cb, pid, changed)
    return [e.id for e in changed]


def _rewrite(cb: Components, pid: str, entities: Sequence[Entity]) -> None:
    """Store the entities' new `latest`, keeping their vectors (their text is the same)."""
    if not entities:
        return
    vectors = unit_vectors(cb, pid, entities)
    for entity in entities:
        write_entity(cb, entity, notify=False)
    restore_vectors(cb, pid, vectors)
