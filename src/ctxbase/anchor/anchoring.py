"""Anchoring what agents say: code blocks in messages, requirements, pasted documents.

`anchor_message(cb, event)` finds the fenced code blocks of a stored event, anchors each as
typed entities (code, sql, table) keyed by the event and the block, and links them: the event
GENERATES the code when an assistant, a model or a tool wrote it, and REFERENCES it when a
user pasted it. A generated function or class that redefines one distinctive symbol already
in the project is a new version of it (MODIFIES, 0.75); the requirements of the session
GENERATES the code; the message text REFERENCES the entities it names.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..components import ComponentsSource, components_of
from ..model import Entity, Event, Relation, make_entity_id
from .doc_versions import VERSION_WORDS as _VERSION_WORDS
from .entities import (
    EntitySpec,
    restore_vectors,
    specs_from_result,
    unit_entity_id,
    unit_vectors,
    upsert_versioned,
    write_entity,
)
from .weave import (
    Link,
    StoredRef,
    SymbolIndex,
    find_mentions,
    is_distinctive,
    links_for_refs,
    session_code_links,
    weave_requirement,
    write_links,
)

__all__ = [
    "GENERATING_EVENT_TYPES",
    "AnchorReport",
    "anchor_document",
    "anchor_message",
    "upsert_requirement",
]

# Event types whose code was written by the agent side (the others quote or paste code).
GENERATING_EVENT_TYPES = frozenset(
    {"assistant_message", "model_call", "tool_invocation", "tool_result", "internal_thought"}
)


@dataclass
class AnchorReport:
    """What one anchoring call stored."""

    source_id: str
    blocks: int = 0
    entity_ids: list[str] = field(default_factory=list)
    written: int = 0
    relations: list[Relation] = field(default_factory=list)
    languages: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def relation_types(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for rel in self.relations:
            counts[rel.type] = counts.get(rel.type, 0) + 1
        return counts


def _snippet_name(spec: EntitySpec, event_id: str, n: int, language: str) -> str:
    if spec.kind == "module" or spec.name in ("<module>", ""):
        return f"{language} block {n} of {event_id}"
    return spec.name


def anchor_message(
    cb: ComponentsSource,
    event: Event | str,
    *,
    project: str | None = None,
    sign_key: bytes | None = None,
    index: SymbolIndex | None = None,
    origin: str = "auto",
) -> AnchorReport:
    """Anchor the code blocks of a stored event and weave their edges (see module doc),
    with sources `<origin>:<rule>` (capture anchoring passes "ctxbase")."""
    cb = components_of(cb)
    from dataclasses import replace

    from .fenced import extract_code_blocks, parse_code

    ev = cb.get_event(event, project=project) if isinstance(event, str) else event
    pid = ev.project_id
    report = AnchorReport(source_id=ev.id)
    text = ev.text or ""
    blocks = extract_code_blocks(text)
    report.blocks = len(blocks)
    idx = index if index is not None else SymbolIndex.from_store(cb.store, pid)
    generated = ev.type in GENERATING_EVENT_TYPES
    base: dict[str, Any] = {
        "session_id": ev.session_id,
        "agent_id": ev.agent_id,
        "event_id": ev.id,
        "said_at": ev.ts,  # when it was said: what time decay and dates read
        "origin": "generated" if generated else "pasted",
    }
    if ev.agent_role:
        base["agent_role"] = ev.agent_role
    links: list[Link] = []
    own: set[str] = set()
    written: list[Entity] = []
    for n, block in enumerate(blocks, start=1):
        tag = block.info.split()[0] if block.tagged and block.info else block.language
        result = parse_code(block.code, tag)
        report.languages.append(result.language)
        report.warnings.extend(f"block {n}: {w}" for w in result.warnings)
        specs = specs_from_result(
            result,
            key=f"{ev.id}#b{n}",
            source_text=block.code,
            base_properties={**base, "block": n},
            line_offset=block.start_line,
            chunk_type="code",
        )
        refs: list[StoredRef] = []
        for spec in specs:
            spec = replace(spec, name=_snippet_name(spec, ev.id, n, result.language))
            if _is_test(spec):  # a message has no test path: a test_* function is a test
                key = f"{ev.id}#b{n}"
                spec = replace(
                    spec, type="test_case", id=unit_entity_id("test_case", key, spec.qualname)
                )
            wrote = upsert_versioned(cb, spec, project=pid, sign_key=sign_key, notify=False)
            written.append(wrote.entity)
            report.written += int(wrote.changed)
            report.entity_ids.append(spec.id)
            own.add(spec.id)
            rel_type = "GENERATES" if generated else "REFERENCES"
            props = {"block": n, "language": result.language}
            links.append(Link(ev.id, rel_type, spec.id, 0.9, "message_code", props))
            for key, kind in (("tables_read", "reads_table"), ("tables_written", "writes_table")):
                for table in spec.properties.get(key, []) or []:
                    refs.append(StoredRef(spec.id, spec.type, kind, str(table), 1.0))
            links.extend(_redefinitions(spec, idx, generated))
        links.extend(links_for_refs(refs, idx))
    prose = text
    for block in reversed(blocks):
        prose = prose[: block.start] + prose[block.end :]
    for m in find_mentions(prose, idx):
        if m.entity_id not in own and m.confidence >= 0.6:
            props = {"matched": m.matched}
            links.append(Link(ev.id, "REFERENCES", m.entity_id, m.confidence, "mentions", props))
    requirements = [
        e
        for e in cb.store.list_entities(pid, type="requirement")
        if e.properties.get("session_id") == ev.session_id
    ]
    links.extend(
        link
        for link in session_code_links(cb, pid, requirements, ev.session_id)
        if link.to_id in own
    )
    links = [replace(link, origin=origin) for link in links]
    report.relations = write_links(cb, links, project=pid, sign_key=sign_key)
    cb.notify_embedder()
    return report


def _is_test(spec: EntitySpec) -> bool:
    bare = spec.name.rsplit(".", 1)[-1]
    return (
        spec.type == "code"
        and spec.kind in ("function", "method", "class")
        and bare.startswith(("test_", "Test"))
    )


def _redefinitions(spec: EntitySpec, index: SymbolIndex, generated: bool) -> list[Link]:
    """A snippet defining a distinctive symbol that exists once in the project."""
    if spec.kind not in ("function", "class", "method", "table"):
        return []
    bare = str(spec.properties.get("title") or spec.name.rsplit(".", 1)[-1])
    owners = index.table(bare) if spec.kind == "table" else index.bare.get(bare, [])
    if spec.kind != "table" and not is_distinctive(bare):
        return []
    owners = [o for o in owners if o != spec.id]
    if len(owners) != 1:
        return []
    props = {"symbol": bare}
    if generated:
        return [Link(spec.id, "MODIFIES", owners[0], 0.75, "symbol_redefined", props)]
    return [Link(spec.id, "REFERENCES", owners[0], 0.8, "symbol_quoted", props)]


def upsert_requirement(
    cb: ComponentsSource,
    name: str,
    text: str = "",
    *,
    session_id: str | None = None,
    id: str | None = None,
    properties: Mapping[str, Any] | None = None,
    project: str | None = None,
) -> tuple[Entity, list[Relation]]:
    """Store a requirement and weave it: FOLLOWS cited documents, GENERATES session code."""
    cb = components_of(cb)
    props = dict(properties or {})
    if session_id is not None:
        props["session_id"] = session_id
    entity = cb.upsert_entity("requirement", name, text, id=id, properties=props, project=project)
    return entity, weave_requirement(cb, entity.id, project=entity.project_id)


def _document_key(title: str | None, path: str | None) -> str:
    if path:
        return path
    # Versions of one document share a key, so a new version supersedes the old one.
    return _VERSION_WORDS.sub("", (title or "document").strip()).strip().lower() or "document"


def anchor_document(
    cb: ComponentsSource,
    text: str,
    *,
    title: str | None = None,
    path: str | None = None,
    version: str | None = None,
    properties: Mapping[str, Any] | None = None,
    project: str | None = None,
    keep_history: bool = True,
    sign_key: bytes | None = None,
) -> AnchorReport:
    """Anchor a document given as text (an upload, an extracted PDF): cleaned, split by
    headings, with key terms; a new version under the same path or title supersedes the old
    one (sections it no longer has are kept as part of the old version, `latest=False`)."""
    cb = components_of(cb)
    from dataclasses import replace

    from .documents import clean_text, key_terms, parse_markdown

    pid = cb.resolve_project(project)
    cleaned = clean_text(text)
    result = parse_markdown(cleaned, path)
    doc_title = title or result.properties.get("title") or (path or "document")
    key = _document_key(str(doc_title), path)
    base: dict[str, Any] = {"source_path": path} if path else {}
    base.update(dict(properties or {}))
    specs = specs_from_result(
        result, key=key, source_text=cleaned, base_properties=base, skip_kinds=("code_block",)
    )
    doc_id = make_entity_id("document", f"{key}#document")
    terms = key_terms(cleaned, 10)
    report = AnchorReport(source_id=doc_id)
    for n, spec in enumerate(specs):
        if spec.kind == "section":
            # A section keeps its id across versions even when the title names the version.
            parts = [_VERSION_WORDS.sub("", part).strip() for part in spec.qualname.split(" > ")]
            specs[n] = replace(spec, id=unit_entity_id("section", key, " > ".join(parts)))
    out: list[EntitySpec] = []
    for spec in specs:
        if spec.kind == "document":
            headings = [s.properties.get("heading") for s in specs if s.kind == "section"]
            outline = "; ".join(str(h) for h in headings if h)[:800]
            props = {
                **spec.properties,
                "title": str(doc_title),
                "version": version or result.properties.get("version"),
                "key_terms": terms,
                "sections": [s.id for s in specs if s.kind == "section"],
            }
            summary = f"{doc_title}\nKey terms: {', '.join(terms)}\nSections: {outline}"
            spec = EntitySpec(
                doc_id, "document", str(doc_title), summary, "document", "document", props
            )
        out.append(spec)
    old = cb.store.get_entities(pid, [doc_id], include_inactive=True)
    old_sections = set(old[0].properties.get("sections", [])) if old else set()
    for spec in out:
        wrote = upsert_versioned(
            cb, spec, project=pid, keep_history=keep_history, sign_key=sign_key, notify=False
        )
        report.written += int(wrote.changed)
        report.entity_ids.append(spec.id)
    gone = sorted(old_sections - {s.id for s in out})
    if gone:
        # Sections the new version dropped stay as part of the old version: not latest.
        olds = cb.store.get_entities(pid, gone)
        vectors = unit_vectors(cb, pid, olds)
        for entity in olds:
            write_entity(cb, entity.model_copy(update={"latest": False}), notify=False)
        restore_vectors(cb, pid, vectors)
    index = SymbolIndex.from_store(cb.store, pid)
    links = [Link(doc_id, "CONTAINS", s.id, 1.0, "contains") for s in out if s.id != doc_id]
    for spec in out:
        for m in find_mentions(spec.text, index):
            if m.entity_id not in report.entity_ids and m.confidence >= 0.6:
                props = {"matched": m.matched}
                links.append(
                    Link(spec.id, "REFERENCES", m.entity_id, m.confidence, "mentions", props)
                )
    report.relations = write_links(cb, links, project=pid, sign_key=sign_key)
    cb.notify_embedder()
    return report
