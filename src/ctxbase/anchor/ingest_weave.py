"""The edges an ingest weaves, the same whatever order files came in and however runs ended.

Parser references and containment are kept with each file (its `file` entity), so every
ingest weaves them again for all files. Mentions (a document or section REFERENCES what its
text names: a title, a path, a code name) are found by reading the text, which an ingest
does only for new and changed files. Two things would leave them different from what a
clean ingest of the same folder weaves, and both are made up here:

- names that come or go: a file stored before a document titled "Payment Retry Guide"
  existed names it without an edge, and nothing rereads that unchanged file. So the stored
  documents and sections of the repository's unchanged files are searched for the names
  this ingest added (of the new and changed files' entities, or made the latest version),
  and those whose edges point at an entity this ingest changed or removed are woven again
  too (a title that went, or that a second document now carries); only those are re-woven,
  against every name, from their stored text (no file is read or parsed again).
- a run that stopped before weaving (killed, interrupted, failed): its files are stored
  with their new hashes, so the next run sees them unchanged. Before its first write an
  ingest records that its repository's weaving is pending (a state record of scope
  `ingest_weave`, key the repository); the record goes once the edges are written, and a
  run that finds it weaves every stored document and section of the repository again and
  closes the ingest edges of all its units that no rule finds any more.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Iterable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field

from ..components import Components
from ..model import Relation, StateFact
from ..store.repo_records import INGEST_WEAVE_SCOPE
from .weave import Link, StoredRef, SymbolIndex, find_mentions, links_for_refs, write_links

__all__ = ["WEAVE_SCOPE", "WeaveInput", "clear_pending", "mark_pending", "pending", "weave"]

# State record saying an ingest of the repository (its key) wrote files but not yet edges.
WEAVE_SCOPE = INGEST_WEAVE_SCOPE
_SOURCE_TYPES = ("document", "section")  # the units whose text is searched for mentions
_NAME_FIELDS = ("qualified", "suffixes", "bare", "tables", "paths", "basenames", "titles")


def pending(cb: Components, pid: str, repo: str) -> bool:
    return bool(cb.store.get_state(pid, WEAVE_SCOPE, "", repo))


def mark_pending(cb: Components, pid: str, repo: str) -> None:
    """Record, before an ingest writes anything, that its edges are not woven yet."""
    fact = StateFact(
        project_id=pid,
        scope=WEAVE_SCOPE,
        scope_id="",
        key=repo,
        value={"since": time.time()},
        cause="ingest",
    )
    cb.store.set_state(fact)


def clear_pending(cb: Components, pid: str, repo: str) -> None:
    cb.store.delete_state(pid, WEAVE_SCOPE, "", repo, "ingest")


@dataclass
class WeaveInput:
    """What one ingest collected for weaving.

    `mention_texts`: (unit id, text) of the new and changed files' documents and sections;
    `changed_from`: ids whose ingest edges no rule finds any more are closed; `touched`:
    entities this ingest wrote, removed or re-marked (their names changed the index);
    `repo_units`: every unit and file id of the repository, closed over when `full`."""

    refs: list[StoredRef] = field(default_factory=list)
    contains: list[tuple[str, str]] = field(default_factory=list)
    mention_texts: list[tuple[str, str]] = field(default_factory=list)
    changed_from: set[str] = field(default_factory=set)
    touched: set[str] = field(default_factory=set)
    repo_units: set[str] = field(default_factory=set)


def weave(
    cb: Components,
    pid: str,
    repo: str,
    given: WeaveInput,
    *,
    full: bool,
    sign_key: bytes | None,
    writing: Callable[[], AbstractContextManager[None]],
    done: bool,
) -> tuple[int, int, int]:
    """Write the edges the rules find now and close ingest edges of changed units that no
    rule produces any more, in one `writing()` transaction, with the pending record
    removed in it when `done`; (relations written, closed, units re-woven from stored
    text)."""
    index = SymbolIndex.from_store(cb.store, pid)
    changed_from = set(given.changed_from)
    if full:
        changed_from |= given.repo_units
    again = _stale_sources(cb, pid, repo, index, given, full)
    changed_from.update(uid for uid, _ in again)
    links: list[Link] = list(links_for_refs(given.refs, index))
    links.extend(Link(a, "CONTAINS", b, 1.0, "contains") for a, b in given.contains)
    for node_id, text in [*given.mention_texts, *again]:
        links.extend(_mention_links(node_id, text, index))
    sources = sorted({link.from_id for link in links} | changed_from)
    existing = {
        (r.from_id, r.type, r.to_id): r
        for r in cb.store.list_relations(pid, sources, direction="out")
        if r.properties.get("by") == "ingest"
    }
    wanted: dict[tuple[str, str, str], Link] = {}
    for link in links:
        key = (link.from_id, link.type, link.to_id)
        if key not in wanted or link.confidence > wanted[key].confidence:
            wanted[key] = link
    fresh = [
        link
        for key, link in wanted.items()
        if key not in existing or abs(existing[key].confidence - link.confidence) > 1e-9
    ]
    stale = [r for key, r in existing.items() if key not in wanted and r.from_id in changed_from]
    written: list[Relation] = []
    closed = 0
    if not (fresh or stale or done):
        return 0, 0, len(again)
    with writing():
        if fresh:
            written = write_links(
                cb, fresh, project=pid, extra_properties={"by": "ingest"}, sign_key=sign_key
            )
        now = time.time()
        for rel in stale:
            if cb.store.close_relation(pid, rel.id, now):
                closed += 1
        if done:
            clear_pending(cb, pid, repo)
    return len(written), closed, len(again)


def _mention_links(node_id: str, text: str, index: SymbolIndex) -> list[Link]:
    by_word: dict[str, list[str]] = {}
    found = find_mentions(text, index)
    for m in found:
        by_word.setdefault(m.matched, []).append(m.entity_id)
    # A name both repositories carry (README.md, a title) means this one's own.
    near = {eid for ids in by_word.values() for eid in index.near(ids, node_id)}
    return [
        Link(node_id, "REFERENCES", m.entity_id, m.confidence, "mentions", {"matched": m.matched})
        for m in found
        if m.entity_id != node_id and m.confidence >= 0.6 and m.entity_id in near
    ]


def _stale_sources(
    cb: Components,
    pid: str,
    repo: str,
    index: SymbolIndex,
    given: WeaveInput,
    full: bool,
) -> list[tuple[str, str]]:
    """(id, stored text) of the repository's documents and sections not read this run whose
    mentions may differ now: all of them when `full`, else those naming a name of the
    touched entities, or with a mention edge to one of them."""
    if not full and not given.touched:
        return []
    read = {uid for uid, _ in given.mention_texts}
    stored = {
        e.id: e.text or ""
        for kind in _SOURCE_TYPES
        for e in cb.store.list_entities(pid, type=kind, latest_only=False, repos=[repo])
        if e.active and e.id not in read and "archived_from" not in e.properties
    }
    if full or not stored:
        return sorted(stored.items())
    names = _names_of(index, given.touched)
    hit: set[str] = set()
    if names is not None:
        # every rule matches a name as written, so a text without it lower-cased is skipped
        words = {key.lower() for field in _NAME_FIELDS for key in getattr(names, field)}
        for uid, text in stored.items():
            lowered = text.lower()
            if any(word in lowered for word in words) and find_mentions(text, names):
                hit.add(uid)
    into = cb.store.list_relations(
        pid, sorted(given.touched), direction="in", types=["REFERENCES"], include_hidden=True
    )
    hit.update(r.from_id for r in into if r.from_id in stored and r.source == "auto:mentions")
    return [(uid, stored[uid]) for uid in sorted(hit)]


def _names_of(index: SymbolIndex, ids: Collection[str]) -> SymbolIndex | None:
    """The names of `ids` in `index`, each with one owner (so a name many carry is still
    found in a text): which texts name any of them, not what they link to."""
    part = SymbolIndex()
    empty = True
    for name in _NAME_FIELDS:
        source: dict[str, list[str]] = getattr(index, name)
        target: dict[str, list[str]] = getattr(part, name)
        for key, owners in source.items():
            mine = _first_in(owners, ids)
            if mine is not None:
                target[key] = [mine]
                empty = False
    return None if empty else part


def _first_in(owners: Iterable[str], ids: Collection[str]) -> str | None:
    return next((eid for eid in owners if eid in ids), None)
